"""The learner's self-check: ``course-grade --check NOTEBOOK``.

Works from what a learner has, the released notebook: its public test cells are the truth.
A test cell the learner edited is not trusted. nbgrader stored a checksum of each released
test cell (source, points, id) in its metadata; a cell whose checksum no longer matches is
reported as "not checked" with how to restore it, or, when the released notebook is given
with ``--release``, the released version is run instead. The report is honest about its
reach: points of tests that are entirely public are counted, tests with hidden parts are
named with their points ("8 more points come from hidden tests that run only when your
teacher grades"), and the grade is never claimed.

The assignment name comes from the notebook's metadata (written at release by
:class:`course_grader.nbgrader_course.RecordAssignment`), never from the folder name.
"""

from __future__ import annotations

import copy
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from course_grader.feedback import about_test, unclean_cell_lines
from course_grader.i18n import DEFAULT, gettext_for, label, notebook_language, translate_message
from course_grader.notebook import (ANSWER_STUB, Assignment, NotebookError, SourceNotebook, TestCell, _cell_source,
                                         TEST_INFO_KEY, WrittenCell, _nbgrader_meta, hidden_lines, is_written,
                                         load_notebook_json, release_source, cell_test_info, written_answers)
from course_grader.policy import WATCHDOG_GRACE_SECONDS
from course_grader.sandbox import SandboxConfig

__all__ = ["CheckedTest", "CheckReport", "self_check", "render_check", "cell_checksum_ok"]


@dataclass
class CheckedTest:
    """One test cell in the self-check report.

    ``kind``: ``"public"`` (no hidden part: its points are counted), ``"public+hidden"``
    (the public part ran; the points are decided by hidden tests), ``"hidden"`` (nothing
    public to run), ``"unknown"`` (the notebook does not say whether it has hidden parts),
    ``"not checked"`` (the cell was edited and no released copy was given), ``"written"`` (a
    written answer, graded by the teacher by hand: never run, never passed or failed here;
    ``message`` says when no answer was found).
    """

    grade_id: str
    points: float
    kind: str
    passed: bool = False
    message: str = ""
    details: str = ""
    #: what the test checks and the lesson section it practises (the notebook's test cell
    #: metadata, course_grader.notebook.cell_test_info)
    description: str = ""
    lesson: str = ""
    section: int = 0


@dataclass
class CheckReport:
    """What the self-check ran, what it could not, and the points at stake."""

    assignment: str
    notebook: str
    tests: list[CheckedTest] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    cells: list[dict] = field(default_factory=list)
    hidden_known: bool = True
    #: the language of the report: the checked notebook's (course_grader.i18n)
    language: str = DEFAULT

    @property
    def max_points(self) -> float:
        return sum(t.points for t in self.tests)

    @property
    def public_points(self) -> float:
        return sum(t.points for t in self.tests if t.kind == "public" and t.passed)

    @property
    def public_max(self) -> float:
        return sum(t.points for t in self.tests if t.kind == "public")

    @property
    def written_max(self) -> float:
        """The points of the written answers, which the teacher grades by hand."""
        return sum(t.points for t in self.tests if t.kind == "written")

    @property
    def ok(self) -> bool:
        """Every public check that ran passed and every test cell could be checked."""
        return all(t.passed or t.kind in ("hidden", "written") for t in self.tests)


def cell_checksum_ok(cell: dict) -> bool | None:
    """Does an nbgrader cell still match the checksum stored when it was released?

    Returns:
        True or False; None when the cell carries no checksum.
    """
    meta = _nbgrader_meta(cell)
    stored = meta.get("checksum")
    if not stored:
        return None
    # imported here, where the checking runs (inside the sandbox): importing nbformat compiles a
    # URI grammar for jsonschema (about 1.4 s), which the process that shows the report never needs
    import nbformat
    from nbgrader.utils import compute_checksum

    node = nbformat.from_dict(copy.deepcopy(cell))
    node.source = _cell_source(cell)
    try:
        return compute_checksum(node) == stored
    except (KeyError, TypeError, ValueError):
        return False


def _is_test(cell: dict) -> bool:
    meta = _nbgrader_meta(cell)
    return cell.get("cell_type") == "code" and bool(meta.get("grade")) and not meta.get("solution")


