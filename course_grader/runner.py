"""Grade one submission: learner cells in the sandbox, test cells in this (trusted) process.

For each notebook of the assignment, :func:`grade_notebook` walks the plan made by
:func:`course_grader.notebook.plan_submission`: a learner cell is sent to the
sandbox (errors are recorded and grading goes on, like running with errors allowed);
a test cell — always the instructor's source version — runs here, in a namespace built
by :meth:`course_grader.rpc.Session.namespace`. A test cell scores its points when
it runs to the end without an exception, nothing otherwise (nbgrader's rule), and the
learner gets the failure message, never the hidden test source.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import io
import os
import time
import traceback
from dataclasses import asdict
from pathlib import Path
from typing import Any

from course_grader import checks, variants
from course_grader.i18n import N_, notebook_language
from course_grader.notebook import Assignment, NotebookError, SourceNotebook, TestCell, plan_submission
from course_grader.protocol import safe_text
from course_grader.rpc import LearnerError, Session
from course_grader.results import NotebookResult, Status, SubmissionResult, TestOutcome, worst
from course_grader.sandbox import Sandbox, SandboxConfig, SandboxDied, SandboxStartFailed, set_child_subreaper, unsafe_note
from course_grader.submission import MAX_NOTEBOOK_BYTES, SubmissionRefused, load_submission, read_submission

__all__ = ["Status", "TestOutcome", "NotebookResult", "SubmissionResult", "grade_notebook", "grade_submission",
           "MAX_NOTEBOOK_BYTES", "SubmissionRefused", "read_submission", "worst"]


from course_grader import policy  # noqa: E402 - the caps are policy's

#: Caps on what one notebook's result may hold (the gradebook stays small whatever the learner prints).
MAX_OUTPUT_CHARS = policy.MAX_OUTPUT_CHARS   # captured stdout/stderr of all cells together
MAX_CELLS_RECORDED = policy.MAX_CELLS_RECORDED
MAX_NOTES = policy.MAX_NOTES


def _bound_notebook(result: "NotebookResult") -> None:
    """Cap and sanitise everything recorded for one notebook (learner text included)."""
    budget = MAX_OUTPUT_CHARS
    cells = []
    for cell in result.cells[:MAX_CELLS_RECORDED]:
        clean: dict = {}
        for key, value in cell.items():
            if isinstance(value, str):
                limit = {"stdout": 4000, "stderr": 4000, "traceback": 4000}.get(key, 2000)
                value = safe_text(value, max(0, min(limit, budget)) if key in ("stdout", "stderr") else limit)
                if key in ("stdout", "stderr"):
                    budget -= len(value)
            elif isinstance(value, list):
                value = [safe_text(v, 200) for v in value[:20]]
            elif not isinstance(value, (int, float, bool, type(None))):
                value = safe_text(str(value), 200)
            clean[str(key)] = value
        cells.append(clean)
    if len(result.cells) > MAX_CELLS_RECORDED:
        result.notes.append(N_("only the first {recorded} cells are recorded ({ran} ran)").format(
            recorded=MAX_CELLS_RECORDED, ran=len(result.cells)))
    if budget <= 0:
        result.notes.append(N_("printed output beyond {chars} characters in total was not kept").format(
            chars=MAX_OUTPUT_CHARS))
    result.cells = cells
    notes = [safe_text(n, 1000) for n in result.notes]
    result.notes = notes[:MAX_NOTES] + ([N_("... {count} more notes").format(count=len(notes) - MAX_NOTES)] if len(notes) > MAX_NOTES
                                        else [])
    for t in result.tests:
        t.message = safe_text(t.message, 2000)
        t.details = safe_text(t.details, 4000)


def _fail_all(source: SourceNotebook, column_prefix: str, message: str) -> list[TestOutcome]:
    return [TestOutcome(t.grade_id, column_prefix + t.grade_id, 0.0, t.points, False, message,
                        hidden=t.has_hidden, **t.info()) for t in source.tests]


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
        return N_("a check failed")
    if not public_only and lineno in test.hidden_lines:
        return N_("a hidden check failed (hidden tests are not shown)")
    lines = source_text.split("\n")
    shown = lines[lineno - 1].strip() if 0 < lineno <= len(lines) else ""
    return N_("check failed: {line}").format(line=shown) if shown else N_("a check failed")


def _no_code(source: str) -> bool:
    try:
        return not ast.parse(source).body
    except SyntaxError:
        return False


def _run_test(session: Session | None, test: TestCell, column: str, seed_base: bytes | None,
              public_only: bool, record: dict[str, list] | None = None) -> TestOutcome:
    source_text = test.release_source if public_only else test.source
    out = TestOutcome(test.grade_id, column, 0.0, test.points, False, hidden=test.has_hidden, **test.info())
    if public_only and _no_code(source_text):
        out.skipped = True
        out.message = N_("hidden test: run only by the grader")
        return out
    if session is None:
        out.message = N_("not run: the sandbox could not start")
        return out
    try:
        ns = session.namespace()
    except SandboxDied as exc:
        out.message = str(exc)
        return out
    filename = f"<test {test.grade_id}>"
    try:
        code = _compiled_test(source_text, filename)
    except SyntaxError as exc:
        out.message = N_("the test cell does not compile ({error}); tell your teacher").format(error=exc.msg)
        return out
    checks.begin_test(seed_base, test.grade_id)
    checks.record_calls(record is not None)
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
        out.message = (N_("the test needs `{name}`, which your notebook does not define (did the cell that "
                          "defines it fail? see the cell errors below)").format(name=name) if name
                       else f"NameError: {exc}")
    except Exception as exc:  # noqa: BLE001 - any failure of a test cell costs its points
        out.message = N_("the test raised {error}: {detail}").format(error=type(exc).__name__, detail=exc)[:2000]
    else:
        out.passed = True
        out.points = test.points
    finally:
        checks.begin_test(None, "")
        calls = checks.record_calls(False)
        if record is not None and calls is not None:
            record[test.grade_id] = calls
    return out


@functools.lru_cache(maxsize=256)
def _compiled_test(source: str, filename: str) -> Any:
    """A test cell (the answer key's) compiled once per grading process, not once per learner."""
    return compile(source, filename, "exec")


@functools.lru_cache(maxsize=256)
def _test_names(source: str) -> frozenset[str]:
    """The names a test cell (the answer key's) uses, parsed once per grading process."""
    try:
        return frozenset(n.id for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Name))
    except (SyntaxError, ValueError, RecursionError):
        return frozenset()


