"""Issue 30, second edition of assignments 6, 7, 8 and 10: what each must carry, read from the source.

Per assignment: a variant table whose every parameter the notebook uses; a transfer task (a code
task whose text states a contract and keeps its step hints in a collapsed ``<details>`` block);
a graded experiment (an ``experiment`` solution cell whose test recomputes the figures from the
grader's variant, with the tolerance stated in the task text); a hand-graded written cell carrying
a mark scheme that the released notebook (all three editions) does not contain; public checks on
at least half of the code points; at least three hinted mistakes; and a time estimate in the
introduction. The grading behaviour itself (solution full marks, mistakes caught, fairness over
seeds and variants, hints that name themselves) is covered by the shared sandbox-tier tests.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from course_grader.variants import TABLES
from course_tools.grading_dev.testing import load_mistakes

TIER = "fast"  # course_tools/tiers.py

ROOT = Path(__file__).resolve().parents[1]
#: assignment -> (notebook, the transfer task's solution cell, the written cell)
OWNED = {
    "lesson06_positional": ("positional", "relative_bias", "written_distance"),
    "lesson07_transformer": ("transformer", "cross_cache", "written_norm_order"),
    "lesson08_gpt": ("gpt", "top_p", "written_sampling"),
    "lesson10_vit": ("vit", "grid_embedding", "written_shuffle"),
}
EDITIONS = (ROOT / "exercises", ROOT / "zh" / "exercises", ROOT / "zh-TW" / "exercises")


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text("utf-8"))["cells"]


def _meta(cell: dict) -> dict:
    return cell["metadata"].get("nbgrader", {})


def _text(cell: dict) -> str:
    return "".join(cell["source"])


def _by_id(cells: list[dict]) -> dict[str, int]:
    return {_meta(c)["grade_id"]: i for i, c in enumerate(cells) if _meta(c).get("grade_id")}


def public_share(cells: list[dict]) -> tuple[float, float]:
    """(points of code-task test cells with a public part, points of all code-task test cells). A test
    cell belongs to the solution cell above it; the short answers and the experiment are not code tasks."""
    task, covered, total = None, 0.0, 0.0
    for cell in cells:
        meta = _meta(cell)
        if cell["cell_type"] == "code" and meta.get("solution"):
            task = meta["grade_id"]
        elif meta.get("grade") and not meta.get("solution") and task not in ("answers", "experiment"):
            total += meta["points"]
            public = _text(cell).split("### BEGIN HIDDEN TESTS")[0]
            if any(line.strip() and not line.lstrip().startswith("#") for line in public.splitlines()):
                covered += meta["points"]
    return covered, total


@pytest.mark.parametrize("name", sorted(OWNED))
def test_assignment_carries_the_second_editions_parts(name):
    notebook, transfer, written = OWNED[name]
    cells = _cells(ROOT / "solutions" / name / f"{notebook}.ipynb")
    ids = _by_id(cells)
    source = "\n".join(_text(c) for c in cells)
    # variants: a table, the locked variant cell, every parameter used by the notebook
    assert name in TABLES and ids.get("variant") is not None, f"{name}: no variant table or variant cell"
    assert _meta(cells[ids["variant"]]).get("locked")
    for parameter in (k for v in TABLES[name].values() for k in (v[0] if isinstance(v[0], dict) else {"": 0})):
        if parameter:
            assert f'"{parameter}"' in source or f"`{parameter}`" in source, f"{name}: {parameter} never used"
    # the transfer task: a contract in its text, the steps collapsed
    intro = _text(cells[ids[transfer] - 1])
    assert "**Contract.**" in intro and "<details>" in intro and "</details>" in intro, f"{name}: {transfer}"
    # the experiment: recomputed from the grader's variant, within a stated tolerance
    test_cell = next(_text(c) for c in cells[ids["experiment"]:] if _meta(c).get("grade") and not _meta(c).get("solution"))
    assert f'variant("{name}")' in test_cell.split("### BEGIN HIDDEN TESTS")[1]
    assert re.search(r"within\s+\*\*[\d.e-]+ ?%\*\*", _text(cells[ids["experiment"] - 1])), f"{name}: no stated tolerance"
    # the written cell: hand-graded markdown with a mark scheme
    cell = cells[ids[written]]
    assert cell["cell_type"] == "markdown" and _meta(cell) == {
        "grade": True, "solution": True, "locked": False, "points": 2, "grade_id": written, "schema_version": 3}
    assert "=== BEGIN MARK SCHEME ===" in _text(cell) and "Rubric" in _text(cell)
    # public checks on at least half of the code points
    covered, total = public_share(cells)
    assert covered >= total / 2, f"{name}: public checks on {covered} of {total} code points"
    # at least three mistakes that name themselves
    mistakes = load_mistakes(ROOT / "solutions" / name)
    assert sum(1 for m in mistakes.values() if m.get("hint")) >= 3
    # the time estimate
    assert re.search(r"\*\*Time\*\*: about \d+ minutes", _text(cells[0])), f"{name}: no time estimate"


@pytest.mark.parametrize("name", sorted(OWNED))
def test_released_written_cells_keep_no_mark_scheme(name):
    notebook, _, written = OWNED[name]
    for folder in EDITIONS:
        cells = _cells(folder / name / f"{notebook}.ipynb")
        cell = cells[_by_id(cells)[written]]
        assert _text(cell).strip() == "YOUR ANSWER HERE", f"{folder}: {name}/{written}"
        assert not any("MARK SCHEME" in _text(c) for c in cells), f"{folder}: {name} leaks a mark scheme"