def self_check(path: str | Path, *, release: str | Path | None = None, assignment: str | None = None,
               config: SandboxConfig | None = None, learner: str | None = None) -> CheckReport:
    """Run the public tests of a learner's notebook (see the module docstring).

    This process only reads the two files (bounded, through
    :func:`course_grader.submission.read_submission`) and shows the result: parsing the
    notebook, its checksums, its cells and its test cells all run **inside one sandbox**
    (:func:`check_inside`), where the learner's cells run in a process of their own and the
    test cells in another, so a notebook that monkeypatches ``torch`` or the checks toolkit
    cannot pass its own checks, and a crafted cell costs the sandbox's time, not this process's.

    Args:
        path: the learner's notebook.
        release: the released notebook, to restore edited test cells from (optional).
        assignment: the assignment name, if the notebook's metadata does not record it.
        config: sandbox limits.
        learner: the id whose variant is checked (default: this learner's,
            :func:`course_grader.variants.learner_id`: the hub user, or the id set with
            ``course-grade --set-id``, else "default"); read here, outside the sandbox.

    Returns:
        A :class:`CheckReport`, validated and bounded.

    Raises:
        NotebookError: the notebook cannot be read or has no test cells.
    """
    from course_grader import protocol
    from course_grader.rpc import Session
    from course_grader.sandbox import SandboxDied
    from course_grader.submission import SubmissionRefused, read_submission
    from course_grader import variants
    path = Path(path)
    config = config or SandboxConfig()
    learner = variants.validate_learner_id(learner) if learner is not None else variants.learner_id()[0]
    files = {}
    for key, file in (("notebook", path), ("release", release)):
        if file is not None:
            try:
                files[key] = read_submission(file, Path(file).stem)
            except SubmissionRefused as exc:
                raise NotebookError(str(exc)) from None
    session = Session(config)
    try:
        session.start()
        reply = session._request({"op": "selfcheck", "notebook": files["notebook"], "name": path.name,
                                  "release": files.get("release"),
                                  "release_name": Path(release).name if release else None,
                                  "assignment": assignment, "config": config.to_dict(), "learner": learner},
                                 config.submission_timeout + WATCHDOG_GRACE_SECONDS, "checking your notebook")
    except SandboxDied as exc:
        report = CheckReport(assignment or "", path.name, notes=[str(exc)])
        report.tests.append(CheckedTest("(all tests)", 0.0, "public", message=f"not run: {exc}"))
        return report
    finally:
        session.close()
    if type(reply) is not dict or reply.get("ok") is not True:
        error = reply.get("error") if type(reply) is dict else None
        if type(error) is dict and error.get("type") == "NotebookError":
            raise NotebookError(protocol.safe_text(error.get("message"), 2000))
        message = protocol.safe_text(error.get("message"), 2000) if type(error) is dict else "no answer"
        raise NotebookError(f"the self-check of {path.name} failed inside the sandbox: {message}")
    try:
        value = protocol.decode(reply.get("value"), None)
    except protocol.ProtocolError as exc:
        raise NotebookError(f"the self-check of {path.name} sent an invalid report ({exc})") from None
    return _validated_report(value, path.name)


_KINDS = ("public", "public+hidden", "hidden", "unknown", "not checked", "written")


def _validated_report(value: object, notebook: str) -> CheckReport:
    """A :class:`CheckReport` rebuilt from what the sandbox sent: only known fields, of the
    right types, each string capped; anything else is dropped."""
    from course_grader.i18n import LANGUAGES
    from course_grader.protocol import safe_text

    def items(x: object, limit: int) -> list:
        return list(x[:limit]) if type(x) is list else []

    def number(x: object) -> float:
        return float(x) if isinstance(x, (int, float)) and type(x) is not bool and 0 <= x <= 1e6 else 0.0

    data = value if type(value) is dict else {}
    language = data.get("language")
    report = CheckReport(safe_text(data.get("assignment"), 200), notebook,
                         hidden_known=data.get("hidden_known") is True,
                         language=language if type(language) is str and language in set(LANGUAGES.values()) else DEFAULT)
    for t in items(data.get("tests"), 500):
        if type(t) is dict:
            kind = str(t.get("kind")) if t.get("kind") in _KINDS else "unknown"
            info = cell_test_info({"metadata": {TEST_INFO_KEY: {"description": t.get("description"),
                                                           "lesson": t.get("lesson"), "section": t.get("section")}}})
            report.tests.append(CheckedTest(safe_text(t.get("grade_id"), 200), number(t.get("points")), kind,
                                            t.get("passed") is True, safe_text(t.get("message"), 2000),
                                            safe_text(t.get("details"), 4000),
                                            **{**info, "description": safe_text(info.get("description", ""), 300)}))
    for c in items(data.get("cells"), 300):
        if type(c) is dict and type(c.get("index")) is int:
            report.cells.append({"index": c["index"], "status": safe_text(c.get("status"), 20),
                                 "message": safe_text(c.get("message"), 2000),
                                 "traceback": safe_text(c.get("traceback"), 4000)})
    report.notes = [safe_text(n, 1000) for n in items(data.get("notes"), 50)]
    return report