def _names_used(code: str) -> dict[str, set[str]] | None:
    """Top-level functions and classes defined in ``code`` -> the names each one uses
    (parsed, never run; None when the cell does not parse as Python)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    out: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out[node.name] = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    return out


def _point_to_failed_callees(steps: list, tests: list[TestCell], outcomes: list[TestOutcome]) -> None:
    """A failing test whose learner function uses another learner function that failed its
    own check says so: "DotProductAttention uses your masked_softmax, which failed its own
    check test_masked_softmax; fix it first" (issue 19: otherwise the two correct classes
    built on a wrong masked_softmax fail with no pointer to the cause)."""
    failed = [o for o in outcomes if not o.passed and not o.skipped]
    if len(failed) < 2:  # a pointer names another failed check
        return
    defs: dict[str, set[str]] = {}
    for step in steps:
        if step.kind == "learner" and len(step.source) < 200_000:
            defs.update(_names_used(step.source) or {})
    if not defs:
        return
    subjects: dict[str, frozenset[str]] = {}
    for test in tests:
        subjects[test.grade_id] = _test_names(test.source) & set(defs)
    for out in failed:
        hints = []
        for name in sorted(subjects.get(out.grade_id, ())):
            for callee in sorted((defs[name] & set(defs)) - {name}):
                owners = [o.grade_id for o in failed
                          if o is not out and callee in subjects.get(o.grade_id, ()) and name not in subjects.get(o.grade_id, ())]
                if owners:
                    hints.append(N_("{name} uses your {callee}, which failed its own check ({owners}): "
                                    "fix {callee} first").format(name=name, callee=callee, owners=", ".join(owners)))
        if hints:
            out.message = N_("{message} — note: {hints}").format(message=out.message,
                                                                  hints="; ".join(dict.fromkeys(hints)))


#: Run in the sandbox before the learner's cells: the variant cell there shows the graded learner's variant.
_VARIANT_PRELUDE = "__import__('course_grader.variants', fromlist=['begin_grading']).begin_grading({learner!r})"


def _variant_learner(student: str | None, submission: str | Path) -> str:
    """The id whose variant a submission is graded with: the student id, else the notebook's name."""
    for candidate in (student, Path(submission).stem):
        try:
            return variants.validate_learner_id(candidate)
        except variants.LearnerIdError:
            continue
    return variants.DEFAULT_ID


