"""Put ``course-grade``'s results into an nbgrader course: ``gradebook.db``, ``autograded/``, ``feedback/``.

After :func:`export_to_nbgrader`, nbgrader's own tools work on ``course-grade``'s grades:

* **formgrader** and ``nbgrader export`` read the scores from the course's gradebook
  database (one ``auto_score`` per test cell, the submission time from ``timestamp.txt``);
* ``nbgrader release_feedback`` releases ``feedback/<student>/<assignment>/<notebook>.html``
  (our feedback page: messages, never hidden test sources), next to the ``timestamp.txt``
  and ``submission_secret.txt`` it needs, copied from ``submitted/``, so learners get it
  with ``nbgrader fetch_feedback``.

The assignment must already be in the database, which ``nbgrader generate_assignment``
does in the usual workflow; its test cells (``grade_id`` and points) are checked against
the answer key used for grading.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from course_grader.feedback import render_html
from course_grader.notebook import Assignment, NotebookError
from course_grader.runner import SubmissionResult

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


def export_to_nbgrader(course: NbgraderCourse, assignment: Assignment, results: list[SubmissionResult]) -> list[str]:
    """Write results into the course's gradebook database and feedback folders.

    Args:
        course: the nbgrader course (:func:`load_course`).
        assignment: the answer key the results were graded with.
        results: ``course-grade``'s results, one per learner (learner id = nbgrader student id).

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
        if db_cells != ours:
            raise NotebookError(f"the test cells of {assignment.name!r} in the gradebook database differ from the "
                                f"answer key ({assignment.directory}): regenerate the assignment or grade with the "
                                "course's source/ version")
        for res in results:
            sub_dir = course.step_path(course.submitted, res.student, assignment.name)
            timestamp = _read(sub_dir / "timestamp.txt")
            gb.update_or_create_student(res.student)
            kwargs = {"timestamp": timestamp} if timestamp else {}
            gb.update_or_create_submission(assignment.name, res.student, **kwargs)
            by_id = {(nb.notebook, t.grade_id): t.points for nb in res.notebooks for t in nb.tests}
            for nb_name in assignment.notebooks:
                for grade in gb.find_submission_notebook(nb_name, assignment.name, res.student).grades:
                    grade.auto_score = float(by_id.get((nb_name, grade.name), 0.0))  # manual overrides kept
            gb.db.commit()
            _write_folders(course, assignment, res, sub_dir)
            written.append(res.student)
    return written


def _read(path: Path) -> str | None:
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return text or None


def _write_folders(course: NbgraderCourse, assignment: Assignment, res: SubmissionResult, sub_dir: Path) -> None:
    """``autograded/`` (the submission as graded, for formgrader) and ``feedback/`` (for release_feedback)."""
    page = render_html(res)
    auto_dir = course.step_path(course.autograded, res.student, assignment.name)
    fb_dir = course.step_path(course.feedback, res.student, assignment.name)
    for folder in (auto_dir, fb_dir):
        folder.mkdir(parents=True, exist_ok=True)
    for name in assignment.notebooks:
        submitted = sub_dir / f"{name}.ipynb"
        if submitted.is_file():
            shutil.copyfile(submitted, auto_dir / f"{name}.ipynb")
        (fb_dir / f"{name}.html").write_text(page, encoding="utf-8")
    for extra in ("timestamp.txt", "submission_secret.txt"):
        if (sub_dir / extra).is_file():
            for folder in (auto_dir, fb_dir):
                shutil.copyfile(sub_dir / extra, folder / extra)
