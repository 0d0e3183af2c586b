"""``course-grade``: grade a class, or self-check one notebook.

Teacher::

    course-grade init-course mycourse/ --from solutions/   # an nbgrader course with source/<assignment>/
    course-grade lesson03_scoring submitted/ --out grades/ [--jobs N] [--seed S] [--answer-key PATH] [--to-nbgrader]

Learner::

    course-grade --check exercises/lesson03_scoring/scoring.ipynb [--release RELEASED.ipynb]

Authors regenerate ``exercises/`` from ``solutions/`` with ``bash scripts/generate_exercises.sh``
(the authoring and QA tools live in the repository's ``tests/grading_dev/``, not in the grader).

The answer key is ``--answer-key PATH``, else ``source/<assignment>/`` of the nbgrader course
around ``SUBMISSIONS_DIR`` or the current folder (the course repository's own
``nbgrader_config.py`` names ``solutions/``), never found through the installed package; it is
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
import select
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Sequence

from course_grader.notebook import Assignment, NotebookError
from course_grader.policy import WATCHDOG_GRACE_SECONDS
from course_grader.runner import NotebookResult, Status, SubmissionResult, TestOutcome
from course_grader.sandbox import (SANDBOX_UID_ENV, SandboxConfig, descendants, kill_descendants,
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
    # never the package's own location: an installed grader has no answer keys (issue 18)
    raise NotebookError(f"no assignment {spec!r}: no nbgrader course (nbgrader_config.py) around the submissions "
                        "or the current folder; run course-grade inside the course (its source/ folder, or the "
                        "course repository, whose nbgrader_config.py names solutions/), or give --answer-key PATH")


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


def _error_result(assignment: Assignment, student: str, message: str,
                  status: Status = Status.GRADER_ERROR) -> SubmissionResult:
    multi = len(assignment.notebooks) > 1
    nbs = []
    for name, src in assignment.notebooks.items():
        tests = [TestOutcome(t.grade_id, (f"{name}:" if multi else "") + t.grade_id, 0.0, t.points, False,
                             f"not graded: {message}", hidden=t.has_hidden) for t in src.tests]
        nbs.append(NotebookResult(name, status, tests, notes=[message]))
    return SubmissionResult(student, assignment.name, status, 0.0, assignment.max_points, nbs)


#: First uid handed to parallel workers' sandboxes in root mode (no passwd entry needed).
SANDBOX_UID_BASE = 61000


class WorkerOverrun(Exception):
    """A grading worker did not answer within the learner's budget (it was killed)."""