def grade_notebook(source: SourceNotebook, submission: str | Path | None, *,
                   config: SandboxConfig | None = None, seed: int | None = None, column_prefix: str = "",
                   public_only: bool = False, student: str | None = None, diagnose: bool = False,
                   learner: str | None = None) -> NotebookResult:
    """Grade one learner notebook against its source notebook.

    Args:
        source: the instructor's source notebook.
        submission: path of the learner's notebook (None: missing).
        config: sandbox limits.
        seed: fixed seed for exact replay; None draws fresh inputs from ``os.urandom``.
        column_prefix: prefix of gradebook columns (``"nb:"`` for multi-notebook assignments).
        public_only: run only the public part of each test (learner self-check).
        student: the learner's id (their folder's name): no component from that folder
            down to the notebook may be a symlink (default: the notebook's own name).
        diagnose: for each failed test, look for the typical mistake of ``mistakes.py`` whose
            outputs the learner's match, and name it (:mod:`course_grader.diagnose`).
        learner: the id whose variant is graded (:mod:`course_grader.variants`; default:
            ``student``). Set here, in this process, and sent into the sandbox before the
            learner's first cell: nothing in the notebook changes it.

    Returns:
        A :class:`NotebookResult`; never raises for problems in the submission.
    """
    config = config or SandboxConfig()
    if public_only and Session.sandbox_class is Sandbox:
        # the self-check's test cells come from the checked notebook: learner code, run only
        # inside a sandbox (course_grader.selfcheck), never in a trusted process (issue 29)
        raise RuntimeError("public_only grading runs only inside the sandbox: use course_grader.selfcheck.self_check")
    set_child_subreaper()
    start = time.monotonic()
    result = NotebookResult(source.name, Status.OK)
    if config.isolation == "none":
        result.notes.append(unsafe_note(config))
    if submission is None:
        result.status = Status.MISSING
        result.tests = _fail_all(source, column_prefix, N_("no notebook submitted"))
        return result
    graded_as = _variant_learner(learner if learner is not None else student, submission)
    try:
        submitted = load_submission(submission, student if student is not None else Path(submission).stem)
    except (SubmissionRefused, NotebookError) as exc:
        refused = isinstance(exc, SubmissionRefused)
        result.status = Status.REFUSED if refused else Status.INVALID
        result.notes.append(str(exc))
        why = (N_("your submission was refused: {reason}") if refused
               else N_("your notebook could not be read: {reason}"))
        result.tests = _fail_all(source, column_prefix, why.format(reason=exc))
        _bound_notebook(result)
        return result
    result.language = notebook_language(submitted)
    plan = plan_submission(source, submitted)
    result.notes.extend(plan.notes)
    seed_base = None if seed is None else str(seed).encode()
    diagnose = diagnose and not public_only
    if diagnose and seed_base is None:  # fresh inputs all the same, which the mistake's run can replay
        seed_base = os.urandom(16).hex().encode()
    recorded: dict[str, list] | None = {} if diagnose else None
    variants.begin_grading(graded_as)
    new_session = Session(config, source.trusted_imports)
    new_session.deadline = start + config.submission_timeout  # restarts included
    session: Session | None = new_session
    try:
        try:
            assert session is not None
            session.start()
            if session.sandbox is not None:
                result.memory_bound = session.sandbox.memory_bound
                if config.isolation == "bwrap":
                    from course_grader.policy import seccomp_support
                    result.seccomp = seccomp_support()[1]
            # the variant's learner id, before any learner cell (replayed after a restart, like a cell)
            session.exec_cell(-1, _VARIANT_PRELUDE.format(learner=graded_as))
        except SandboxDied as exc:
            result.notes.append(str(exc))
            if isinstance(exc, SandboxStartFailed):  # before any learner code: ours, not the learner's
                result.status = Status.GRADER_ERROR
            if session is not None:
                session.close()
            session = None
        for step in plan.steps:
            over_budget = time.monotonic() - start > config.submission_timeout
            if step.kind == "learner":
                if over_budget or session is None:
                    result.cells.append({"index": step.index, "status": "skipped",
                                         "message": N_("not run: grading time budget exceeded") if over_budget
                                         else N_("not run: the sandbox could not start")})
                    continue
                if not step.source.strip():
                    continue
                run = session.exec_cell(step.index, step.source)  # IPython syntax is handled in the sandbox
                result.cells.append(asdict(run))
            else:
                assert step.test is not None
                column = column_prefix + step.test.grade_id
                if over_budget:
                    result.tests.append(TestOutcome(step.test.grade_id, column, 0.0, step.test.points, False,
                                                    N_("not run: the grading time budget of {seconds} s was "
                                                       "exceeded").format(seconds=f"{config.submission_timeout:g}"),
                                                    hidden=step.test.has_hidden, **step.test.info()))
                    continue
                result.tests.append(_run_test(session, step.test, column, seed_base, public_only, record=recorded))
        if session is not None:
            imported = session.loaded_reference()
            if imported:
                result.notes.append(N_("Your code imports the course's reference implementation ({modules}). The "
                                       "grader checks what your code does, not where it comes from, but your "
                                       "teacher can see this note.").format(modules=", ".join(imported)))
    finally:
        result.variants = variants.used_variants()
        variants.begin_grading(None)
        if session is not None:
            session.close()
            result.notes.extend(session.notes)
            if session.timed_out_ever:
                result.status = Status.TIMEOUT
            elif session.died_ever:
                result.status = Status.SANDBOX_DIED
        elif result.status == Status.OK:
            result.status = Status.SANDBOX_DIED
    if recorded and seed_base is not None and any(not t.passed for t in result.tests):
        from course_grader.diagnose import diagnose as name_mistakes
        # the mistake's run uses the learner's variant, on both sides: its tests (trusted) and cells (sandbox)
        variants.begin_grading(graded_as)
        try:
            name_mistakes(source, result.tests, recorded, seed_base, config, deadline=start + config.submission_timeout,
                          learner=graded_as)
        finally:
            variants.begin_grading(None)
    order = {t.grade_id: i for i, t in enumerate(source.tests)}
    result.tests.sort(key=lambda t: order.get(t.grade_id, 0))
    _point_to_failed_callees(plan.steps, source.tests, result.tests)
    result.duration = round(time.monotonic() - start, 3)
    _bound_notebook(result)
    return result


