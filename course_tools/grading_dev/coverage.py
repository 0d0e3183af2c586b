"""How much of an assignment a learner can check before handing it in (issue 30, item 6).

An assignment's **code points** are the points of its test cells that grade code (every graded
cell that does not read an ``ANSWER_...`` variable: those grade questions and reported figures).
A code test cell **carries a public part** when the part before ``### BEGIN HIDDEN TESTS`` (the
whole cell when it has no hidden part) makes a check: an ``assert`` statement or a call of a
checks function (``assert_...``, ``call``). The **public share** is the points of code test cells
with a public part over all code points; the issue asks for at least one half per assignment.

    python -m course_tools.grading_dev coverage          # the table, for every assignment

The **time estimate** is the "about N minutes" (or hours) sentence of the assignment's
introduction, its first markdown cell.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from pathlib import Path

from course_tools.grading_dev.points import cell_source

__all__ = ["CellPoints", "Coverage", "coverage", "time_estimate", "public_part", "has_public_check"]

HIDDEN_BEGIN = "### BEGIN HIDDEN TESTS"
ANSWER_NAME = re.compile(r"\bANSWER_[A-Z0-9_]+\b")
#: "about 45 minutes", "about 1.5 hours", "about 1 hour"
ESTIMATE = re.compile(r"\babout (\d+(?:\.\d+)?) (minutes?|hours?)\b", re.IGNORECASE)
CHECK_CALL = re.compile(r"^(assert_\w+|call)$")


@dataclass(frozen=True)
class CellPoints:
    """One graded test cell: its grade id, points, whether it grades code, whether it has a public check."""

    grade_id: str
    points: float
    code: bool
    public: bool


@dataclass(frozen=True)
class Coverage:
    """The graded cells of one assignment notebook and the shares computed from them."""

    notebook: str
    cells: tuple[CellPoints, ...]

    @property
    def code_points(self) -> float:
        return sum(c.points for c in self.cells if c.code)

    @property
    def public_code_points(self) -> float:
        return sum(c.points for c in self.cells if c.code and c.public)

    @property
    def share(self) -> float:
        """Public code points over code points (1.0 for an assignment without code points)."""
        return self.public_code_points / self.code_points if self.code_points else 1.0

    @property
    def total_points(self) -> float:
        return sum(c.points for c in self.cells)


def public_part(source: str) -> str:
    """The part of a test cell's source a learner sees: everything before the hidden marker."""
    return source.split(HIDDEN_BEGIN, 1)[0]


def has_public_check(source: str) -> bool:
    """Whether the visible part of a test cell makes a check (an assert, or an ``assert_*``/``call``)."""
    try:
        tree = ast.parse(public_part(source))
    except SyntaxError as exc:
        raise ValueError(f"the public part of a test cell does not parse ({exc.msg}, line {exc.lineno}): "
                         "fix the cell's Python before measuring coverage") from None
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert):
            return True
        if isinstance(node, ast.Call):
            fn = node.func
            name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else ""
            if CHECK_CALL.match(name):
                return True
    return False


def coverage(notebook: str | Path | dict) -> Coverage:
    """The graded cells of an instructor notebook (a ``solutions/<a>/<name>.ipynb`` path or its JSON)."""
    if isinstance(notebook, dict):
        nb, name = notebook, "<notebook>"
    else:
        name = str(notebook)
        nb = json.loads(Path(notebook).read_text("utf-8"))
    cells = []
    for cell in nb.get("cells", []):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.get("cell_type") != "code" or not meta.get("grade"):
            continue
        if "points" not in meta:
            raise ValueError(f"{name}: graded cell {meta.get('grade_id')!r} has no points: give it nbgrader "
                             "metadata 'points'")
        src = cell_source(cell)
        cells.append(CellPoints(str(meta.get("grade_id")), float(meta["points"]),
                                code=ANSWER_NAME.search(src) is None, public=has_public_check(src)))
    return Coverage(name, tuple(cells))


def time_estimate(notebook: str | Path | dict) -> str | None:
    """The "about N minutes" of the notebook's introduction (its first markdown cell), or None."""
    nb = notebook if isinstance(notebook, dict) else json.loads(Path(notebook).read_text("utf-8"))
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "markdown":
            found = ESTIMATE.search(cell_source(cell))
            return found.group(0) if found else None
    return None


def table(root: str | Path) -> list[tuple[str, Coverage, str | None]]:
    """(assignment, coverage, time estimate) for every ``solutions/<a>/*.ipynb`` under ``root``."""
    rows = []
    for path in sorted(Path(root, "solutions").glob("*/*.ipynb")):
        rows.append((path.parent.name, coverage(path), time_estimate(path)))
    return rows


def format_table(rows: list[tuple[str, Coverage, str | None]]) -> str:
    lines = ["| assignment | code points with a public check | share | time estimate |", "|---|---|---|---|"]
    for name, cov, estimate in rows:
        lines.append(f"| {name} | {cov.public_code_points:g} / {cov.code_points:g} | {cov.share:.0%} | "
                     f"{estimate or 'none'} |")
    return "\n".join(lines)
