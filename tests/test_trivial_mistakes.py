"""The fairness harness's trivial functions (course_tools.grading_dev.testing.trivial_mistakes).

A trivial version of a graded function must reach everything the learner's own version would
reach: the rest of its solution cell included (an experiment's ``ANSWER_ = f(...)`` lines, a
class that calls it). Fast: builds sources and runs them in this process, no sandbox.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from course_tools.grading_dev.testing import TRIVIAL_INPUT, TRIVIAL_OUTPUT, trivial_mistakes

TIER = "fast"

CELL = '''import torch

def measure(x):
    """The experiment's helper."""
    return x * 2

ANSWER_FIGURE = measure(torch.tensor(3.0)).item()
ANSWER_AGAIN = float(measure(4.0))
'''


def _notebook(tmp_path: Path) -> Path:
    cells = [
        {"cell_type": "code", "source": CELL, "metadata": {"nbgrader": {
            "solution": True, "grade": False, "grade_id": "exp", "locked": False, "schema_version": 3}},
         "outputs": [], "execution_count": None},
        {"cell_type": "code", "source": "assert ANSWER_FIGURE == 6.0", "metadata": {"nbgrader": {
            "solution": False, "grade": True, "grade_id": "test_exp", "locked": True, "points": 1,
            "schema_version": 3}}, "outputs": [], "execution_count": None},
    ]
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}), "utf-8")
    return path


@pytest.mark.parametrize("kind", sorted(TRIVIAL_OUTPUT) + sorted(set(TRIVIAL_INPUT) - {"none", "identity"}))
def test_a_trivial_function_reaches_the_rest_of_its_cell(tmp_path: Path, kind: str) -> None:
    # Before the fix the "_out" wrap was appended after the whole cell: ANSWER_FIGURE was computed
    # with the real function (6.0) and the variant equalled the solution.
    mistake = trivial_mistakes(_notebook(tmp_path))[f"trivial_measure_{kind}"]
    assert mistake["fails"] == ["test_exp"]
    scope: dict = {}
    exec(compile(mistake["replace"]["exp"], "<cell>", "exec"), scope)
    assert scope["ANSWER_FIGURE"] != 6.0, kind
    assert scope["ANSWER_AGAIN"] != 8.0, kind


def test_the_solution_cell_itself_gives_the_real_figures() -> None:
    scope: dict = {}
    exec(compile(CELL, "<cell>", "exec"), scope)
    assert (scope["ANSWER_FIGURE"], scope["ANSWER_AGAIN"]) == (6.0, 8.0)