def check_inside(notebook: bytes, name: str, release: bytes | None = None, release_name: str | None = None,
                 assignment: str | None = None, config: dict | None = None, learner: object = None) -> dict:
    """The self-check proper, run inside the sandbox (``sandbox_main``'s ``selfcheck``): the
    notebook's cells in a learner process forked there, its test cells here, against proxies.

    Returns:
        The :class:`CheckReport` as plain data.
    """
    from dataclasses import asdict
    with tempfile.TemporaryDirectory(prefix="course-check-") as tmp:
        path = Path(tmp) / "learner" / Path(name).name
        path.parent.mkdir()
        path.write_bytes(notebook)
        release_path = None
        if release is not None:
            release_path = Path(tmp) / "release" / Path(release_name or "release.ipynb").name
            release_path.parent.mkdir()
            release_path.write_bytes(release)
        fields = set(SandboxConfig.__dataclass_fields__)
        cfg = SandboxConfig(**{k: v for k, v in (config or {}).items() if k in fields})
        from course_grader.variants import DEFAULT_ID, LearnerIdError, validate_learner_id
        try:
            who = validate_learner_id(learner)
        except LearnerIdError:
            who = DEFAULT_ID
        return asdict(_check_here(path, release=release_path, assignment=assignment, config=cfg, who=who))


def _variant_notes(learner_nb: dict, learner: str, _) -> list[str]:
    """The self-check's variant notes: which variant it checked, and a warning when the notebook's
    variant cell last printed another learner's variant (its answers were made for other numbers)."""
    from course_grader import variants
    notes: list[str] = []
    seen: set[tuple[str, str]] = set()
    for name, digest in variants.marks_in_outputs(learner_nb):
        if name not in variants.TABLES or (name, digest) in seen:
            continue
        seen.add((name, digest))
        mine = variants.make_variant(name, learner)
        if digest != mine.digest:
            notes.append(_("WARNING: this notebook was last run for another learner id: its variant cell shows "
                           "variant {theirs} of {assignment}, but yours (id {learner!r}) is {mine}. Answers made for "
                           "those numbers are wrong for yours. Restart the kernel and run the notebook from the top, "
                           "then check your answers again.").format(theirs=digest, assignment=name, learner=learner,
                                                                    mine=mine.digest))
    if learner == variants.DEFAULT_ID:
        notes.append(_("No learner id is set, so this checked the variant of the id 'default', which your teacher "
                       "will not grade you with: set yours once with `course-grade --set-id YOUR_ID` (on the hub "
                       "it is your user name, set for you)."))
    return notes


