"""``course-grade``: grade a class, or self-check one notebook.

Teacher::

    course-grade lesson03_scoring submitted/ --out grades/ [--jobs N] [--seed S]

Learner::

    course-grade --check exercises/lesson03_scoring/scoring.ipynb

Author (regenerate ``exercises/`` from ``solutions/`` with nbgrader)::

    python -m course_lib.grading generate [ASSIGNMENT ...]

``SUBMISSIONS_DIR`` holds one folder per learner, containing the notebook directly
(``alice/scoring.ipynb``) or in a folder named after the assignment (nbgrader's
``submitted/<student>/<assignment>/<notebook>.ipynb``); ``alice.ipynb`` files directly in
``SUBMISSIONS_DIR`` work too for single-notebook assignments.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import subprocess
import sys
import threading
import time
from dataclasses import fields
from pathlib import Path
from typing import Sequence

from course_lib.grading.notebook import Assignment, NotebookError
from course_lib.grading.runner import NotebookResult, SubmissionResult, TestOutcome, grade_submission
from course_lib.grading.sandbox import (SANDBOX_UID_ENV, Sandbox, SandboxConfig, descendants, kill_descendants,
                                        set_child_subreaper)

__all__ = ["main", "resolve_assignment", "find_submissions", "grade_class", "grade_many", "check_notebook"]


def _project_root() -> Path:
    return Path(__file__).resolve().parents[2]


def resolve_assignment(spec: str) -> Assignment:
    """Load an assignment from a path or a name looked up in ``solutions/``.

    Looks in the current directory and its parents, then in the course repository.
    """
    path = Path(spec)
    if path.exists():
        return Assignment.load(path)
    roots = [Path.cwd(), *Path.cwd().parents, _project_root()]
    for root in roots:
        cand = root / "solutions" / spec
        if cand.is_dir():
            return Assignment.load(cand)
    raise NotebookError(f"no assignment {spec!r}: give a path, or a name of a folder in solutions/")


def find_submissions(directory: str | Path, assignment: Assignment) -> dict[str, dict[str, Path | None]]:
    """Map learner id -> {notebook name: submitted path or None}."""
    directory = Path(directory)
    if not directory.is_dir():
        raise NotebookError(f"submissions folder {directory} does not exist")
    names = list(assignment.notebooks)
    found: dict[str, dict[str, Path | None]] = {}
    for entry in sorted(directory.iterdir()):
        if entry.name.startswith("."):
            continue
        if entry.is_file() and entry.suffix == ".ipynb" and len(names) == 1:
            found[entry.stem] = {names[0]: entry}
            continue
        if not entry.is_dir():
            continue
        base = entry / assignment.name if (entry / assignment.name).is_dir() else entry
        notebooks: dict[str, Path | None] = {}
        others = sorted(p for p in base.glob("*.ipynb") if not p.name.startswith("."))
        for nb in names:
            cand = base / f"{nb}.ipynb"
            if cand.exists():
                notebooks[nb] = cand
            elif len(names) == 1 and len(others) == 1:
                notebooks[nb] = others[0]
            else:
                notebooks[nb] = None
        found[entry.name] = notebooks
    return found


def _error_result(assignment: Assignment, student: str, message: str) -> SubmissionResult:
    multi = len(assignment.notebooks) > 1
    nbs = []
    for name, src in assignment.notebooks.items():
        tests = [TestOutcome(t.grade_id, (f"{name}:" if multi else "") + t.grade_id, 0.0, t.points, False,
                             f"not graded: {message}", hidden=t.has_hidden) for t in src.tests]
        nbs.append(NotebookResult(name, "grader error", tests, notes=[message]))
    return SubmissionResult(student, assignment.name, "grader error", 0.0, assignment.max_points, nbs)


#: First uid handed to parallel workers' sandboxes in root mode (no passwd entry needed).
SANDBOX_UID_BASE = 61000


class _Worker:
    def __init__(self, slot: int) -> None:
        code = ("import sys; sys.path.insert(0, %r); from course_lib.grading.worker import main; main()"
                % str(_project_root()))
        env = dict(os.environ, OMP_NUM_THREADS="1", OMP_WAIT_POLICY="PASSIVE")
        uid = SANDBOX_UID_BASE + slot
        if os.geteuid() == 0 and _uid_free(uid):
            env[SANDBOX_UID_ENV] = str(uid)
        self.proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env=env)

    def run(self, job: dict) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"grading worker exited ({self.proc.poll()})")
        return json.loads(line)

    def close(self) -> None:
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
            self.proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


def _uid_free(uid: int) -> bool:
    """No user and no running process has this uid (so it can be a sandbox's own)."""
    import pwd
    try:
        pwd.getpwuid(uid)
        return False
    except KeyError:
        pass
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and os.stat(f"/proc/{entry}").st_uid == uid:
                return False
        except OSError:
            continue
    return True


def grade_many(items: list[tuple[Assignment, str, dict[str, Path | None]]], *, jobs: int, config: SandboxConfig,
               seed: int | None = None, progress: bool = True) -> list[SubmissionResult]:
    """Grade (assignment, learner, notebooks) items, possibly of several assignments.

    With ``jobs > 1``, ``jobs`` worker processes (each a child subreaper with its own
    sandbox fork server) grade in parallel; with ``jobs == 1`` this process grades. Either
    way every process started by learner code is killed before this returns.

    Returns:
        Results in the order of ``items``.
    """
    set_child_subreaper()
    if jobs <= 1:
        Sandbox.prepare(config)  # the fork server outlives this call: keep it out of the sweep
    baseline = frozenset(descendants())
    todo: queue.Queue = queue.Queue()
    for i in range(len(items)):
        todo.put(i)
    results: dict[int, SubmissionResult] = {}
    lock = threading.Lock()
    cfg = {f.name: getattr(config, f.name) for f in fields(config)}

    def report(res: SubmissionResult) -> None:
        if progress:
            print(f"  {res.student}: {res.total:g}/{res.max_total:g}  {res.status}  ({res.duration:.1f} s)", flush=True)

    def drive(slot: int) -> None:
        worker: _Worker | None = None
        try:
            while True:
                try:
                    i = todo.get_nowait()
                except queue.Empty:
                    return
                assignment, student, notebooks = items[i]
                job = {"assignment": str(assignment.origin or assignment.directory), "student": student,
                       "config": cfg, "seed": seed,
                       "notebooks": {k: (str(v) if v else None) for k, v in notebooks.items()}}
                try:
                    if worker is None:
                        worker = _Worker(slot)
                    reply = worker.run(job)
                    if "result" in reply:
                        res = SubmissionResult.from_dict(reply["result"])
                    else:
                        res = _error_result(assignment, student, str(reply.get("error")))
                except Exception as exc:  # noqa: BLE001 - worker crash: record, restart worker
                    res = _error_result(assignment, student, f"grading worker failed: {exc}")
                    if worker is not None:
                        worker.proc.kill()
                        worker.close()
                    worker = None
                with lock:
                    results[i] = res
                    report(res)
        finally:
            if worker is not None:
                worker.close()

    if jobs <= 1:
        for i, (assignment, student, notebooks) in enumerate(items):
            try:
                res = grade_submission(assignment, student, notebooks, config=config, seed=seed)
            except Exception as exc:  # noqa: BLE001 - record a row whatever happens
                res = _error_result(assignment, student, f"internal grader error: {exc}")
            kill_descendants(baseline)
            results[i] = res
            report(res)
    else:
        threads = [threading.Thread(target=drive, args=(k,)) for k in range(min(jobs, len(items) or 1))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    kill_descendants(baseline)  # nothing the learners started outlives grading
    return [results[i] for i in range(len(items))]


def grade_class(assignment: Assignment, submissions: dict[str, dict[str, Path | None]], *, jobs: int,
                config: SandboxConfig, seed: int | None = None, progress: bool = True) -> list[SubmissionResult]:
    """Grade every learner's submission of one assignment; results sorted by learner."""
    items = [(assignment, student, submissions[student]) for student in sorted(submissions)]
    return grade_many(items, jobs=jobs, config=config, seed=seed, progress=progress)


def check_notebook(path: str | Path, assignment: str | None = None, config: SandboxConfig | None = None) -> int:
    """Learner self-check: run the public tests of one notebook and print the feedback."""
    from course_lib.grading.feedback import render_text
    path = Path(path)
    spec = assignment or path.resolve().parent.name
    assign = resolve_assignment(spec)
    name = path.stem if path.stem in assign.notebooks else next(iter(assign.notebooks))
    notebooks: dict[str, Path | None] = {n: (path if n == name else None) for n in assign.notebooks}
    if len(assign.notebooks) > 1:
        assign = Assignment(assign.name, assign.directory, {name: assign.notebooks[name]})
        notebooks = {name: path}
    result = grade_submission(assign, path.stem, notebooks, config=config, public_only=True)
    print(render_text(result), end="")
    print("(public tests only; the grader also runs hidden tests on fresh inputs)")
    return 0 if all(t.passed or t.skipped for nb in result.notebooks for t in nb.tests) else 1


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="course-grade", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="Docs: docs/GRADING.md")
    p.add_argument("assignment", nargs="?", help="assignment name (folder in solutions/) or path")
    p.add_argument("submissions", nargs="?", help="folder with one sub-folder (or .ipynb) per learner")
    p.add_argument("--out", default="grades", help="output folder (default: grades/)")
    p.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)), help="parallel graders")
    p.add_argument("--seed", type=int, default=None, help="fixed seed for exact replay of random inputs")
    p.add_argument("--check", metavar="NOTEBOOK", help="self-check one notebook (public tests only)")
    p.add_argument("--cell-timeout", type=float, default=SandboxConfig.cell_timeout)
    p.add_argument("--call-timeout", type=float, default=SandboxConfig.call_timeout)
    p.add_argument("--memory-mb", type=int, default=SandboxConfig.memory_bytes // 2**20)
    p.add_argument("--quiet", action="store_true")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``course-grade`` and ``python -m course_lib.grading``."""
    from course_lib.grading.gradebook import rotate_previous, write_gradebook
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["grade"]:
        args_list = args_list[1:]
    elif args_list[:1] == ["generate"]:
        from course_lib.grading.generate import generate_exercises
        gen = argparse.ArgumentParser(prog="python -m course_lib.grading generate",
                                      description="Regenerate exercises/ from solutions/ with nbgrader.")
        gen.add_argument("assignments", nargs="*")
        gen.add_argument("--root", default=str(_project_root()))
        gen.add_argument("--release-dir", default=None)
        gargs = gen.parse_args(args_list[1:])
        for path in generate_exercises(gargs.root, gargs.release_dir, gargs.assignments or None):
            print(f"generated {path}")
        return 0
    args = _parser().parse_args(args_list)
    config = SandboxConfig(cell_timeout=args.cell_timeout, call_timeout=args.call_timeout,
                           memory_bytes=args.memory_mb * 2**20)
    try:
        if args.check:
            return check_notebook(args.check, args.assignment, config)
        if not args.assignment or not args.submissions:
            _parser().print_usage(sys.stderr)
            print("course-grade: give ASSIGNMENT and SUBMISSIONS_DIR, or --check NOTEBOOK", file=sys.stderr)
            return 2
        assignment = resolve_assignment(args.assignment)
        submissions = find_submissions(args.submissions, assignment)
    except NotebookError as exc:
        print(f"course-grade: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for old, new in rotate_previous(out):
        print(f"previous {old.name} kept as {new}")
    if not args.quiet:
        print(f"grading {len(submissions)} submission(s) of {assignment.name} with {args.jobs} job(s)")
    start = time.monotonic()
    results = grade_class(assignment, submissions, jobs=args.jobs, config=config, seed=args.seed,
                          progress=not args.quiet)
    paths = write_gradebook(results, assignment.columns, out)
    if not args.quiet:
        print(f"wrote {paths['csv']}, {paths['json']} and {paths['feedback']}/ "
              f"in {time.monotonic() - start:.1f} s")
    return 0
