"""``course-grade``: grade a class, or self-check one notebook.

Teacher::

    course-grade init-course mycourse/ --from solutions/   # an nbgrader course with source/<assignment>/
    course-grade lesson03_scoring submitted/ --out grades/ [--jobs N] [--seed S] [--answer-key PATH] [--to-nbgrader]

Learner::

    course-grade --check exercises/lesson03_scoring/scoring.ipynb [--release RELEASED.ipynb]

Authors regenerate ``exercises/`` from ``solutions/`` with ``bash scripts/generate_exercises.sh``
(the authoring and QA tools live in the repository's ``course_tools/grading_dev/``, not in the grader).

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
import unicodedata
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Sequence

from course_grader.i18n import N_, files_language, gettext_for, translate_message
from course_grader.notebook import Assignment, NotebookError
from course_grader.policy import SANDBOX_UID_BASE, WATCHDOG_GRACE_SECONDS
from course_grader.results import NotebookResult, Status, SubmissionResult, TestOutcome
from course_grader.sinks import terminal, terminal_block
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


def _inside(path: Path, folder: Path) -> bool:
    """``path`` is ``folder`` or below it (both resolved)."""
    return path == folder or folder in path.parents


def _learner_writable(path: Path, submissions: Path | None, course=None) -> str | None:
    """Why ``path`` (resolved) is a place learners may write, or None when none is detected:
    inside the submissions folder (or the nbgrader course's submitted/, autograded/,
    feedback/ folders), or writable by every user (a world-writable file, or a folder on the
    way without the sticky bit that keeps others from replacing what is in it)."""
    places = [(N_("the submissions folder"), submissions)]
    if course is not None:
        places += [(N_("the nbgrader course's submitted/ folder"), course.submitted),
                   (N_("the nbgrader course's autograded/ folder"), course.autograded),
                   (N_("the nbgrader course's feedback/ folder"), course.feedback)]
    for what, folder in places:
        if folder is not None and _inside(path, Path(folder).resolve()):
            return N_("it is inside {place} ({folder}), where learners' files are").format(
                place=what, folder=Path(folder).resolve())
    for part in (path, *path.parents):
        try:
            st = os.stat(part)
        except OSError:
            continue
        writable = st.st_mode & 0o002
        sticky = st.st_mode & 0o1000
        if writable and not (part != path and sticky):
            return N_("{path} can be written by every user of this machine").format(path=part)
    return None


def _check_key(key: AnswerKey, submissions: Path | None, course=None) -> AnswerKey:
    """Refuse an answer key (its folder or any of its notebooks) in a learner-writable place."""
    paths = [key.path, *(nb.path.resolve() for nb in key.assignment.notebooks.values())]
    teacher = files_language(nb.path for nb in key.assignment.notebooks.values())   # the teacher's lines
    _ = gettext_for(teacher)
    for path in paths:
        why = _learner_writable(path, submissions, course)
        if why:
            raise NotebookError(_("refusing the answer key {path}: {why}. Its test cells run with your rights, "
                                  "outside the sandbox, so it must be the course's own source/<assignment>/ or "
                                  "--answer-key PATH outside the submissions").format(
                                      path=path, why=translate_message(why, teacher)))
    return key


def resolve_assignment(spec: str, *, answer_key: str | None = None,
                       search_from: Sequence[str | Path] = (), submissions: str | Path | None = None) -> AnswerKey:
    """Find the answer key (instructor source) of an assignment.

    In order: an explicit ``answer_key`` path; ``spec`` when it is written as a path (it holds
    a ``/`` or ends in ``.ipynb``: a bare name is never looked up in the current folder, which
    may be the submissions folder, where a learner's folder can carry the assignment's name);
    else the ``source/<spec>`` folder of the nbgrader course found upwards from
    ``search_from`` (the submissions folder) and then the current directory (its
    ``nbgrader_config.py`` may rename ``source``; the course repository's own config points to
    ``solutions/``). An ``nbgrader_config.py`` inside a learner's folder is never read.

    The answer key's test cells run with the teacher's rights, outside the sandbox, so a key
    inside ``submissions`` (or the course's submitted/autograded/feedback folders) or in a
    world-writable place is refused.

    Raises:
        NotebookError: nothing found, an nbgrader course without that assignment, or a key in
            a learner-writable place.
    """
    from course_grader.nbgrader_export import find_course_root, load_course
    subs = Path(submissions).resolve() if submissions is not None else None
    starts = [Path(p) for p in search_from] + [Path.cwd()]
    if subs is not None:  # never a course config found inside a learner's folder
        starts = [p for p in starts if not (p.resolve() != subs and _inside(p.resolve(), subs))]
    root = find_course_root(*starts)
    if root is not None and subs is not None and root.resolve() != subs and _inside(root.resolve(), subs):
        raise NotebookError(f"the nbgrader_config.py found at {root} is inside the submissions folder {subs}: "
                            "run course-grade from the course folder, or give --answer-key PATH")
    if answer_key or "/" in spec or os.sep in spec or spec.endswith(".ipynb"):
        course = None  # the course around: its learner folders are refused as answer keys too
        if root is not None:
            try:
                course = load_course(root)
            except Exception:  # noqa: BLE001 - an explicit key needs no course; its own checks still apply
                course = None
        if answer_key:
            key = Path(answer_key)
            if not key.exists():
                raise NotebookError(f"--answer-key {answer_key}: no such file or folder")
            assign = Assignment.load(key)
            if key.is_dir() and assign.name != spec and spec:
                assign = Assignment(spec, assign.directory, assign.notebooks, assign.origin)
            return _check_key(AnswerKey(assign, N_("given with --answer-key")), subs, course)
        path = Path(spec)
        if not path.exists():
            raise NotebookError(f"no assignment at {spec}: give the assignment's name (a folder of the course's "
                                "source/) or the path of its source folder")
        return _check_key(AnswerKey(Assignment.load(path), N_("given as a path")), subs, course)
    if root is not None:
        course = load_course(root)
        cand = course.source / spec
        if cand.is_dir():
            return _check_key(AnswerKey(Assignment.load(cand), N_("the nbgrader course at {root}").format(root=course.root)),
                              subs, course)
        raise NotebookError(f"the nbgrader course at {course.root} has no {cand.relative_to(course.root)}/: "
                            "give the assignment's name as in its source folder, or --answer-key PATH")
    # never the package's own location: an installed grader has no answer keys (issue 18)
    raise NotebookError(f"no assignment {spec!r}: no nbgrader course (nbgrader_config.py) around the submissions "
                        "or the current folder; run course-grade inside the course (its source/ folder, or the "
                        "course repository, whose nbgrader_config.py names solutions/), or give --answer-key PATH")


#: Longest learner id accepted (nbgrader's student table holds ids of up to 128 characters).
MAX_ID_CHARS = 128
_ID_FORMULA_START = ("=", "+", "-", "@", "\uff1d", "\uff0b", "\uff0d", "\uff20")
_ID_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def learner_id_problem(name: str) -> str | None:
    """Why a folder (or notebook) name cannot be a learner id, or None when it can.

    Learner ids come from the names nbgrader gives the learners' folders and are used as they
    are everywhere (gradebook rows, feedback pages, nbgrader's database): refused here, once,
    rather than transformed later (two transformed names could become one id)."""
    if any(0xDC80 <= ord(c) <= 0xDCFF for c in name):
        return N_("the name is not valid UTF-8")
    if len(name) > MAX_ID_CHARS:
        return N_("the name is {length} characters long; a learner id has at most {most}").format(
            length=len(name), most=MAX_ID_CHARS)
    bad = sorted({c for c in name if unicodedata.category(c) in _ID_HIDDEN})
    if bad:
        return N_("the name holds control or invisible characters ({chars})").format(
            chars=", ".join(terminal(c) for c in bad[:5]))
    if name != name.strip():
        return N_("the name starts or ends with a space")
    if name.startswith(_ID_FORMULA_START):
        return N_("the name starts with = + - or @, which spreadsheets read as a formula")
    if not unicodedata.is_normalized("NFC", name):
        return N_("the name is not in Unicode normal form NFC (its letters can be written another way, "
                  "which LMS imports and some file systems treat as the same id)")
    return None


class Submissions(dict):
    """Learner id -> {notebook name: submitted path or None}, and ``refused``: the entries of the
    submissions folder that were not taken as a learner's submission, as (entry, reason) pairs,
    both ready to print."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.refused: list[tuple[str, str]] = []


def find_submissions(directory: str | Path, assignment: Assignment) -> Submissions:
    """Map learner id -> {notebook name: submitted path or None}.

    A learner's submission is a folder ``<id>/`` (the notebook in it, or in
    ``<id>/<assignment>/`` as nbgrader's ``submitted/`` has it) or, for a single-notebook
    assignment, a notebook ``<id>.ipynb``. Names starting with ``.`` are ignored. An id that
    :func:`learner_id_problem` refuses, and an id claimed twice (``bob/`` and ``bob.ipynb``, or
    two names that differ only in letter case), is not graded: it is listed in ``refused``
    with the reason (every entry claiming it named), never silently shadowed.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise NotebookError(f"submissions folder {directory} does not exist")
    names = list(assignment.notebooks)
    claims: dict[str, list[tuple[str, dict[str, Path | None]]]] = {}
    found = Submissions()
    for entry_name in sorted(os.listdir(directory)):
        if entry_name.startswith("."):
            continue
        entry = directory / entry_name
        if entry.is_file() and entry.suffix == ".ipynb" and len(names) == 1:
            ident, shown = entry.stem, f"{entry_name} (a notebook)"
            notebooks: dict[str, Path | None] = {names[0]: entry}
        elif entry.is_dir():
            ident, shown = entry_name, f"{entry_name}/ (a folder)"
            base = entry / assignment.name if (entry / assignment.name).is_dir() else entry
            notebooks = {}
            others = sorted(p for p in base.glob("*.ipynb") if not p.name.startswith("."))
            for nb in names:
                cand = base / f"{nb}.ipynb"
                if cand.exists():
                    notebooks[nb] = cand
                elif len(names) == 1 and len(others) == 1:
                    notebooks[nb] = others[0]
                else:
                    notebooks[nb] = None
        else:
            continue
        problem = learner_id_problem(ident)
        if problem:
            found.refused.append((terminal(shown), N_("not graded: {problem}; rename it to the learner's id").format(
                problem=problem)))
            continue
        claims.setdefault(ident, []).append((shown, notebooks))
    by_key: dict[str, list[str]] = {}
    for ident in claims:
        by_key.setdefault(ident.casefold(), []).append(ident)
    for ident, claimants in sorted(claims.items()):
        twins = by_key[ident.casefold()]
        if len(claimants) > 1:
            found.refused.append((terminal(ident), N_(
                "not graded: two submissions claim this learner id: {claims} (in {folder}); keep the learner's "
                "own and remove the other").format(claims=" and ".join(terminal(c[0]) for c in claimants),
                                                    folder=terminal(str(directory)))))
        elif len(twins) > 1:
            found.refused.append((terminal(ident), N_(
                "not graded: learner ids that differ only in letter case: {ids}; gradebooks, LMS imports and "
                "some file systems take them as one learner").format(ids=" and ".join(terminal(t) for t in twins))))
        else:
            found[ident] = claimants[0][1]
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
        # the worker's stderr (where anything printed in it goes) reaches the terminal only
        # through the terminal guard: a learner's text in a warning cannot carry escape sequences
        self.proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, bufsize=0, env=env,
                                     start_new_session=True)  # Ctrl-C reaches the grader, which stops its workers
        threading.Thread(target=_relay_stderr, args=(self.proc.stderr,), daemon=True).start()
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


def _relay_stderr(stream) -> None:
    """Copy a worker's stderr to ours, line by line, through :func:`course_grader.sinks.terminal`."""
    try:
        for raw in iter(lambda: stream.readline(8192), b""):
            line = raw.decode("utf-8", "surrogateescape") if isinstance(raw, bytes) else raw
            sys.stderr.write(terminal(line.rstrip("\n")) + "\n")
            sys.stderr.flush()
    except (OSError, ValueError):
        pass


class GradingInterrupted(Exception):
    """The run was stopped (SIGINT/SIGTERM) before every learner was graded; ``done`` holds
    the results that were complete (by position in the items)."""

    def __init__(self, done: dict[int, SubmissionResult]) -> None:
        super().__init__(f"grading stopped with {len(done)} result(s) complete")
        self.done = done


class Stop:
    """Stops a running :func:`grade_many` from a signal handler: no new learner is started and
    the workers grading (and their sandboxes) are killed; their learners get no result."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signum: int | None = None
        self._workers: set[_Worker] = set()
        self._lock = threading.Lock()

    def __call__(self, signum: int | None = None, frame=None) -> None:
        if self.signum is None:
            self.signum = signum
        self.event.set()
        for w in list(self._workers):
            try:
                os.killpg(w.proc.pid, 9)  # the worker and what runs in its session
            except OSError:
                try:
                    w.proc.kill()
                except OSError:
                    pass

    def add(self, worker: _Worker) -> None:
        self._workers.add(worker)
        if self.event.is_set():
            self()

    def discard(self, worker: _Worker) -> None:
        self._workers.discard(worker)


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
               seed: int | None = None, progress: bool = True, on_result=None,
               stop: Stop | None = None,
               watchdog_grace: float = WATCHDOG_GRACE_SECONDS, diagnose: bool = True) -> list[SubmissionResult]:
    """Grade (assignment, learner, notebooks) items, possibly of several assignments.

    ``diagnose``: name the typical mistake a failed test looks like (course_grader.diagnose),
    within what is left of each learner's time budget.

    ``jobs`` worker processes (each a child subreaper with its own sandbox fork server, and
    under the grader's own memory limit ``config.grader_memory_bytes``) grade in parallel;
    a worker that dies costs only the submission it was grading (it is restarted for the
    next), and so does a worker that overruns the learner's budget (:func:`learner_budget`):
    it is killed, and that learner's row says so. Every process started by learner code is
    killed before this returns.

    Each result carries the learner id of its item (identity is the teacher's, never read
    back from a worker). ``on_result(index, result)`` is called for each result as soon as it
    is known (before it is printed), e.g. to keep it on disk.

    Raises:
        GradingInterrupted: ``stop`` was triggered; the results complete so far are in it.

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
    stop = stop or Stop()

    def report(res: SubmissionResult) -> None:
        if progress:
            _ = gettext_for(res.language)   # the class's language: its learners' notebooks'
            print("  " + _("{student}: {total}/{max_total}  {status}  ({seconds} s)").format(
                student=terminal(res.student), total=f"{res.total:g}", max_total=f"{res.max_total:g}",
                status=terminal(translate_message(str(res.status), res.language)), seconds=f"{res.duration:.1f}")
                + ("  " + _("(provisional: {points} points to grade by hand in Formgrader)").format(
                    points=f"{res.pending_manual:g}") if res.pending_manual else ""),
                flush=True)

    def drive(slot: int) -> None:
        worker: _Worker | None = None
        try:
            while not stop.event.is_set():
                try:
                    i = todo.get_nowait()
                except queue.Empty:
                    return
                assignment, student, notebooks = items[i]
                job = {"assignment": str(assignment.origin or assignment.directory), "student": student,
                       "config": cfg, "seed": seed, "diagnose": diagnose,
                       "notebooks": {k: (str(v) if v else None) for k, v in notebooks.items()}}
                try:
                    if worker is None:  # the preflight's worker first (its fork server is warm)
                        worker = _SPARE_WORKERS.pop(slot, None) or _Worker(slot, config.grader_memory_bytes)
                        stop.add(worker)
                    # the worker's start (its torch import) and its fork server's: each within startup_timeout
                    reply = worker.run(job, learner_budget(assignment, config, watchdog_grace),
                                       2 * config.startup_timeout)
                    if "result" in reply:
                        res = SubmissionResult.from_dict(reply["result"])
                    else:
                        res = _error_result(assignment, student, str(reply.get("error")))
                except WorkerOverrun as exc:
                    if worker is not None:
                        stop.discard(worker)
                    worker = None
                    limit, started = exc.args
                    res = (_error_result(assignment, student, f"grading stopped: your notebook used up its time "
                                         f"budget of {limit:g} s (running your code and reading what it returned "
                                         "included)", Status.TIMEOUT) if started else
                           _error_result(assignment, student, f"the grading process did not start within {limit:g} s"))
                except Exception as exc:  # noqa: BLE001 - worker crash: record, restart worker
                    if worker is not None:
                        stop.discard(worker)
                        worker.proc.kill()
                        worker.close()
                    worker = None
                    if stop.event.is_set():
                        return  # stopped: this learner has no result (never a "grader error" row)
                    res = _error_result(assignment, student, f"the grading process of this submission died ({exc}); "
                                        "it was restarted for the others")
                if stop.event.is_set():
                    return
                res.student = student  # the teacher's id for this item, whatever the worker said
                with lock:
                    if on_result is not None:
                        on_result(i, res)
                    results[i] = res
                    report(res)
        finally:
            if worker is not None:
                stop.discard(worker)
                worker.close()

    threads = [threading.Thread(target=drive, args=(k,)) for k in range(max(1, min(jobs, len(items) or 1)))]
    try:
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():
                t.join(0.2)  # a timed wait: signal handlers run meanwhile
    finally:
        kill_descendants(baseline)  # nothing the learners started outlives grading
    if len(results) < len(items):
        raise GradingInterrupted(results)
    return [results[i] for i in range(len(items))]


#: Workers that ran the environment preflight, handed on to grade_many (slot -> worker).
_SPARE_WORKERS: dict[int, _Worker] = {}


def preflight_class(assignment: Assignment, config: SandboxConfig, seed: int | None = None) -> str:
    """The environment preflight of a class run: grade the answer key's own solution in a grading
    worker, as every learner will be graded (see :mod:`course_grader.preflight`). The worker is
    kept for the class run.

    Returns:
        A one-line summary.

    Raises:
        course_grader.preflight.EnvironmentFailure: the environment cannot grade (cause and fix).
    """
    from course_grader.preflight import (ENVIRONMENT_BROKEN_FIX, FIX_SETUP, NOTHING_WRITTEN, EnvironmentFailure,
                                         judge_answer_key_run)
    set_child_subreaper()
    baseline = frozenset(descendants())
    cfg = {f.name: getattr(config, f.name) for f in fields(config)}
    job = {"assignment": str(assignment.origin or assignment.directory), "student": "answer-key", "config": cfg,
           "seed": seed, "notebooks": {name: str(src.path) for name, src in assignment.notebooks.items()}}
    worker = _Worker(0, config.grader_memory_bytes)
    try:
        reply = worker.run(job, learner_budget(assignment, config), 2 * config.startup_timeout)
        if "result" not in reply:
            raise EnvironmentFailure(ENVIRONMENT_BROKEN_FIX, nothing=NOTHING_WRITTEN, fix=FIX_SETUP, cause=N_(
                "the grader failed on the answer key's own solution ({error})").format(
                    error=str(reply.get('error'))[:400]))
        summary = judge_answer_key_run(reply["result"])
    except EnvironmentFailure:
        worker.close()
        kill_descendants(baseline)
        raise
    except Exception as exc:  # noqa: BLE001 - the worker itself died
        worker.proc.kill()
        worker.close()
        kill_descendants(baseline)
        raise EnvironmentFailure(ENVIRONMENT_BROKEN_FIX, nothing=NOTHING_WRITTEN, fix=FIX_SETUP, cause=N_(
            "the grading process died on the answer key's own solution ({error})").format(
                error=str(exc)[:400])) from None
    _SPARE_WORKERS[0] = worker
    return summary


def _close_spare_workers() -> None:
    while _SPARE_WORKERS:
        _SPARE_WORKERS.popitem()[1].close()


def grade_class(assignment: Assignment, submissions: dict[str, dict[str, Path | None]], *, jobs: int,
                config: SandboxConfig, seed: int | None = None, progress: bool = True) -> list[SubmissionResult]:
    """Grade every learner's submission of one assignment; results sorted by learner."""
    items = [(assignment, student, submissions[student]) for student in sorted(submissions)]
    return grade_many(items, jobs=jobs, config=config, seed=seed, progress=progress)


def _refused_notebook(assignment: Assignment, name: str, message: str) -> NotebookResult:
    """The result of a notebook refused when the submissions were read (as the runner words it)."""
    from course_grader.protocol import safe_text
    prefix = f"{name}:" if len(assignment.notebooks) > 1 else ""
    message = safe_text(message, 1000)
    tests = [TestOutcome(t.grade_id, prefix + t.grade_id, 0.0, t.points, False,
                         f"your submission was refused: {message}", hidden=t.has_hidden)
             for t in assignment.notebooks[name].tests]
    return NotebookResult(name, Status.REFUSED, tests, notes=[message])


def _apply_refusals(assignment: Assignment, res: SubmissionResult, refused: dict[str, str]) -> None:
    """Put the notebooks refused at reading (sent to grading as missing) back as refused."""
    if not refused:
        return
    from course_grader.results import worst
    res.notebooks = [_refused_notebook(assignment, nb.notebook, refused[nb.notebook]) if nb.notebook in refused
                     else nb for nb in res.notebooks]
    res.status = worst([nb.status for nb in res.notebooks])
    res.total = round(sum(t.points for nb in res.notebooks for t in nb.tests), 4)


def check_notebook(path: str | Path, assignment: str | None = None, config: SandboxConfig | None = None,
                   release: str | Path | None = None) -> int:
    """Learner self-check: run the public tests of one notebook and print an honest report.

    Works from the released notebook alone (see :mod:`course_grader.selfcheck`).

    Returns:
        0 when every public check passed, 1 when one failed or could not be checked.
    """
    from course_grader.selfcheck import render_check, self_check
    report = self_check(path, release=release, assignment=assignment, config=config)
    print(terminal_block(render_check(report)), end="")  # the notebook's text and messages: no escapes
    return 0 if report.ok else 1


SUBCOMMANDS = ("grade", "check", "init-course", "set-id")


def _limits(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cell-timeout", type=float, default=SandboxConfig.cell_timeout,
                   help="wall seconds for one learner cell (default %(default)s)")
    p.add_argument("--call-timeout", type=float, default=SandboxConfig.call_timeout,
                   help="wall seconds for one call from a test into learner code (default %(default)s)")
    p.add_argument("--memory-mb", type=int, default=SandboxConfig.memory_bytes // 2**20,
                   help="memory of one learner (default %(default)s), over what the sandbox holds once torch is "
                        "imported (measured at start, so any torch build fits). As root (a memory cgroup): the "
                        "bound of all the learner's processes together, memfd and /tmp pages included. Without a "
                        "memory cgroup (an ordinary account): only the address space of each process "
                        f"(RLIMIT_AS), up to {SandboxConfig.max_processes} processes, not memory that is never "
                        "mapped (memfd)")
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
    sub = p.add_subparsers(dest="command", metavar="{grade,check,init-course,set-id}")
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
    g.add_argument("--regrade", action="store_true",
                   help="grade every learner again, ignoring the results an interrupted run kept in "
                        "<out>/<assignment>/journal/ (by default a re-run after Ctrl-C or SIGTERM takes the "
                        "learners whose submission and answer key are unchanged from there)")
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
    s = sub.add_parser("set-id", help="set your learner id once, for your variant of each assignment offline",
                       description="Store the id your course uses for you (on the hub it is your user name, set "
                                   "for you), so that your notebooks and --check use your variant of each "
                                   "assignment. Without an id, everyone offline gets the variant of 'default'.")
    s.add_argument("learner_id", metavar="ID")
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
    if args_list[0] == "--set-id" or args_list[0].startswith("--set-id="):
        return ["set-id", *([args_list[0].split("=", 1)[1]] if "=" in args_list[0] else []), *args_list[1:]]
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
    if args.command == "set-id":
        from course_grader import variants
        try:
            where = variants.set_learner_id(args.learner_id)
        except variants.LearnerIdError as exc:
            print(f"course-grade --set-id: {terminal(exc)}", file=sys.stderr)
            return 2
        except OSError as exc:
            print(f"course-grade --set-id: cannot write {terminal(variants.config_path())}: {terminal(exc)}",
                  file=sys.stderr)
            return 2
        print(f"learner id set to {terminal(variants.validate_learner_id(args.learner_id))!r} (stored in "
              f"{terminal(where)}); restart your notebooks' kernels and run them from the top to get your variant")
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
            from course_grader.preflight import EnvironmentFailure, check_sandbox
            try:  # the environment first: a broken one is never reported as the learner's failed checks
                check_sandbox(config)
            except EnvironmentFailure as exc:   # in the learner's language: their notebook's
                print(f"course-grade: {terminal(exc.translated(files_language([args.check])))}", file=sys.stderr)
                return 3
            return check_notebook(args.check, args.assignment, config, release=args.release)
        if not args.assignment or not args.submissions:
            _parser().print_usage(sys.stderr)
            print("course-grade: give ASSIGNMENT and SUBMISSIONS_DIR, or --check NOTEBOOK", file=sys.stderr)
            return 2
        key = resolve_assignment(args.assignment, answer_key=args.answer_key, search_from=[args.submissions],
                                 submissions=args.submissions)
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
        print(f"course-grade: {terminal(exc)}", file=sys.stderr)
        return 2
    return _grade_and_write(args, key, submissions, course, config)


def _grade_and_write(args: argparse.Namespace, key: AnswerKey, submissions: Submissions, course,
                     config: SandboxConfig) -> int:
    """Grade the class and write its gradebook (and nbgrader's), keeping a journal on the way.

    Exit status: 0 all graded and written; 1 some submissions were not graded (refused ids,
    two claims on one id) or not exported into nbgrader; 2 bad input; 128 + the signal's
    number when SIGINT/SIGTERM stopped the run (the results complete so far stay in the
    journal, the previous gradebook is untouched, and the same command resumes)."""
    import shutil
    import signal
    import tempfile
    from course_grader.gradebook import answer_key_digest, rotate_previous, write_gradebook, write_lms_csv
    from course_grader.journal import Journal, snapshot_submissions
    assignment = key.assignment
    teacher = files_language(nb.path for nb in assignment.notebooks.values())   # the teacher's lines
    _ = gettext_for(teacher)
    for entry, why in submissions.refused:
        print(f"course-grade: {terminal(entry)}: {terminal(translate_message(why, teacher))}", file=sys.stderr)
    if not args.quiet:
        print(_("answer key: {path} ({origin})").format(path=terminal(key.path),
                                                      origin=terminal(translate_message(key.origin, teacher))))
    from course_grader.preflight import EnvironmentFailure
    try:  # before anything is written or moved aside: an environment failure is never a grade
        summary = preflight_class(assignment, config, args.seed)
    except EnvironmentFailure as exc:
        print(f"course-grade: {terminal(exc.translated(teacher))}", file=sys.stderr)
        return 3
    if not args.quiet:
        print(_("preflight: {summary}").format(summary=terminal(translate_message(summary, teacher))))
    top = Path(args.out)
    out = top / assignment.name  # one gradebook per assignment: grading another one moves nothing aside
    out.mkdir(parents=True, exist_ok=True)
    os.chmod(out, 0o700)  # gradebooks are private (issue 9)
    os.chmod(top, 0o700)
    key_sha = answer_key_digest(assignment)
    cfg = {f.name: getattr(config, f.name) for f in fields(config)}
    journal = Journal(out / "journal", {"answer_key_sha256": key_sha, "seed": args.seed, "config": cfg})
    if args.regrade:
        journal.clear()
    stop = Stop()
    handlers = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    snap = Path(tempfile.mkdtemp(prefix="course-grade-graded-"))
    try:
        graded = snapshot_submissions(submissions, snap / "copies")
        sha = {s: g.sha256 for s, g in graded.items()}
        results: dict[str, SubmissionResult] = {}
        for student in sorted(submissions):
            old = journal.resumable(student, sha[student])
            if old is not None:
                results[student] = old
        if results and not args.quiet:
            print(_("resuming: {count} learner(s) already graded on the same submission and answer key are taken "
                    "from {journal} (--regrade grades them again)").format(count=len(results),
                                                                           journal=terminal(journal.folder)))
        todo = [s for s in sorted(submissions) if s not in results]
        if not args.quiet:
            print(_("grading {count} submission(s) of {assignment} with {jobs} job(s)").format(
                count=len(todo), assignment=terminal(assignment.name), jobs=args.jobs))
        items = [(assignment, s, dict(graded[s].paths)) for s in todo]

        def finish(i: int, res: SubmissionResult) -> None:
            student = items[i][1]
            _apply_refusals(assignment, res, graded[student].refused)
            res.assignment = assignment.name  # a worker names the assignment after the answer key's folder
            journal.record(res, sha[student])

        start = time.monotonic()
        try:
            if not stop.event.is_set():
                new = grade_many(items, jobs=args.jobs, config=config, seed=args.seed,
                                 progress=not args.quiet, on_result=finish, stop=stop)
                results.update({res.student: res for res in new})
        except GradingInterrupted:
            pass
        if stop.event.is_set():
            name = signal.Signals(stop.signum).name if stop.signum else "a signal"
            print("course-grade: " + _(
                "interrupted ({signal}): {done} of {total} learner(s) graded, kept in {journal}/; the previous "
                "gradebook in {out} is untouched. Run the same command again to grade the others (--regrade "
                "starts over).").format(signal=name, done=journal.entries(), total=len(submissions),
                                        journal=terminal(journal.folder), out=terminal(out)), file=sys.stderr)
            return 128 + int(stop.signum or signal.SIGTERM)
        ordered = [results[s] for s in sorted(results)]
        not_graded = [{"entry": entry, "reason": why} for entry, why in submissions.refused]
        staging = Path(tempfile.mkdtemp(prefix=".grades-new-", dir=out))
        try:  # the new gradebook is complete before the previous one moves aside
            write_gradebook(ordered, assignment.columns, staging,
                            answer_key={"path": str(key.path), "origin": key.origin, "sha256": key_sha},
                            submission_sha256=sha, not_graded=not_graded, written=assignment.written_columns)
            for previous, moved in rotate_previous(out):
                print(_("previous {old} kept as {new}").format(old=terminal(previous.name), new=terminal(moved)))
            for name in ("feedback", "grades.json", "grades.csv"):
                os.replace(staging / name, out / name)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        paths = {"csv": out / "grades.csv", "json": out / "grades.json", "feedback": out / "feedback"}
        lms = write_lms_csv(top)
        if not args.quiet:
            print(_("wrote {csv}, {json} and {feedback}/ in {seconds} s; class summary for an LMS: {lms}").format(
                csv=terminal(paths['csv']), json=terminal(paths['json']), feedback=terminal(paths['feedback']),
                seconds=f"{time.monotonic() - start:.1f}", lms=terminal(lms)))
        status = 0
        if submissions.refused:
            print("course-grade: " + _("{count} submission(s) not graded (see above; listed under not_graded in "
                                       "{json})").format(count=len(submissions.refused), json=terminal(paths['json'])),
                  file=sys.stderr)
            status = 1
        if course is not None:
            from course_grader.nbgrader_export import export_to_nbgrader
            problems: list[str] = []
            try:
                done = export_to_nbgrader(course, assignment, ordered, problems,
                                          graded={s: graded[s].paths for s in graded})
            except NotebookError as exc:
                print(f"course-grade: --to-nbgrader: {terminal(exc)}", file=sys.stderr)
                return 2
            for line in problems:  # each a marked template, its fields the learner's: translated, then guarded
                print(f"course-grade: --to-nbgrader: {terminal(translate_message(line, teacher))}", file=sys.stderr)
            if len(done) < len(ordered):
                print("course-grade: --to-nbgrader: " + _(
                    "{missing} of {total} learner(s) were NOT exported into {db} (see above); nbgrader's tools do "
                    "not have their grades").format(missing=len(ordered) - len(done), total=len(ordered),
                                                    db=terminal(course.db_url)), file=sys.stderr)
                status = 1
            if not args.quiet:
                print(_("wrote {count} submission(s) into {db} and {feedback}/ (nbgrader export, formgrader and "
                        "release_feedback now see them)").format(count=len(done), db=terminal(course.db_url),
                                                                 feedback=terminal(course.feedback)))
        journal.clear()  # the gradebook is complete: a new run grades everyone again
        return status
    finally:
        _close_spare_workers()
        for sig, old_handler in handlers.items():
            signal.signal(sig, old_handler)
        shutil.rmtree(snap, ignore_errors=True)