def _check_here(path: Path, *, release: Path | None, assignment: str | None, config: SandboxConfig,
                who: str = "default") -> CheckReport:
    # imported here, inside the sandbox where the check runs: the process that starts the check and
    # shows its report needs neither torch (the runner's checks) nor nbgrader
    from course_grader.nbgrader_course import METADATA_KEY
    from course_grader.runner import SubmissionResult, grade_submission

    learner = load_notebook_json(path)
    reference = load_notebook_json(release) if release else learner
    meta = reference.get("metadata", {}).get(METADATA_KEY) or learner.get("metadata", {}).get(METADATA_KEY) or {}
    if not isinstance(meta, dict):
        meta = {}
    name = assignment or str(meta.get("assignment") or "")
    language = notebook_language(learner)
    _ = gettext_for(language)
    report = CheckReport(name or _("(unnamed assignment)"), path.name, language=language)
    hidden_ids = meta.get("hidden_tests")
    report.hidden_known = isinstance(hidden_ids, list)
    hidden = set(hidden_ids) if isinstance(hidden_ids, list) else set()
    if not name:
        report.notes.append(_("This notebook does not record its assignment name (it was not released with the "
                              "course's nbgrader configuration); give it with --assignment NAME if you need it."))

    trusted: list[TestCell] = []
    skipped: set[str] = set()
    order: list[tuple[str, float]] = []
    infos: dict[str, dict] = {}
    for index, cell in enumerate(reference["cells"]):
        if not _is_test(cell):
            continue
        gid = str(_nbgrader_meta(cell).get("grade_id") or f"cell-{index}")
        points = float(_nbgrader_meta(cell).get("points", 0) or 0)
        order.append((gid, points))
        infos[gid] = cell_test_info(cell)
        if release:  # edited or deleted copies in the learner's notebook: the plan runs the released one
            ok = cell_checksum_ok(cell) is not False
            if not ok:
                raise NotebookError(f"{Path(release).name}: test cell {gid!r} does not match its nbgrader checksum: "
                                    "is this really the released notebook?")
        else:
            ok = bool(cell_checksum_ok(cell))
            if not ok:
                skipped.add(gid)
                continue
        src = _cell_source(cell)
        hidden_part = hidden_lines(src)  # none in a released notebook; an instructor's source given as --release
        if hidden_part:
            hidden.add(gid)
            report.hidden_known = True  # the reference is an instructor's source: its markers say it all
        trusted.append(TestCell(gid, points, src, release_source(src, solution=False, test=True), hidden_part, index,
                                **cell_test_info(cell)))
    if not order:
        raise NotebookError(f"{path.name} has no nbgrader test cells: is it the notebook of a graded assignment "
                            "(the one in exercises/<assignment>/, or the one your teacher released)?")

    base = SourceNotebook.load(release) if release else SourceNotebook.load(path)
    source = SourceNotebook(path.stem, path, reference["cells"], trusted, base.trusted_imports)
    # the learner's notebook without the test cells that cannot be trusted (they would run as learner code)
    graded_nb = dict(learner, cells=[c for c in learner["cells"]
                                     if not (_is_test(c) and str(_nbgrader_meta(c).get("grade_id")) in skipped)])
    with tempfile.TemporaryDirectory(prefix="course-check-") as tmp:
        copy_path = Path(tmp) / path.name
        copy_path.write_text(json.dumps(graded_nb), encoding="utf-8")
        result: SubmissionResult = grade_submission(Assignment(name or path.stem, path.parent, {path.stem: source}),
                                                    "self-check", {path.stem: copy_path}, config=config,
                                                    public_only=True, learner=who)
    nb = result.notebooks[0]
    if result.variant:
        values = ", ".join(f"{k} = {v}" for k, v in result.variant.get("values", {}).items())
        report.notes.append(_("Checked with your variant {digest} of {assignment} (id {learner!r}): {values}.").format(
            digest=result.variant.get("digest"), assignment=result.variant.get("assignment"), learner=who,
            values=values))
        report.notes.extend(_variant_notes(learner, who, _))
    report.cells = nb.cells
    report.notes.extend(nb.notes)
    outcomes = {t.grade_id: t for t in nb.tests}
    for gid, points in order:
        if gid in skipped:
            report.tests.append(CheckedTest(gid, points, "not checked", **infos[gid], message=_(
                "not checked: this test cell was changed in your notebook (it no longer matches the released "
                "version). Copy the cell back from the released notebook, or run the check with "
                "--release RELEASED.ipynb")))
            continue
        out = outcomes[gid]
        if out.skipped:
            kind = "hidden"
        elif not report.hidden_known:
            kind = "unknown"
        else:
            kind = "public+hidden" if gid in hidden else "public"
        report.tests.append(CheckedTest(gid, points, kind, out.passed, "" if out.passed else out.message,
                                        out.details, **infos[gid]))
    # written answers: graded by the teacher, by hand; the check only says whether one was found
    written = [WrittenCell(str(_nbgrader_meta(c).get("grade_id")), float(_nbgrader_meta(c).get("points", 0) or 0), i,
                           released=_cell_source(c) if release else ANSWER_STUB)
               for i, c in enumerate(reference["cells"]) if is_written(c) and _nbgrader_meta(c).get("grade_id")]
    for w in written_answers(written, learner):
        report.tests.append(CheckedTest(w.grade_id, w.max_points, "written", message="" if w.answered else _(
            "no answer found yet: write it in the cell")))
    return report


def _pts(x: float) -> str:
    return f"{x:g}"


