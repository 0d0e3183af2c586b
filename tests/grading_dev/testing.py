"""Helpers to build learner notebooks for grader tests and benchmarks.

Typical use (see tests/test_grading_assignments.py)::

    nb = variant(solution_path, replace={"masked_softmax": WRONG_SOURCE})
    write_notebook(nb, tmp_path / "alice" / "scoring.ipynb")

``solutions/<assignment>/mistakes.py`` lists typical mistakes as
``MISTAKES = {name: {"replace": {grade_id: source}, "fails": [test ids], "may_fail": [...]}}``.
"""

from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path
from collections.abc import Callable
from typing import Any

__all__ = ["variant", "write_notebook", "load_mistakes"]


def variant(source: str | Path | dict, *, replace: dict[str, str] | None = None,
            append: dict[str, str] | None = None, drop: list[str] | None = None,
            strip_metadata: bool = False) -> dict:
    """A copy of a notebook with some cells changed (cells named by nbgrader grade_id).

    Args:
        source: a notebook path or a notebook dict.
        replace: grade_id -> new source of that cell.
        append: grade_id -> code appended to that cell.
        drop: grade_ids of cells to delete.
        strip_metadata: remove all cell metadata (as some editors do).
    """
    nb = copy.deepcopy(source) if isinstance(source, dict) else json.loads(Path(source).read_text("utf-8"))
    replace, append = replace or {}, append or {}
    dropped = set(drop or [])
    known: set[str | None] = set()
    cells = []
    for cell in nb["cells"]:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        known.add(gid)
        if gid in dropped:
            continue
        if gid in replace:
            cell["source"] = replace[gid].strip("\n")
        if gid in append:
            src = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
            cell["source"] = src + "\n" + append[gid].strip("\n")
        if strip_metadata:
            cell["metadata"] = {}
        cells.append(cell)
    missing = (set(replace) | set(append) | dropped) - known
    if missing:
        raise KeyError(f"no cell with grade_id {sorted(missing)}")
    nb["cells"] = cells
    return nb


def write_notebook(nb: dict, path: str | Path) -> Path:
    """Write a notebook dict as JSON, creating folders."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def load_mistakes(assignment_dir: str | Path) -> dict[str, Any]:
    """``MISTAKES`` from ``<assignment_dir>/mistakes.py`` ({} if there is none)."""
    path = Path(assignment_dir) / "mistakes.py"
    if not path.exists():
        return {}
    spec = importlib.util.spec_from_file_location(f"_mistakes_{Path(assignment_dir).name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(getattr(module, "MISTAKES", {}))


def solution_editor(notebook: str | Path) -> Callable[..., dict[str, str]]:
    """For a ``mistakes.py``: ``edit(grade_id, (old, new), ...)`` returns ``{grade_id: source}``,
    the solution cell with each ``old`` (which must occur exactly once, so that a change to the
    solution cannot silently turn a mistake into a copy of it) replaced by ``new``."""
    sources = {cell["metadata"]["nbgrader"]["grade_id"]: "".join(cell["source"])
               for cell in json.loads(Path(notebook).read_text("utf-8"))["cells"]
               if "nbgrader" in cell.get("metadata", {})}

    def edit(grade_id: str, *changes: tuple[str, str]) -> dict[str, str]:
        source = sources[grade_id]
        for old, new in changes:
            if source.count(old) != 1:
                raise ValueError(f"mistakes.py: {old!r} must occur exactly once in the solution cell {grade_id!r}")
            source = source.replace(old, new)
        return {grade_id: source}

    return edit
