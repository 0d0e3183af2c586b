"""Generate the learner notebooks (``exercises/``) from the sources (``solutions/``) with nbgrader.

Runs nbgrader's ``GenerateAssignment`` in-process for every assignment (one nbgrader
import instead of one per assignment), with the repository's ``nbgrader_config.py`` and
no gradebook database. The output is deterministic: regenerating gives identical files,
which ``tests/test_grading_assignments.py`` checks.
"""

from __future__ import annotations

import logging
from pathlib import Path

__all__ = ["list_assignments", "generate_exercises"]


def list_assignments(root: str | Path) -> list[str]:
    """Names of the assignments: folders of ``solutions/`` that hold a notebook."""
    sol = Path(root) / "solutions"
    return sorted(p.name for p in sol.iterdir() if p.is_dir() and any(p.glob("*.ipynb"))) if sol.is_dir() else []


def generate_exercises(root: str | Path, release_dir: str | Path | None = None,
                       assignments: list[str] | None = None) -> list[Path]:
    """Run ``nbgrader generate_assignment`` for each assignment.

    Args:
        root: the course repository (holds ``nbgrader_config.py`` and ``solutions/``).
        release_dir: where to write (default ``exercises/`` as configured).
        assignments: names to generate (default: all of :func:`list_assignments`).

    Returns:
        The generated notebook paths.
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
    if release_dir is not None:
        config.CourseDirectory.release_directory = str(Path(release_dir).resolve())
    config.GenerateAssignment.no_database = True
    config.SaveCells.enabled = False
    config.BaseConverter.force = True
    logging.getLogger("traitlets").setLevel(logging.WARNING)
    out: list[Path] = []
    for name in assignments or list_assignments(root):
        config.CourseDirectory.assignment_id = name
        coursedir = CourseDirectory(config=config)
        app = GenerateAssignment(coursedir=coursedir, config=config)
        app.log.setLevel(logging.WARNING)
        app.start()
        release = Path(coursedir.release_directory)
        release = release if release.is_absolute() else root / release
        out.extend(sorted((release / name).glob("*.ipynb")))
    return out