def render_check(report: CheckReport) -> str:
    """The self-check report as text (what ``course-grade --check`` prints), in the language
    of the checked notebook."""
    _ = gettext_for(report.language)
    m = lambda text: translate_message(str(text), report.language)  # noqa: E731 - a grader's message, translated
    lines = [_("Self-check of {assignment}, notebook {notebook}: public checks only").format(
        assignment=report.assignment, notebook=report.notebook), ""]
    for t in report.tests:
        if t.kind == "hidden":
            lines.append(f"  [{label(_('hidden'))}] " + _("{test} ({points} points): hidden tests only, run when your "
                                                     "teacher grades").format(test=t.grade_id, points=_pts(t.points)))
        elif t.kind == "written":
            lines.append(f"  [{label(_('teacher'))}] " + _("{test} ({points} points): a written answer, graded by "
                                                         "your teacher by hand, not by these checks").format(
                test=t.grade_id, points=_pts(t.points)) + (f": {t.message}" if t.message else ""))
            continue
        elif t.kind == "not checked":
            lines.append("  [  ????  ] " + _("{test} ({points} points): {message}").format(
                test=t.grade_id, points=_pts(t.points), message=t.message))
        elif t.kind == "public":
            mark = _("PASS") if t.passed else _("FAIL")
            lines.append(f"  [{label(mark)}] {t.grade_id} ({_pts(t.points if t.passed else 0)}/{_pts(t.points)})"
                         + ("" if t.passed else f": {m(t.message)}"))
        else:
            mark = _("PASS") if t.passed else _("FAIL")
            verdict = (_("public part passed") if t.passed
                       else _("public part failed: {message}").format(message=m(t.message)))
            tail = (_("; its {points} point(s) are decided by hidden tests") if t.kind == "public+hidden"
                    else _("; worth {points} point(s)")).format(points=_pts(t.points))
            lines.append(f"  [{label(mark)}] {t.grade_id}: {verdict}{tail}")
        about = about_test(t, report.language)
        if about:
            lines.append("             " + about)
        if t.details and not t.passed:
            lines.extend("             " + d for d in t.details.rstrip().splitlines())
    lines += unclean_cell_lines(report.cells, report.language)
    for note in report.notes:
        lines.append("  " + _("Note: {note}").format(note=m(note)))
    lines.append("")
    rest = report.max_points - report.public_max - report.written_max
    if report.hidden_known:
        lines.append(_("Public checks: {points} of {max_points} points.").format(
            points=_pts(report.public_points), max_points=_pts(report.public_max)))
        later = [t for t in report.tests if t.kind in ("hidden", "public+hidden")]
        if later:
            lines.append(_("{points} more points come from hidden tests that run only when your teacher grades: "
                           "{tests}.").format(points=_pts(sum(t.points for t in later)),
                                              tests=_(", ").join(f"{t.grade_id} ({_pts(t.points)})" for t in later)))
        written = [t for t in report.tests if t.kind == "written"]
        if written:
            lines.append(_("{points} more points come from written answers that your teacher grades by hand: "
                           "{tests}.").format(points=_pts(report.written_max),
                                              tests=_(", ").join(f"{t.grade_id} ({_pts(t.points)})" for t in written)))
        unchecked = [t for t in report.tests if t.kind == "not checked"]
        if unchecked:
            lines.append(_("{points} points were not checked: {tests}.").format(
                points=_pts(sum(t.points for t in unchecked)), tests=_(", ").join(t.grade_id for t in unchecked)))
    else:
        lines.append(_("This notebook does not record which tests have hidden parts, so no points are counted "
                       "here: all {points} points may also depend on hidden tests.").format(points=_pts(rest)))
    lines.append(_("Maximum grade: {points} points. Passing the public checks does not mean the hidden tests "
                   "pass.").format(points=_pts(report.max_points)))
    if any(t.kind not in ("hidden", "written") and not t.passed for t in report.tests):
        lines.append(_("Next: for each failed check, read its message and the lesson section named under it, fix "
                       "your code, and run the check again."))
    lines.append(_("The hidden tests call your code on fresh inputs (other sizes, other lengths), so make it work "
                   "for any input, not only for the examples above."))
    # The note for whoever checks a notebook they did not write (a classmate's, a tutor's) is
    # in docs/GRADING.md ("Learner: self-check"): nbgrader's checksums detect accidental edits
    # of the test cells, they authenticate nothing.
    lines.append(_("Only your teacher's grading counts: these checks are the test cells of the notebook you checked "
                   "(or of --release), so this report is not proof of a grade."))
    return "\n".join(lines) + "\n"