def grade_submission(assignment: Assignment, student: str, notebooks: dict[str, Path | None], *,
                     config: SandboxConfig | None = None, seed: int | None = None,
                     public_only: bool = False, diagnose: bool = False,
                     learner: str | None = None) -> SubmissionResult:
    """Grade all notebooks of one learner's submission.

    Every process started by the learner's code is killed before this returns.

    Args:
        assignment: the loaded assignment.
        student: the learner's id (folder name).
        notebooks: notebook name -> submitted path (None when missing).
        config: sandbox limits.
        seed: fixed seed for exact replay (None: fresh random inputs).
        public_only: learner self-check mode.
        diagnose: name the typical mistakes a failed test looks like (see grade_notebook).
        learner: the id whose variant is graded (default: ``student``; the self-check gives the
            learner's own id, :func:`course_grader.variants.learner_id` on the learner's side).
    """
    start = time.monotonic()
    multi = len(assignment.notebooks) > 1
    results: list[NotebookResult] = []
    for name, source in assignment.notebooks.items():
        try:
            results.append(grade_notebook(source, notebooks.get(name), config=config, seed=seed,
                                          column_prefix=f"{name}:" if multi else "", public_only=public_only,
                                          student=student, diagnose=diagnose, learner=learner))
        except Exception as exc:  # noqa: BLE001 - a grader bug must still record a row
            nb = NotebookResult(name, Status.GRADER_ERROR,
                                notes=[safe_text(f"internal grader error: {type(exc).__name__}: {exc}", 2000)])
            nb.tests = _fail_all(source, f"{name}:" if multi else "", "not graded: internal grader error")
            results.append(nb)
    status = worst([r.status for r in results])
    total = sum(t.points for r in results for t in r.tests)
    max_total = sum(t.max_points for r in results for t in r.tests if not t.skipped)
    used = {v["assignment"]: v for r in results for v in r.variants}
    if not used and assignment.name in variants.TABLES:  # no test asked (nothing ran): the assignment's own
        made = variants.make_variant(assignment.name, _variant_learner(learner if learner is not None else student,
                                                                       assignment.name))
        used[made.assignment] = made.record()
    return SubmissionResult(student, assignment.name, status, round(total, 4), round(max_total, 4),
                            results, variant=next(iter(used.values()), {}),
                            seed="random" if seed is None else str(seed),
                            duration=round(time.monotonic() - start, 3))
