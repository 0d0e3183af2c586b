"""Grade one submission: learner cells in the sandbox, test cells in this (trusted) process.

For each notebook of the assignment, :func:`grade_notebook` walks the plan made by
:func:`course_lib.grading.notebook.plan_submission`: a learner cell is sent to the
sandbox (errors are recorded and grading goes on, like running with errors allowed);
a test cell — always the instructor's source version — runs here, in a namespace built
by :meth:`course_lib.grading.rpc.Session.namespace`. A test cell scores its points when
it runs to the end without an exception, nothing otherwise (nbgrader's rule), and the
learner gets the failure message, never the hidden test source.
"""

from __future__ import annotations

import ast
import contextlib
import io
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

from course_lib.grading import checks
from course_lib.grading.notebook import (Assignment, NotebookError, SourceNotebook, TestCell,
                                         load_notebook_json, plan_submission, scan_imports, to_python)
from course_lib.grading.rpc import LearnerError, Session
from course_lib.grading.sandbox import SandboxConfig, SandboxDied, set_child_subreaper

__all__ = ["TestOutcome", "NotebookResult", "SubmissionResult", "grade_notebook", "grade_submission"]


@dataclass
class TestOutcome:
    """The result of one test cell."""

    grade_id: str
    column: str
    points: float
    max_points: float
    passed: bool
    message: str = ""
    details: str = ""
    hidden: bool = False
    skipped: bool = False


@dataclass
class NotebookResult:
    """Results for one notebook of a submission."""

    notebook: str
    status: str
    tests: list[TestOutcome] = field(default_factory=list)
    cells: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    duration: float = 0.0


@dataclass
class SubmissionResult:
    """Everything recorded for one learner and one assignment."""

    student: str
    assignment: str
    status: str
    total: float
    max_total: float
    notebooks: list[NotebookResult] = field(default_factory=list)
    seed: str = "random"
    duration: float = 0.0

    @property
    def scores(self) -> dict[str, float]:
        return {t.column: t.points for nb in self.notebooks for t in nb.tests}

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "SubmissionResult":
        nbs = []
        for nb in data.get("notebooks", []):
            tests = [TestOutcome(**t) for t in nb.get("tests", [])]
            nbs.append(NotebookResult(**{**nb, "tests": tests}))
        return cls(**{**data, "notebooks": nbs})


_STATUS_RANK = {"ok": 0, "timeout": 2, "sandbox died": 2, "invalid notebook": 3, "missing": 3, "grader error": 4}


def _fail_all(source: SourceNotebook, column_prefix: str, message: str, public_only: bool) -> list[TestOutcome]:
    return [TestOutcome(t.grade_id, column_prefix + t.grade_id, 0.0, t.points, False, message,
                        hidden=t.has_hidden) for t in source.tests]


def _assert_message(exc: BaseException, test: TestCell, source_text: str, filename: str,
                    public_only: bool) -> str:
    text = str(exc).strip()
    if text:
        return text
    lineno = None
    for frame, line in traceback.walk_tb(exc.__traceback__):
        if frame.f_code.co_filename == filename:
            lineno = line
    if lineno is None:
        return "a check failed"
    if not public_only and lineno in test.hidden_lines:
        return "a hidden check failed (hidden tests are not shown)"
    lines = source_text.split("\n")
    shown = lines[lineno - 1].strip() if 0 < lineno <= len(lines) else ""
    return f"check failed: {shown}" if shown else "a check failed"


def _no_code(source: str) -> bool:
    try:
        return not ast.parse(source).body
    except SyntaxError:
        return False


def _run_test(session: Session | None, test: TestCell, column: str, seed_base: bytes | None,
              public_only: bool) -> TestOutcome:
    source_text = test.release_source if public_only else test.source
    out = TestOutcome(test.grade_id, column, 0.0, test.points, False, hidden=test.has_hidden)
    if public_only and _no_code(source_text):
        out.skipped = True
        out.message = "hidden test: run only by the grader"
        return out
    if session is None:
        out.message = "not run: the sandbox could not start"
        return out
    try:
        ns = session.namespace()
    except SandboxDied as exc:
        out.message = str(exc)
        return out
    filename = f"<test {test.grade_id}>"
    try:
        code = compile(source_text, filename, "exec")
    except SyntaxError as exc:
        out.message = f"the test cell does not compile ({exc.msg}); tell your teacher"
        return out
    checks._begin_test(seed_base, test.grade_id)
    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            exec(code, ns)
    except AssertionError as exc:
        out.message = _assert_message(exc, test, source_text, filename, public_only)
        out.details = str(getattr(exc, "learner_traceback", "") or "")
    except LearnerError as exc:
        out.message = str(exc)
        out.details = exc.learner_traceback
    except SandboxDied as exc:
        out.message = str(exc)
    except NameError as exc:
        name = getattr(exc, "name", None)
        out.message = (f"the test needs `{name}`, which your notebook does not define (did the cell that "
                       "defines it fail? see the cell errors below)" if name else f"NameError: {exc}")
    except Exception as exc:  # noqa: BLE001 - any failure of a test cell costs its points
        out.message = f"the test raised {type(exc).__name__}: {exc}"[:2000]
    else:
        out.passed = True
        out.points = test.points
    finally:
        checks._begin_test(None, "")
    return out


