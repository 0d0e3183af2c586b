"""Put ``course-grade``'s results into an nbgrader course: ``gradebook.db``, ``autograded/``, ``feedback/``.

After :func:`export_to_nbgrader`, nbgrader's own tools work on ``course-grade``'s grades:

* **formgrader** and ``nbgrader export`` read the scores from the course's gradebook
  database (one ``auto_score`` per test cell, the submission time from ``timestamp.txt``);
* **written answers** (nbgrader's manually graded answers, :class:`course_grader.notebook.WrittenCell`)
  get no ``auto_score`` and ``needs_manual_grade = True`` (a blank one: 0, not flagged, as
  nbgrader's autograde does), and every auto-graded test cell
  ``needs_manual_grade = False``: Formgrader flags exactly the cells a person must grade. A
  score the teacher gave (``manual_score``) is never changed by a new export; if the
  learner's answer changed since (a resubmission), the cell is flagged again for review,
  its score kept. The digests of the answers last exported are in
  ``autograded/<student>/<assignment>/written.json``;
* ``nbgrader release_feedback`` releases ``feedback/<student>/<assignment>/<notebook>.html``
  (our feedback page: messages, never hidden test sources), next to the ``timestamp.txt``
  and ``submission_secret.txt`` it needs, copied from ``submitted/``, so learners get it
  with ``nbgrader fetch_feedback``.

The assignment must already be in the database, which ``nbgrader generate_assignment``
does in the usual workflow; its test cells (``grade_id`` and points) are checked against
the answer key used for grading.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from course_grader.feedback import render_html
from course_grader.i18n import N_
from course_grader.notebook import Assignment, NotebookError
from course_grader.results import SubmissionResult
from course_grader.submission import SubmissionRefused, read_submission

__all__ = ["NbgraderCourse", "load_course", "export_to_nbgrader", "find_course_root"]


@dataclass
class NbgraderCourse:
    """The settings of an nbgrader course folder that matter here."""

    root: Path
    course_id: str
    db_url: str
    source: Path
    submitted: Path
    autograded: Path
    feedback: Path
    config: object = field(repr=False, default=None)

    def step_path(self, step: Path, student: str, assignment: str) -> Path:
        return step / student / assignment


def find_course_root(*starts: str | Path) -> Path | None:
    """The nearest folder holding an ``nbgrader_config.py``, searching upwards from each start."""
    for start in starts:
        here = Path(start).resolve()
        for folder in (here, *here.parents):
            if (folder / "nbgrader_config.py").is_file():
                return folder
    return None


def load_course(root: str | Path) -> NbgraderCourse:
    """Read an nbgrader course's configuration (its ``nbgrader_config.py``) the way nbgrader does.

    Raises:
        NotebookError: no ``nbgrader_config.py`` in ``root``.
    """
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config import Config
    from traitlets.config.loader import PyFileConfigLoader

    root = Path(root).resolve()
    if not (root / "nbgrader_config.py").is_file():
        raise NotebookError(f"{root} is not an nbgrader course folder (no nbgrader_config.py)")
    config = Config()
    config.merge(PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config())
    if "root" not in config.CourseDirectory:
        config.CourseDirectory.root = str(root)
    cd = CourseDirectory(config=config)
    base = Path(cd.root)

    def step(name: str) -> Path:
        p = Path(name)
        return p if p.is_absolute() else base / p

    return NbgraderCourse(base, cd.course_id, cd.db_url, step(cd.source_directory), step(cd.submitted_directory),
                          step(cd.autograded_directory), step(cd.feedback_directory), config)


#: Largest ``timestamp.txt`` / ``submission_secret.txt`` read from a submission.
MAX_SMALL_FILE = 4096


def export_to_nbgrader(course: NbgraderCourse, assignment: Assignment, results: list[SubmissionResult],
                       problems: list[str] | None = None,
                       graded: dict[str, dict[str, Path | None]] | None = None) -> list[str]:
    """Write results into the course's gradebook database and feedback folders.

    Args:
        course: the nbgrader course (:func:`load_course`).
        assignment: the answer key the results were graded with.
        results: ``course-grade``'s results, one per learner (learner id = nbgrader student id).

        problems: receives one line per learner whose files could not all be used (a
            refused ``timestamp.txt``, ...): that learner's row is still written, and a
            problem with one learner never stops the others.
        graded: learner id -> {notebook: the copy of the bytes that were graded}
            (:func:`course_grader.journal.snapshot_submissions`): exactly those bytes go to
            ``autograded/``. Without it the submission is read again from ``submitted/``.

    Returns:
        The learner ids written.

    Raises:
        NotebookError: the assignment is not in the database, or its test cells differ from
            the answer key's (a different version of the assignment).
    """
    from nbgrader.api import Gradebook, MissingEntry

    written = []
    with Gradebook(course.db_url, course_id=course.course_id) as gb:
        try:
            db_assignment = gb.find_assignment(assignment.name)
        except MissingEntry:
            raise NotebookError(f"assignment {assignment.name!r} is not in {course.db_url}: run "
                                f"`nbgrader generate_assignment {assignment.name}` in {course.root} first") from None
        db_cells = {(nb.name, g.name): g.max_score for nb in db_assignment.notebooks for g in nb.grade_cells}
        ours = {(nb, t.grade_id): t.points for nb, src in assignment.notebooks.items() for t in src.tests}
        ours.update({(nb, w.grade_id): w.points for nb, src in assignment.notebooks.items() for w in src.written})
        if db_cells != ours:
            raise NotebookError(f"the test cells of {assignment.name!r} in the gradebook database differ from the "
                                f"answer key ({assignment.directory}): regenerate the assignment or grade with the "
                                "course's source/ version")
        problems = problems if problems is not None else []
        for res in results:
            try:
                _export_one(gb, course, assignment, res, problems,
                            None if graded is None else graded.get(res.student, {}))
            except Exception as exc:  # noqa: BLE001 - one learner's files never stop the class
                gb.db.rollback()
                problems.append(N_("{student}: not exported ({error})").format(student=res.student, error=f"{type(exc).__name__}: {exc}"))
                continue
            written.append(res.student)
    return written


def _small_file(sub_dir: Path, name: str, student: str, problems: list[str]) -> bytes | None:
    """A small file of the submission (``timestamp.txt``...) through the one door
    (:func:`course_grader.runner.read_submission`); None when absent or refused."""
    path = sub_dir / name
    if not os.path.lexists(path):
        return None
    try:
        return read_submission(path, student, max_bytes=MAX_SMALL_FILE)
    except SubmissionRefused as exc:
        problems.append(N_("{student}: {name} ignored: {reason}").format(student=student, name=name, reason=exc))
        return None


def _timestamp(raw: bytes | None, student: str, problems: list[str]):
    """The submission time of ``timestamp.txt``, validated as nbgrader parses it, or None."""
    if raw is None:
        return None
    from nbgrader.utils import parse_utc
    try:
        text = raw.decode("ascii").strip()
        if not text or len(text) > 64:
            raise ValueError("not a time")
        return parse_utc(text)
    except Exception as exc:  # noqa: BLE001 - garbage from the learner's folder
        problems.append(N_("{student}: timestamp.txt ignored (not a time: {error})").format(student=student, error=type(exc).__name__))
        return None


def _export_one(gb, course: NbgraderCourse, assignment: Assignment, res: SubmissionResult,
                problems: list[str], graded: dict[str, Path | None] | None = None) -> None:
    sub_dir = course.step_path(course.submitted, res.student, assignment.name)
    stamp_raw = _small_file(sub_dir, "timestamp.txt", res.student, problems)
    timestamp = _timestamp(stamp_raw, res.student, problems)
    secret = _small_file(sub_dir, "submission_secret.txt", res.student, problems)
    gb.update_or_create_student(res.student)
    kwargs = {"timestamp": timestamp} if timestamp else {}
    gb.update_or_create_submission(assignment.name, res.student, **kwargs)
    by_id = {(nb.notebook, t.grade_id): t for nb in res.notebooks for t in nb.tests}
    answers = {(nb.notebook, w.grade_id): w for nb in res.notebooks for w in nb.written}
    written_ids = {(nb, w.grade_id) for nb, src in assignment.notebooks.items() for w in src.written}
    auto_dir = course.step_path(course.autograded, res.student, assignment.name)
    before = _exported_answers(auto_dir)
    for nb_name in assignment.notebooks:
        sub_nb = gb.find_submission_notebook(nb_name, assignment.name, res.student)
        for grade in sub_nb.grades:
            key = (nb_name, grade.name)
            if key in written_ids:
                answer = answers.get(key)
                if answer is None or not answer.answered:
                    # no notebook to read, or a blank answer: nothing to grade, 0 (nbgrader's autograde
                    # rule); a score the teacher gave stays the score
                    grade.auto_score, grade.needs_manual_grade = 0.0, False
                    continue
                # graded by hand only: no automatic score; a score the teacher gave is kept, and
                # flagged again only when the answer changed since it was given
                grade.auto_score = None
                changed = before.get(f"{nb_name}:{grade.name}") not in (None, _digest(answer.answer))
                grade.needs_manual_grade = grade.manual_score is None or changed
                continue
            outcome = by_id.get(key)
            grade.auto_score = float(outcome.points if outcome else 0.0)  # manual overrides kept
            # scored by course-grade: never flagged (nbgrader autograde flags a cell with a manual
            # override; here the teacher's override stays the score, and only written answers,
            # which a person must grade, are flagged in Formgrader)
            grade.needs_manual_grade = False
    # the pages first: a learner whose new feedback cannot be written keeps the old scores too
    # (never new scores in the database beside the old page that release_feedback hands out)
    _write_folders(course, assignment, res, sub_dir, stamp_raw if timestamp else None, secret, graded)
    gb.db.commit()


def _digest(text: str) -> str:
    import hashlib
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _exported_answers(auto_dir: Path) -> dict[str, str]:
    """``notebook:grade_id`` -> SHA-256 of the written answer exported last time (``written.json``
    beside the autograded notebook; {} when absent or not ours)."""
    import json
    path = auto_dir / "written.json"
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > 1_000_000:
            return {}
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def _write_folders(course: NbgraderCourse, assignment: Assignment, res: SubmissionResult, sub_dir: Path,
                   stamp: bytes | None, secret: bytes | None, graded: dict[str, Path | None] | None = None) -> None:
    """``autograded/`` (the submission as graded, for formgrader) and ``feedback/`` (for release_feedback).

    Only bytes that came through the one door are written: a notebook is copied only when
    grading read it (never one that was refused, e.g. a symbolic link to the answer key), and
    with ``graded`` exactly the bytes graded. The copy is made inert for Formgrader's browser
    page (:func:`course_grader.sinks.formgrader_notebook`). Every file replaces the previous
    one atomically, so a second run replaces the first run's feedback."""
    page = render_html(res)
    auto_dir = course.step_path(course.autograded, res.student, assignment.name)
    fb_dir = course.step_path(course.feedback, res.student, assignment.name)
    for folder in (auto_dir, fb_dir):
        folder.mkdir(parents=True, exist_ok=True)
    status = {nb.notebook: nb.status for nb in res.notebooks}
    for name in assignment.notebooks:
        target = auto_dir / f"{name}.ipynb"
        data = None
        if status.get(name) not in ("refused", "missing", "invalid notebook", None):
            if graded is not None:
                copy = graded.get(name)
                data = copy.read_bytes() if copy is not None else None
            else:
                try:
                    data = read_submission(sub_dir / f"{name}.ipynb", res.student)
                except SubmissionRefused:
                    data = None  # changed since grading: not copied
        if data is not None:
            _write_private(target, _with_test_outputs(data, res, name))
        elif target.is_symlink() or target.exists():
            target.unlink()
        _write_private(fb_dir / f"{name}.html", page.encode("utf-8"))
    written = {f"{nb.notebook}:{w.grade_id}": _digest(w.answer) for nb in res.notebooks for w in nb.written}
    if written:  # what the teacher graded by hand: a changed answer is flagged again (_export_one)
        import json
        _write_private(auto_dir / "written.json", json.dumps(written, indent=1, sort_keys=True).encode("utf-8"))
    if res.variant:  # the learner's variant (course_grader.variants), beside the notebook Formgrader shows
        import json
        _write_private(auto_dir / "variant.json", json.dumps(res.variant, indent=1, sort_keys=True).encode("utf-8"))
    for extra, data in (("timestamp.txt", stamp), ("submission_secret.txt", secret)):
        for folder in (auto_dir, fb_dir):
            target = folder / extra
            if data is not None:
                _write_private(target, data)
            elif target.is_symlink() or target.exists():
                target.unlink()


