"""Generate the learner notebooks from the sources with nbgrader, for both editions.

* English: ``solutions/<assignment>/`` -> ``exercises/<assignment>/``;
* Chinese (issue 23): ``zh/solutions/<assignment>/`` (built by ``scripts/i18n.py build`` from
  ``solutions/`` and the catalogues) -> ``zh/exercises/<assignment>/``, exactly the same way.

Runs nbgrader's ``GenerateAssignment`` in-process for every assignment (one nbgrader
import instead of one per assignment), with the repository's ``nbgrader_config.py`` (the
course's rules: ``mistakes.py`` never released, the "About the checks" cell, in Chinese for a
Chinese notebook) and no gradebook database. The output is deterministic: regenerating gives
identical files, which ``tests/test_grading_assignments.py`` checks for both editions.

Every release is checked before it is kept (:func:`check_release`): nbgrader's
``ClearMarkScheme`` ran, and no released notebook holds a mark scheme (the rubric of a written
answer, between ``BEGIN MARK SCHEME`` and ``END MARK SCHEME``) or any line of one.
"""

from __future__ import annotations

import logging
from pathlib import Path

__all__ = ["EDITIONS", "list_assignments", "generate_exercises", "generate_editions", "check_release",
           "ReleaseLeak", "MARK_SCHEME"]

#: nbgrader's delimiters of a mark scheme (ClearMarkScheme's defaults).
MARK_SCHEME = ("BEGIN MARK SCHEME", "END MARK SCHEME")


class ReleaseLeak(RuntimeError):
    """A generated learner notebook would hold instructor-only text (a mark scheme)."""


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def _mark_scheme_lines(nb: dict) -> list[str]:
    """The lines inside the mark-scheme regions of a source notebook (blank and very short lines
    left out: they would match anything)."""
    begin, end = MARK_SCHEME
    out: list[str] = []
    for cell in nb.get("cells", []):
        inside = False
        for line in _source(cell).split("\n"):
            if begin in line:
                inside = True
            elif end in line:
                inside = False
            elif inside and len(line.strip()) >= 8:
                out.append(line.strip())
    return out


def check_release(source_dir: str | Path, release_dir: str | Path, preprocessors: list | None = None) -> None:
    """Refuse a release that could show a learner a mark scheme.

    Args:
        source_dir: the assignment's source folder (instructor notebooks).
        release_dir: the generated learner folder.
        preprocessors: the preprocessors ``generate_assignment`` ran (checked to include
            nbgrader's ``ClearMarkScheme``, enabled); None to skip that check.

    Raises:
        ReleaseLeak: naming the notebook and cell, and what to do.
    """
    import json
    from nbgrader.preprocessors import ClearMarkScheme
    if preprocessors is not None and not any(isinstance(p, ClearMarkScheme) and p.enabled for p in preprocessors):
        raise ReleaseLeak("nbgrader's ClearMarkScheme did not run in generate_assignment: the written answers' mark "
                          "schemes would be released. Keep ClearMarkScheme in GenerateAssignment.preprocessors and "
                          "enabled (course_grader.nbgrader_course.configure does).")
    source_dir, release_dir = Path(source_dir), Path(release_dir)
    for released in sorted(release_dir.glob("*.ipynb")):
        nb = json.loads(released.read_text("utf-8"))
        source = source_dir / released.name
        secret = _mark_scheme_lines(json.loads(source.read_text("utf-8"))) if source.is_file() else []
        for i, cell in enumerate(nb.get("cells", []), start=1):
            text = _source(cell)
            leaked = [m for m in MARK_SCHEME if m in text] or [line for line in secret if line in text]
            if leaked:
                raise ReleaseLeak(f"{released}: cell {i} still holds a mark scheme ({leaked[0][:80]!r}). Put the rubric "
                                  "of a written answer between BEGIN MARK SCHEME and END MARK SCHEME lines inside its "
                                  "manually graded answer cell (nbgrader grade and solution), each marker kept "
                                  "untranslated, then generate again.")