def grade_notebook(source: SourceNotebook, submission: str | Path | None, *,
                   config: SandboxConfig | None = None, seed: int | None = None, column_prefix: str = "",
                   public_only: bool = False) -> NotebookResult:
    """Grade one learner notebook against its source notebook.

    Args:
        source: the instructor's source notebook.
        submission: path of the learner's notebook (None: missing).
        config: sandbox limits.
        seed: fixed seed for exact replay; None draws fresh inputs from ``os.urandom``.
        column_prefix: prefix of gradebook columns (``"nb:"`` for multi-notebook assignments).
        public_only: run only the public part of each test (learner self-check).

    Returns:
        A :class:`NotebookResult`; never raises for problems in the submission.
    """
    config = config or SandboxConfig()
    set_child_subreaper()
    start = time.monotonic()
    result = NotebookResult(source.name, "ok")
    if submission is None:
        result.status = "missing"
        result.tests = _fail_all(source, column_prefix, "no notebook submitted", public_only)
        return result
    try:
        learner = load_notebook_json(submission)
    except NotebookError as exc:
        result.status = "invalid notebook"
        result.notes.append(str(exc))
        result.tests = _fail_all(source, column_prefix, f"your notebook could not be read: {exc}", public_only)
        return result
    plan = plan_submission(source, learner)
    result.notes.extend(plan.notes)
    learner_sources = [s.source for s in plan.steps if s.kind == "learner"]
    imported = scan_imports(learner_sources)
    if imported:
        result.notes.append("Your code imports the course's reference implementation ("
                            + ", ".join(imported) + "). The grader checks what your code does, not where "
                            "it comes from, but your teacher can see this note.")
    seed_base = None if seed is None else str(seed).encode()
    session: Session | None = Session(config, source.trusted_imports)
    try:
        try:
            assert session is not None
            session.start()
        except SandboxDied as exc:
            result.notes.append(str(exc))
            if session is not None:
                session.close()
            session = None
        for step in plan.steps:
            over_budget = time.monotonic() - start > config.submission_timeout
            if step.kind == "learner":
                if over_budget or session is None:
                    result.cells.append({"index": step.index, "status": "skipped",
                                         "message": "not run: grading time budget exceeded" if over_budget
                                         else "not run: the sandbox could not start"})
                    continue
                if not step.source.strip():
                    continue
                run = session.exec_cell(step.index, to_python(step.source))
                result.cells.append(asdict(run))
            else:
                assert step.test is not None
                column = column_prefix + step.test.grade_id
                if over_budget:
                    result.tests.append(TestOutcome(step.test.grade_id, column, 0.0, step.test.points, False,
                                                    f"not run: the grading time budget of "
                                                    f"{config.submission_timeout:g} s was exceeded",
                                                    hidden=step.test.has_hidden))
                    continue
                result.tests.append(_run_test(session, step.test, column, seed_base, public_only))
    finally:
        if session is not None:
            session.close()
            result.notes.extend(session.notes)
            if session.timed_out_ever:
                result.status = "timeout"
            elif session.died_ever:
                result.status = "sandbox died"
        elif result.status == "ok":
            result.status = "sandbox died"
    order = {t.grade_id: i for i, t in enumerate(source.tests)}
    result.tests.sort(key=lambda t: order.get(t.grade_id, 0))
    result.duration = round(time.monotonic() - start, 3)
    return result


def grade_submission(assignment: Assignment, student: str, notebooks: dict[str, Path | None], *,
                     config: SandboxConfig | None = None, seed: int | None = None,
                     public_only: bool = False) -> SubmissionResult:
    """Grade all notebooks of one learner's submission.

    Every process started by the learner's code is killed before this returns.

    Args:
        assignment: the loaded assignment.
        student: the learner's id (folder name).
        notebooks: notebook name -> submitted path (None when missing).
        config: sandbox limits.
        seed: fixed seed for exact replay (None: fresh random inputs).
        public_only: learner self-check mode.
    """
    start = time.monotonic()
    multi = len(assignment.notebooks) > 1
    results: list[NotebookResult] = []
    for name, source in assignment.notebooks.items():
        try:
            results.append(grade_notebook(source, notebooks.get(name), config=config, seed=seed,
                                          column_prefix=f"{name}:" if multi else "", public_only=public_only))
        except Exception as exc:  # noqa: BLE001 - a grader bug must still record a row
            nb = NotebookResult(name, "grader error", notes=[f"internal grader error: {type(exc).__name__}: {exc}"])
            nb.tests = _fail_all(source, f"{name}:" if multi else "", "not graded: internal grader error",
                                 public_only)
            results.append(nb)
    statuses = sorted({r.status for r in results}, key=lambda s: -_STATUS_RANK.get(s, 1))
    status = "ok" if statuses == ["ok"] else "; ".join(s for s in statuses if s != "ok")
    total = sum(t.points for r in results for t in r.tests)
    max_total = sum(t.max_points for r in results for t in r.tests if not t.skipped)
    return SubmissionResult(student, assignment.name, status, round(total, 4), round(max_total, 4), results,
                            seed="random" if seed is None else str(seed),
                            duration=round(time.monotonic() - start, 3))