def _with_test_outputs(data: bytes, res: SubmissionResult, notebook: str) -> bytes:
    """The learner's notebook as Formgrader should show it after grading: each test cell's
    outputs replaced by what ``nbgrader autograde`` would leave there - nothing when it
    passed, an error with the failure message when it failed (never the hidden test source,
    which the copy does not contain); then made inert for the teacher's browser
    (:func:`course_grader.sinks.formgrader_notebook`: no markdown HTML, no active output,
    no attachment)."""
    import json
    from course_grader.notebook import _nbgrader_meta
    from course_grader.sinks import formgrader_notebook
    outcomes = {t.grade_id: t for nb in res.notebooks if nb.notebook == notebook for t in nb.tests}
    try:
        nb = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError, UnicodeDecodeError):
        nb = {}  # not a notebook: an empty one (never the bytes as they are)
    for cell in nb.get("cells", []) if isinstance(nb, dict) else []:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        meta = _nbgrader_meta(cell)
        outcome = outcomes.get(str(meta.get("grade_id")))
        if outcome is None or not meta.get("grade") or meta.get("solution"):
            continue
        cell["outputs"] = [] if outcome.passed else [{
            "output_type": "error", "ename": "AssertionError", "evalue": outcome.message,
            "traceback": [f"AssertionError: {outcome.message}"]}]
    return json.dumps(formgrader_notebook(nb), indent=1).encode("utf-8")


def _write_private(path: Path, data: bytes) -> None:
    """Replace ``path`` atomically with ``data`` (:func:`course_grader.gradebook.atomic_write`;
    nbgrader's files are readable by the course's other accounts, 0o644)."""
    from course_grader.gradebook import atomic_write
    atomic_write(path, data, mode=0o644)