class _Worker:
    def __init__(self, slot: int, memory_bytes: int = 0) -> None:
        code = ("import sys; sys.path.insert(0, %r); from course_grader.worker import main; main(%d)"
                % (str(_project_root()), memory_bytes))
        env = dict(os.environ, OMP_NUM_THREADS="1", OMP_WAIT_POLICY="PASSIVE")
        uid = SANDBOX_UID_BASE + slot
        if os.geteuid() == 0 and _uid_free(uid):
            env[SANDBOX_UID_ENV] = str(uid)
        self.proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     bufsize=0, env=env)
        self.buffer = b""

    def _line(self, limit: float, started: bool) -> bytes:
        """The worker's next line, or b"" at its end; raises :class:`WorkerOverrun` (after
        killing the worker) when none came within ``limit`` seconds."""
        assert self.proc.stdout is not None
        deadline = time.monotonic() + limit
        while b"\n" not in self.buffer:
            ready, _, _ = select.select([self.proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                self.proc.kill()
                self.close()
                raise WorkerOverrun(limit, started)
            chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
            if not chunk:
                return b""
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line

    def run(self, job: dict, timeout: float, startup: float) -> dict:
        """Grade one job. The worker says when its sandbox fork server is up (within ``startup``
        seconds); from then on, a worker that has not answered within ``timeout`` seconds is
        killed (with its fork server and sandboxes) and :class:`WorkerOverrun` raised: the
        per-learner budget holds whatever the worker was doing, decoding a learner's value
        included."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(job).encode() + b"\n")
        reply: dict = {"started": True}
        for limit, started in ((startup, False), (timeout, True)):
            if "started" not in reply:
                break
            line = self._line(limit, started)
            if not line:
                raise RuntimeError(f"grading worker exited ({self.proc.poll()})")
            reply = json.loads(line)
        return reply

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


def learner_budget(assignment: Assignment, config: SandboxConfig, grace: float = WATCHDOG_GRACE_SECONDS) -> float:
    """Wall seconds after which one learner's grading is killed: the per-notebook budget for
    each notebook, plus ``grace`` for starting the sandbox and writing the result."""
    return config.submission_timeout * max(1, len(assignment.notebooks)) + grace


def grade_many(items: list[tuple[Assignment, str, dict[str, Path | None]]], *, jobs: int, config: SandboxConfig,
               seed: int | None = None, progress: bool = True,
               watchdog_grace: float = WATCHDOG_GRACE_SECONDS) -> list[SubmissionResult]:
    """Grade (assignment, learner, notebooks) items, possibly of several assignments.

    ``jobs`` worker processes (each a child subreaper with its own sandbox fork server, and
    under the grader's own memory limit ``config.grader_memory_bytes``) grade in parallel;
    a worker that dies costs only the submission it was grading (it is restarted for the
    next), and so does a worker that overruns the learner's budget (:func:`learner_budget`):
    it is killed, and that learner's row says so. Every process started by learner code is
    killed before this returns.

    Returns:
        Results in the order of ``items``.
    """
    set_child_subreaper()
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
                        worker = _Worker(slot, config.grader_memory_bytes)
                    # the worker's start (its torch import) and its fork server's: each within startup_timeout
                    reply = worker.run(job, learner_budget(assignment, config, watchdog_grace),
                                       2 * config.startup_timeout)
                    if "result" in reply:
                        res = SubmissionResult.from_dict(reply["result"])
                    else:
                        res = _error_result(assignment, student, str(reply.get("error")))
                except WorkerOverrun as exc:
                    worker = None
                    limit, started = exc.args
                    res = (_error_result(assignment, student, f"grading stopped: your notebook used up its time "
                                         f"budget of {limit:g} s (running your code and reading what it returned "
                                         "included)", Status.TIMEOUT) if started else
                           _error_result(assignment, student, f"the grading process did not start within {limit:g} s"))
                except Exception as exc:  # noqa: BLE001 - worker crash: record, restart worker
                    res = _error_result(assignment, student, f"the grading process of this submission died ({exc}); "
                                        "it was restarted for the others")
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

    threads = [threading.Thread(target=drive, args=(k,)) for k in range(max(1, min(jobs, len(items) or 1)))]
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


SUBCOMMANDS = ("grade", "check", "init-course")


def _limits(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cell-timeout", type=float, default=SandboxConfig.cell_timeout,
                   help="wall seconds for one learner cell (default %(default)s)")
    p.add_argument("--call-timeout", type=float, default=SandboxConfig.call_timeout,
                   help="wall seconds for one call from a test into learner code (default %(default)s)")
    p.add_argument("--memory-mb", type=int, default=SandboxConfig.memory_bytes // 2**20,
                   help="memory of a learner's sandbox (default %(default)s)")
    p.add_argument("--unsafe-no-sandbox", action="store_true",
                   help="run learner code WITHOUT operating-system isolation when bubblewrap is unavailable "
                        "(learner code can then read the solutions and your files); recorded in every "
                        "learner's notes")


def _parser() -> argparse.ArgumentParser:
    """``course-grade`` and its subcommands (``course-grade --help`` lists them all)."""
    p = argparse.ArgumentParser(prog="course-grade", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="Without a subcommand, `course-grade ASSIGNMENT SUBMISSIONS_DIR ...` means "
                                       "`grade` and `course-grade --check NOTEBOOK` means `check`. "
                                       "Docs: docs/GRADING.md")
    sub = p.add_subparsers(dest="command", metavar="{grade,check,init-course}")
    g = sub.add_parser("grade", help="grade a class: one sub-folder (or .ipynb) per learner",
                       description="Grade every learner's submission of one assignment in the sandbox.")
    g.add_argument("assignment", help="assignment name (folder of the course's source/) or path")
    g.add_argument("submissions", help="folder with one sub-folder (or .ipynb) per learner")
    g.add_argument("--out", default="grades",
                   help="output folder (default: grades/); each assignment gets its own <out>/<assignment>/ "
                        "and <out>/lms_grades.csv sums them up")
    g.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)), help="parallel graders")
    g.add_argument("--seed", type=int, default=None, help="fixed seed for exact replay of random inputs")
    g.add_argument("--answer-key", metavar="PATH",
                   help="the instructor's source folder or notebook to grade against (default: source/<assignment> "
                        "of the nbgrader course around SUBMISSIONS_DIR or the current folder)")
    g.add_argument("--to-nbgrader", action="store_true",
                   help="also write the grades into the nbgrader course's gradebook.db, autograded/ and feedback/ "
                        "(SUBMISSIONS_DIR must be the course's submitted/ folder)")
    g.add_argument("--quiet", action="store_true")
    _limits(g)
    c = sub.add_parser("check", help="a learner's self-check of one notebook (public tests only)",
                       description="Run the public tests of one notebook in the sandbox and say what was and was "
                                   "not checked.")
    c.add_argument("check", metavar="NOTEBOOK")
    c.add_argument("--release", metavar="NOTEBOOK",
                   help="the released notebook, to run its test cells instead of edited ones")
    c.add_argument("--assignment", default=None, help="the assignment name, if the notebook does not record it")
    _limits(c)
    i = sub.add_parser("init-course", help="create an nbgrader course folder from the course's source assignments",
                       description="Create an nbgrader course folder: nbgrader_config.py with the course's "
                                   "settings, and source/<assignment>/ from the course repository's solutions/.")
    i.add_argument("directory")
    i.add_argument("assignments", nargs="*", help="default: all")
    i.add_argument("--course-id", default="attention-course")
    i.add_argument("--from", dest="source", metavar="SOLUTIONS_DIR", default=None,
                   help="the folder of instructor source assignments (the course repository's solutions/; "
                        "default: ./solutions when it exists)")
    return p


def _normalise_argv(args_list: list[str]) -> list[str]:
    """The forms without a subcommand: ``ASSIGNMENT SUBMISSIONS ...`` -> ``grade ...``,
    ``--check NOTEBOOK ...`` -> ``check NOTEBOOK ...``."""
    if not args_list or args_list[0] in SUBCOMMANDS or args_list[0] in ("-h", "--help"):
        return args_list
    if "--check" in args_list:
        k = args_list.index("--check")
        rest = args_list[:k] + args_list[k + 2:]
        options, positional, i = [], [], 0
        while i < len(rest):
            if rest[i] in _VALUE_OPTIONS:
                options += rest[i:i + 2]
                i += 2
            elif rest[i].startswith("-"):
                options.append(rest[i])
                i += 1
            else:
                positional.append(rest[i])
                i += 1
        out = ["check", *args_list[k + 1:k + 2], *options]
        if positional:  # `course-grade ASSIGNMENT --check NB`: the assignment name
            out += ["--assignment", positional[0]]
        return out
    return ["grade", *args_list]


_VALUE_OPTIONS = ("--release", "--assignment", "--cell-timeout", "--call-timeout", "--memory-mb", "--out", "--jobs",
                  "--seed", "--answer-key")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``course-grade`` and ``python -m course_grader``."""
    from course_grader.gradebook import answer_key_digest, rotate_previous, write_gradebook, write_lms_csv
    args_list = _normalise_argv(list(sys.argv[1:] if argv is None else argv))
    if not args_list:
        _parser().print_help(sys.stderr)
        return 2
    args = _parser().parse_args(args_list)
    if args.command == "init-course":
        from course_grader.nbgrader_course import init_course
        source = Path(args.source) if args.source else Path("solutions")
        if not source.is_dir():
            print(f"course-grade init-course: no source assignments in {source.resolve()}: give --from "
                  "SOLUTIONS_DIR (the course repository's solutions/ folder)", file=sys.stderr)
            return 2
        try:
            made = init_course(args.directory, source, args.assignments or None, course_id=args.course_id)
        except FileNotFoundError as exc:
            print(f"course-grade init-course: {exc}", file=sys.stderr)
            return 2
        for path in made:
            print(f"created {path}")
        print(f"nbgrader course ready in {args.directory}: cd there and run nbgrader generate_assignment NAME")
        return 0
    if args.command == "check":
        args.submissions = None
        args.assignment = args.assignment
    else:
        args.check = None
        args.release = None
    config = SandboxConfig(cell_timeout=args.cell_timeout, call_timeout=args.call_timeout,
                           memory_bytes=args.memory_mb * 2**20)
    # isolation (issue 9): refuse loudly without bubblewrap unless the teacher opted out
    from course_grader.sandbox import isolation_status
    isolated, why = isolation_status()
    if args.unsafe_no_sandbox or (args.check and not isolated):  # --check runs the learner's own code
        config.isolation = "none"
        if not args.unsafe_no_sandbox:
            from course_grader.sandbox import _HOW_TO_GET
            config.unsafe_reason = why.split(_HOW_TO_GET)[0].rstrip(": ")
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
        problems: list[str] = []
        try:
            done = export_to_nbgrader(course, assignment, results, problems)
        except NotebookError as exc:
            print(f"course-grade: --to-nbgrader: {exc}", file=sys.stderr)
            return 2
        for line in problems:
            print(f"course-grade: --to-nbgrader: {line}", file=sys.stderr)
        if not args.quiet:
            print(f"wrote {len(done)} submission(s) into {course.db_url} and {course.feedback}/ "
                  f"(nbgrader export, formgrader and release_feedback now see them)")
    return 0
