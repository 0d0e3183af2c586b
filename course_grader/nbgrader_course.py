"""The course's nbgrader settings, shared by this repository and the courses teachers create.

Both ``nbgrader_config.py`` files (the repository's, which generates ``exercises/``, and the
one :func:`init_course` writes into a teacher's nbgrader course folder) call
:func:`configure`, so that:

* **instructor-only files are never released**: ``mistakes.py`` (the typical mistakes the
  tests are checked against) and the other :data:`INSTRUCTOR_ONLY` globs are left out by
  ``generate_assignment``, and so never reach ``release/``, the exchange, ``submitted/``
  or ``feedback/``;
* **stderr never fails a cell**: nbgrader's Validate button and ``nbgrader autograde`` count
  any output on stderr (a harmless warning) as a failed cell; ``course-grade`` does not.
  the kernels nbgrader starts write stderr to the stdout stream (:data:`KERNEL_ARGUMENTS`),
  so the three agree and the learner still sees the warning;
* **nbgrader works without activating the virtual environment**: nbgrader runs the
  ``alembic`` command (gradebook database) through ``PATH``; the interpreter's own
  ``bin/`` folder is put first on ``PATH`` so ``.venv/bin/nbgrader ...`` and
  ``.venv/bin/jupyter lab`` (formgrader) find it;
* **written answers may carry a mark scheme**: nbgrader's ``ClearMarkScheme`` removes the
  region between ``BEGIN MARK SCHEME`` and ``END MARK SCHEME`` of a manually graded answer
  cell from the release (docs/GRADING.md, "Written answers");
* **released notebooks say what they are**: :class:`RecordAssignment` stores the assignment
  name and which test cells have hidden parts in the notebook's metadata, so a learner's
  ``course-grade --check`` can work from the released notebook alone.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

from nbgrader.preprocessors import NbGraderPreprocessor

__all__ = ["INSTRUCTOR_ONLY", "METADATA_KEY", "KERNEL_ARGUMENTS", "RecordAssignment", "configure",
           "init_course", "COURSE_CONFIG"]

#: File globs of an assignment's source folder that are never released to learners.
INSTRUCTOR_ONLY = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "mistakes.py", "*.md"]

#: Notebook metadata key written by :class:`RecordAssignment`.
METADATA_KEY = "course_grade"

_HIDDEN_MARKER = "BEGIN HIDDEN TESTS"


#: Extra arguments of the kernels nbgrader starts (Validate, autograde): the kernel sends what
#: is written to stderr to the stdout stream, so no cell "fails" by printing a warning.
KERNEL_ARGUMENTS = ["--IPKernelApp.exec_lines=import sys; sys.stderr = sys.stdout"]


class RecordAssignment(NbGraderPreprocessor):
    """Store the assignment name and the test cells with hidden parts in notebook metadata.

    Runs inside ``nbgrader generate_assignment`` before the hidden tests are removed, and
    writes ``metadata.course_grade = {"assignment": ..., "notebook": ..., "hidden_tests": [...]}``.
    """

    def preprocess(self, nb: Any, resources: dict) -> tuple[Any, dict]:
        info = resources.get("nbgrader", {})
        hidden = []
        for cell in nb.cells:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution") \
                    and _HIDDEN_MARKER in cell.source:
                hidden.append(meta.get("grade_id"))
        nb.metadata[METADATA_KEY] = {"assignment": info.get("assignment", ""),
                                     "notebook": info.get("notebook", ""), "hidden_tests": hidden}
        self._say_what_is_checked(nb, hidden)
        return nb, resources

    @staticmethod
    def _say_what_is_checked(nb: Any, hidden: list) -> None:
        """Put a note after the title: how many points the public checks (Validate,
        ``course-grade --check``) decide and how many only the teacher's hidden tests do -
        nbgrader's Validate says "passes all the tests" when only the public ones ran."""
        import nbformat
        points = {}
        for cell in nb.cells:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
                points[meta.get("grade_id")] = float(meta.get("points", 0) or 0)
        if not points:
            return
        total = sum(points.values())
        later = sum(p for gid, p in points.items() if gid in hidden)
        from course_grader.i18n import gettext_for, notebook_language
        _ = gettext_for(notebook_language(nb))   # the Chinese edition's notebooks get it in Chinese
        text = _("**About the checks.** This notebook is worth {total} points. Its visible test cells (run "
                 "them, press *Validate*, or run `course-grade --check` on the notebook) decide "
                 "{public} of them. The other {hidden} points come from hidden tests that run only "
                 "when your teacher grades, on fresh inputs: *Validate* saying that the notebook passes its "
                 "tests means the visible checks passed, not that your grade is full.").format(
            total=f"{total:g}", public=f"{total - later:g}", hidden=f"{later:g}")
        if later == 0:
            text = _("**About the checks.** This notebook is worth {total} points, all decided by the visible "
                     "test cells (run them, press *Validate*, or run `course-grade --check`).").format(
                total=f"{total:g}")
        written = sum(float(cell.get("metadata", {}).get("nbgrader", {}).get("points", 0) or 0) for cell in nb.cells
                      if cell.get("metadata", {}).get("nbgrader", {}).get("grade")
                      and cell.get("metadata", {}).get("nbgrader", {}).get("solution"))
        if written:  # written answers (issue 30): their points come on top, from the teacher
            text += " " + _("Written answers add {written} points, graded by your teacher by hand (the notebook is "
                            "worth {total} points in all).").format(written=f"{written:g}", total=f"{total + written:g}")
        cell = nbformat.v4.new_markdown_cell(text)
        cell.id = "about-the-checks"
        at = 1 if nb.cells and nb.cells[0].cell_type == "markdown" else 0
        nb.cells.insert(at, cell)