#: Edition -> (source folder, release folder), relative to the repository.
EDITIONS = {"en": ("solutions", "exercises"), "zh-CN": ("zh/solutions", "zh/exercises"),
            "zh-TW": ("zh-TW/solutions", "zh-TW/exercises")}


def list_assignments(root: str | Path, source: str | Path = "solutions") -> list[str]:
    """Names of the assignments: folders of ``source`` (relative to ``root``, or absolute) that
    hold a notebook."""
    sol = Path(root) / source
    return sorted(p.name for p in sol.iterdir() if p.is_dir() and any(p.glob("*.ipynb"))) if sol.is_dir() else []


def generate_exercises(root: str | Path, release_dir: str | Path | None = None,
                       assignments: list[str] | None = None, *, source: str | Path | None = None) -> list[Path]:
    """Run ``nbgrader generate_assignment`` for each assignment.

    Args:
        root: the course repository (holds ``nbgrader_config.py`` and ``solutions/``).
        release_dir: where to write (default ``exercises/`` as configured).
        assignments: names to generate (default: all of :func:`list_assignments`).
        source: the folder of source assignments (default ``solutions/`` as configured;
            ``zh/solutions`` for the Chinese edition), relative to ``root`` or absolute.

    Returns:
        The generated notebook paths.

    Raises:
        FileNotFoundError: ``source`` is given and is not a folder.
    """
    from nbgrader.converters import GenerateAssignment
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config import Config
    from traitlets.config.loader import PyFileConfigLoader

    root = Path(root).resolve()
    config = Config()
    cfg_file = root / "nbgrader_config.py"
    if cfg_file.exists():
        config.merge(PyFileConfigLoader(cfg_file.name, path=str(root)).load_config())
    config.CourseDirectory.root = str(root)
    if source is not None:
        src = root / source
        if not src.is_dir():
            raise FileNotFoundError(f"no source assignments in {src}")
        config.CourseDirectory.source_directory = str(src.resolve())
    if release_dir is not None:
        config.CourseDirectory.release_directory = str(Path(release_dir).resolve())
    config.GenerateAssignment.no_database = True
    config.SaveCells.enabled = False
    config.BaseConverter.force = True
    logging.getLogger("traitlets").setLevel(logging.WARNING)
    out: list[Path] = []
    src_dir = Path(config.CourseDirectory.source_directory) if source is not None else "solutions"
    for name in assignments or list_assignments(root, src_dir):
        config.CourseDirectory.assignment_id = name
        coursedir = CourseDirectory(config=config)
        app = GenerateAssignment(coursedir=coursedir, config=config)
        app.log.setLevel(logging.WARNING)
        app.start()
        release = Path(coursedir.release_directory)
        release = release if release.is_absolute() else root / release
        source_root = Path(coursedir.source_directory)
        source_root = source_root if source_root.is_absolute() else root / source_root
        try:
            check_release(source_root / name, release / name, list(getattr(app.exporter, "_preprocessors", [])))
        except ReleaseLeak:
            for leaked in (release / name).glob("*.ipynb"):  # never left where a learner could fetch it
                leaked.unlink()
            raise
        out.extend(sorted((release / name).glob("*.ipynb")))
    return out


def generate_editions(root: str | Path, assignments: list[str] | None = None,
                      editions: list[str] | None = None) -> list[Path]:
    """Generate every edition whose sources exist (English always; Chinese when ``zh/solutions``
    has been built), or the ``editions`` named (an error if their sources are missing)."""
    root = Path(root).resolve()
    out: list[Path] = []
    for edition in editions or list(EDITIONS):
        if edition not in EDITIONS:
            raise ValueError(f"unknown edition {edition!r}; editions are {', '.join(EDITIONS)}")
        source, release = EDITIONS[edition]
        if not (root / source).is_dir():
            if editions:
                raise FileNotFoundError(f"{source}/ does not exist: build it first "
                                        "(`.venv/bin/python scripts/i18n.py build`)")
            continue
        names = [a for a in (assignments or list_assignments(root, source))
                 if (root / source / a).is_dir()] if assignments else None
        if assignments and not names:
            continue
        out += generate_exercises(root, root / release, names, source=source)
    return out
