"""``course-grade``: grade a class, or self-check one notebook.

Teacher::

    course-grade init-course mycourse/                     # an nbgrader course with source/<assignment>/
    course-grade lesson03_scoring submitted/ --out grades/ [--jobs N] [--seed S] [--answer-key PATH] [--to-nbgrader]

Learner::

    course-grade --check exercises/lesson03_scoring/scoring.ipynb [--release RELEASED.ipynb]

Author (regenerate ``exercises/`` from ``solutions/`` with nbgrader)::

    python -m course_grader generate [ASSIGNMENT ...]

The answer key is ``source/<assignment>/`` of the nbgrader course around ``SUBMISSIONS_DIR``
(or the current folder), else the course repository's ``solutions/<assignment>/``; it is
printed and recorded in ``grades.json``. Results go to ``<out>/<assignment>/`` (``grades.csv``,
``grades.json``, ``feedback/``) and ``<out>/lms_grades.csv`` (one row per learner, one column
per assignment, total).

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
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Sequence

from course_grader.notebook import Assignment, NotebookError
from course_grader.runner import NotebookResult, SubmissionResult, TestOutcome, grade_submission
from course_grader.sandbox import (SANDBOX_UID_ENV, Sandbox, SandboxConfig, descendants, kill_descendants,
                                        set_child_subreaper)

__all__ = ["main", "resolve_assignment", "find_submissions", "grade_class", "grade_many", "check_notebook"]


def _project_root() -> Path:
    return Path(__file__).resolve().parents[1]


@dataclass
class AnswerKey:
    """The assignment used as the answer key, and where it was found (printed and recorded)."""

    assignment: Assignment
    origin: str

    @property
    def path(self) -> Path:
        return Path(self.assignment.origin or self.assignment.directory).resolve()


def resolve_assignment(spec: str, *, answer_key: str | None = None,
                       search_from: Sequence[str | Path] = ()) -> AnswerKey:
    """Find the answer key (instructor source) of an assignment.

    In order: an explicit ``answer_key`` path; ``spec`` itself when it is a path; the
    ``source/<spec>`` folder of the nbgrader course found upwards from ``search_from`` (the
    submissions folder) and then the current directory (its ``nbgrader_config.py`` may
    rename ``source``; the course repository's own config points to ``solutions/``); and
    last the course repository's ``solutions/<spec>``.

    Raises:
        NotebookError: nothing found, or an nbgrader course without that assignment.
    """
    if answer_key:
        key = Path(answer_key)
        if not key.exists():
            raise NotebookError(f"--answer-key {answer_key}: no such file or folder")
        assign = Assignment.load(key)
        if key.is_dir() and assign.name != spec and spec:
            assign = Assignment(spec, assign.directory, assign.notebooks, assign.origin)
        return AnswerKey(assign, "given with --answer-key")
    path = Path(spec)
    if path.exists() and (path.is_file() or any(path.glob("*.ipynb"))):
        return AnswerKey(Assignment.load(path), "given as a path")
    from course_grader.nbgrader_export import find_course_root, load_course
    root = find_course_root(*search_from, Path.cwd())
    if root is not None:
        course = load_course(root)
        cand = course.source / spec
        if cand.is_dir():
            return AnswerKey(Assignment.load(cand), f"the nbgrader course at {course.root}")
        raise NotebookError(f"the nbgrader course at {course.root} has no {cand.relative_to(course.root)}/: "
                            "give the assignment's name as in its source folder, or --answer-key PATH")
    cand = _project_root() / "solutions" / spec
    if cand.is_dir():
        return AnswerKey(Assignment.load(cand), "the course repository")
    raise NotebookError(f"no assignment {spec!r}: no nbgrader course (nbgrader_config.py) around the submissions "
                        "or the current folder has it in source/, and the course repository's solutions/ has "
                        "no such folder; give --answer-key PATH")


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
        code = ("import sys; sys.path.insert(0, %r); from course_grader.worker import main; main()"
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


def check_notebook(path: str | Path, assignment: str | None = None, config: SandboxConfig | None = None,
                   release: str | Path | None = None) -> int:
    """Learner self-check: run the public tests of one notebook and print an honest report.

    Works from the released notebook alone (see :mod:`course_grader.selfcheck`).

    Returns:
        0 when every public check passed, 1 when one failed or could not be checked.
    """
    from course_grader.selfcheck import render_check, self_check
    report = self_check(path, release=release, assignment=assignment, config=config)
    print(render_check(report), end="")
    return 0 if report.ok else 1


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="course-grade", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="Docs: docs/GRADING.md")
    p.add_argument("assignment", nargs="?", help="assignment name (folder in solutions/) or path")
    p.add_argument("submissions", nargs="?", help="folder with one sub-folder (or .ipynb) per learner")
    p.add_argument("--out", default="grades",
                   help="output folder (default: grades/); each assignment gets its own <out>/<assignment>/ "
                        "and <out>/lms_grades.csv sums them up")
    p.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)), help="parallel graders")
    p.add_argument("--seed", type=int, default=None, help="fixed seed for exact replay of random inputs")
    p.add_argument("--check", metavar="NOTEBOOK", help="self-check one notebook (public tests only)")
    p.add_argument("--answer-key", metavar="PATH",
                   help="the instructor's source folder or notebook to grade against (default: source/<assignment> "
                        "of the nbgrader course around SUBMISSIONS_DIR or the current folder, else the course "
                        "repository's solutions/<assignment>)")
    p.add_argument("--to-nbgrader", action="store_true",
                   help="also write the grades into the nbgrader course's gradebook.db, autograded/ and feedback/ "
                        "(SUBMISSIONS_DIR must be the course's submitted/ folder)")
    p.add_argument("--release", metavar="NOTEBOOK",
                   help="with --check: the released notebook, to run its test cells instead of edited ones")
    p.add_argument("--cell-timeout", type=float, default=SandboxConfig.cell_timeout)
    p.add_argument("--call-timeout", type=float, default=SandboxConfig.call_timeout)
    p.add_argument("--memory-mb", type=int, default=SandboxConfig.memory_bytes // 2**20)
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--unsafe-no-sandbox", action="store_true",
                   help="grade WITHOUT operating-system isolation when bubblewrap is unavailable (learner code "
                        "can then read the solutions and your files); recorded in every learner's notes")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``course-grade`` and ``python -m course_grader``."""
    from course_grader.gradebook import answer_key_digest, rotate_previous, write_gradebook, write_lms_csv
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["grade"]:
        args_list = args_list[1:]
    elif args_list[:1] == ["generate"]:
        from course_grader.generate import generate_exercises
        gen = argparse.ArgumentParser(prog="python -m course_grader generate",
                                      description="Regenerate exercises/ from solutions/ with nbgrader.")
        gen.add_argument("assignments", nargs="*")
        gen.add_argument("--root", default=str(_project_root()))
        gen.add_argument("--release-dir", default=None)
        gargs = gen.parse_args(args_list[1:])
        for path in generate_exercises(gargs.root, gargs.release_dir, gargs.assignments or None):
            print(f"generated {path}")
        return 0
    elif args_list[:1] == ["init-course"]:
        from course_grader.nbgrader_course import init_course
        ini = argparse.ArgumentParser(prog="course-grade init-course",
                                      description="Create an nbgrader course folder: nbgrader_config.py with the "
                                                  "course's settings, and source/<assignment>/ from solutions/.")
        ini.add_argument("directory")
        ini.add_argument("assignments", nargs="*", help="default: all")
        ini.add_argument("--course-id", default="attention-course")
        iargs = ini.parse_args(args_list[1:])
        try:
            made = init_course(iargs.directory, _project_root() / "solutions", iargs.assignments or None,
                               course_id=iargs.course_id)
        except FileNotFoundError as exc:
            print(f"course-grade init-course: {exc}", file=sys.stderr)
            return 2
        for path in made:
            print(f"created {path}")
        print(f"nbgrader course ready in {iargs.directory}: cd there and run nbgrader generate_assignment NAME")
        return 0
    args = _parser().parse_args(args_list)
    config = SandboxConfig(cell_timeout=args.cell_timeout, call_timeout=args.call_timeout,
                           memory_bytes=args.memory_mb * 2**20)
    # isolation (issue 9): refuse loudly without bubblewrap unless the teacher opted out
    from course_grader.sandbox import isolation_status
    isolated, why = isolation_status()
    if args.unsafe_no_sandbox or (args.check and not isolated):  # --check runs the learner's own code
        config.isolation = "none"
        if args.unsafe_no_sandbox and not args.check:
            print("course-grade: WARNING: grading WITHOUT a sandbox (--unsafe-no-sandbox); this is recorded in "
                  "the gradebook", file=sys.stderr)
    elif not isolated:
        print(f"course-grade: {why}", file=sys.stderr)
        return 2
    try:
        if args.check:
            return check_notebook(args.check, args.assignment, config, release=args.release)
        if not args.assignment or not args.submissions:
            _parser().print_usage(sys.stderr)
            print("course-grade: give ASSIGNMENT and SUBMISSIONS_DIR, or --check NOTEBOOK", file=sys.stderr)
            return 2
        key = resolve_assignment(args.assignment, answer_key=args.answer_key, search_from=[args.submissions])
        assignment = key.assignment
        submissions = find_submissions(args.submissions, assignment)
        course = None
        if args.to_nbgrader:
            from course_grader.nbgrader_export import find_course_root, load_course
            root = find_course_root(args.submissions)
            if root is None:
                raise NotebookError(f"--to-nbgrader: {args.submissions} is not inside an nbgrader course folder "
                                    "(no nbgrader_config.py above it)")
            course = load_course(root)
    except NotebookError as exc:
        print(f"course-grade: {exc}", file=sys.stderr)
        return 2
    if not args.quiet:
        print(f"answer key: {key.path} ({key.origin})")
    top = Path(args.out)
    out = top / assignment.name  # one gradebook per assignment: grading another one moves nothing aside
    out.mkdir(parents=True, exist_ok=True)
    os.chmod(out, 0o700)  # gradebooks are private (issue 9)
    os.chmod(top, 0o700)
    for old, new in rotate_previous(out):
        print(f"previous {old.name} kept as {new}")
    if not args.quiet:
        print(f"grading {len(submissions)} submission(s) of {assignment.name} with {args.jobs} job(s)")
    start = time.monotonic()
    results = grade_class(assignment, submissions, jobs=args.jobs, config=config, seed=args.seed,
                          progress=not args.quiet)
    for res in results:  # a worker names the assignment after the answer key's folder
        res.assignment = assignment.name
    paths = write_gradebook(results, assignment.columns, out,
                            answer_key={"path": str(key.path), "origin": key.origin,
                                        "sha256": answer_key_digest(assignment)})
    lms = write_lms_csv(top)
    if not args.quiet:
        print(f"wrote {paths['csv']}, {paths['json']} and {paths['feedback']}/ "
              f"in {time.monotonic() - start:.1f} s; class summary for an LMS: {lms}")
    if course is not None:
        from course_grader.nbgrader_export import export_to_nbgrader
        try:
            done = export_to_nbgrader(course, assignment, results)
        except NotebookError as exc:
            print(f"course-grade: --to-nbgrader: {exc}", file=sys.stderr)
            return 2
        if not args.quiet:
            print(f"wrote {len(done)} submission(s) into {course.db_url} and {course.feedback}/ "
                  f"(nbgrader export, formgrader and release_feedback now see them)")
    return 0