def _generate_preprocessors() -> list:
    from nbgrader.converters import GenerateAssignment
    from nbgrader.preprocessors import ClearHiddenTests
    default = list(GenerateAssignment.class_traits()["preprocessors"].default())
    return default[: default.index(ClearHiddenTests)] + [RecordAssignment] + default[default.index(ClearHiddenTests):]


def configure(c: Any) -> None:
    """Apply the course's nbgrader settings to an nbgrader config object ``c``.

    Args:
        c: the ``get_config()`` object of an ``nbgrader_config.py``.
    """
    bindir = os.path.dirname(sys.executable)
    path = os.environ.get("PATH", "")
    if bindir not in path.split(os.pathsep):
        os.environ["PATH"] = bindir + (os.pathsep + path if path else "")
    c.CourseDirectory.ignore = list(INSTRUCTOR_ONLY)
    # (nbgrader's Execute defines on_cell_executed as a method, so that nbclient hook cannot be set)
    c.Execute.extra_arguments = list(KERNEL_ARGUMENTS)
    c.GenerateAssignment.preprocessors = _generate_preprocessors()
    c.ClearOutput.enabled = True
    # written answers (nbgrader's "manually graded answer" cells: grade and solution, with a
    # grade_id) carry their mark scheme between BEGIN/END MARK SCHEME. nbgrader's ClearMarkScheme
    # removes it from the release, but by default refuses a mark scheme outside a "task" cell
    # ("Mark scheme region detected in a non-grade cell"): its check exists so that the cell has
    # an id, which a written answer has. The generator (course_tools.grading_dev.generate) checks
    # that no release keeps a mark scheme.
    c.ClearMarkScheme.enforce_metadata = False


#: The ``nbgrader_config.py`` that :func:`init_course` writes into a teacher's course.
COURSE_CONFIG = '''"""nbgrader configuration of this course (made by `course-grade init-course`).

The course's rules (instructor-only files such as mistakes.py never released, stderr never
fails a cell, nbgrader usable without activating the virtual environment, released
notebooks that name their assignment) come from course_grader.nbgrader_course.
"""

from course_grader.nbgrader_course import configure

c = get_config()  # noqa: F821 - injected by nbgrader
configure(c)
c.CourseDirectory.course_id = {course_id!r}
# The exchange learners fetch from and submit to (nbgrader's default: /srv/nbgrader/exchange).
# c.Exchange.root = "/srv/nbgrader/exchange"
'''


def init_course(directory: str | Path, solutions: str | Path, assignments: list[str] | None = None, *,
                course_id: str = "attention-course") -> list[Path]:
    """Create an nbgrader course folder with this course's assignments as ``source/``.

    Args:
        directory: the new course folder (may exist; existing assignments are not overwritten).
        solutions: the repository's ``solutions/`` folder.
        assignments: names to copy (default: every assignment of ``solutions``).
        course_id: nbgrader's course id.

    Returns:
        The ``source/<assignment>`` folders created.
    """
    directory, solutions = Path(directory), Path(solutions)
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "nbgrader_config.py"
    if not config.exists():
        config.write_text(COURSE_CONFIG.format(course_id=course_id), encoding="utf-8")
    names = assignments or sorted(p.name for p in solutions.iterdir() if p.is_dir() and any(p.glob("*.ipynb")))
    made = []
    for name in names:
        src, dest = solutions / name, directory / "source" / name
        if not src.is_dir():
            raise FileNotFoundError(f"no assignment {name!r} in {solutions}")
        if dest.exists():
            continue
        shutil.copytree(src, dest, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__", "*.pyc"))
        made.append(dest)
    return made
