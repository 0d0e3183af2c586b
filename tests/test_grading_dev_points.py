"""course_tools.grading_dev.points: an assignment's points and cells, read from its instructor
notebook, for grader tests that must not hard-code one edition of an assignment (issue 30)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from course_tools.grading_dev.points import (SOLUTIONS, assignment_points, cell_index, fmt, dependent_tests)
from course_tools.grading_dev.testing import write_notebook, written_assignment

TIER = "fast"  # course_tools/tiers.py


def _code(gid: str, source: str, **meta) -> dict:
    return {"cell_type": "code", "source": source, "outputs": [], "execution_count": None,
            "metadata": {"nbgrader": {"grade_id": gid, "locked": False, "schema_version": 3, **meta}}}


def _quiz(folder: Path) -> Path:
    """answers (solution) + three tests: public, public+hidden, hidden-only; one reads no answer."""
    cells = [_code("answers", "ANSWER_A = None\n### BEGIN SOLUTION\nANSWER_A, ANSWER_B = 1, 2\n### END SOLUTION",
                   grade=False, solution=True),
             _code("helper", "def helper(x):\n    return x\n", grade=False, solution=False),
             _code("test_a", "assert ANSWER_A == 1", grade=True, solution=False, points=1.5),
             _code("test_b", "# the public part\nassert ANSWER_B is not None\n### BEGIN HIDDEN TESTS\n"
                   "assert ANSWER_B == 2\n### END HIDDEN TESTS", grade=True, solution=False, points=2),
             _code("test_c", "# hidden only\n### BEGIN HIDDEN TESTS\nassert helper(3) == 3\n### END HIDDEN TESTS",
                   grade=True, solution=False, points=4)]
    nb = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    return write_notebook(nb, folder / "quiz" / "quiz.ipynb")


def test_points_come_from_the_nbgrader_metadata(tmp_path):
    pts = assignment_points(written_assignment(tmp_path))  # test_double: 2 points, written_why: 3
    assert (pts.name, pts.tests, pts.written) == ("essay", {"test_double": 2.0}, {"written_why": 3.0})
    assert (pts.auto, pts.manual, pts.maximum) == (2.0, 3.0, 5.0)
    assert pts.columns == ["test_double", "written_why"]
    quiz = assignment_points(_quiz(tmp_path))
    assert quiz.auto == 7.5 and quiz.manual == 0 and quiz.maximum == 7.5
    assert quiz.kinds == {"test_a": "public", "test_b": "public+hidden", "test_c": "hidden"}
    assert quiz.of_kind("hidden", "public+hidden") == ["test_b", "test_c"]
    assert quiz.without(["test_b"]) == 5.5 and quiz.sum(["test_a", "test_c"]) == 5.5
    assert fmt(quiz.auto) == "7.5" and fmt(pts.auto) == "2"


def test_a_renamed_test_is_an_error_not_zero_points(tmp_path):
    quiz = assignment_points(_quiz(tmp_path))
    with pytest.raises(KeyError, match=r"no graded cell \['test_gone'\].*test_a"):
        quiz.without(["test_gone"])


def test_bad_metadata_and_missing_assignments_are_named(tmp_path):
    path = _quiz(tmp_path)
    nb = json.loads(path.read_text())
    nb["cells"][2]["metadata"]["nbgrader"]["points"] = "two"
    write_notebook(nb, path)
    with pytest.raises(ValueError, match=r"quiz.ipynb, cell 2 \(test_a\): points 'two' is not a number"):
        assignment_points(path)
    with pytest.raises(FileNotFoundError, match="no assignment 'lesson99_nothing'"):
        assignment_points("lesson99_nothing")


def test_cells_are_found_by_grade_id_or_by_the_name_they_define(tmp_path):
    path = _quiz(tmp_path)
    assert cell_index(path, grade_id="test_b") == 3
    assert cell_index(path, defines="ANSWER_B") == 0  # a tuple assignment in the solution region
    assert cell_index(path, defines="helper") == 1
    with pytest.raises(LookupError, match="expected one cell with grade_id 'nope', found 0"):
        cell_index(path, grade_id="nope")
    nb = json.loads(path.read_text())
    nb["cells"].append(_code("again", "def helper(x):\n    return -x\n", grade=False, solution=False))
    with pytest.raises(LookupError, match=r"defining 'helper', found 2 \(cells \[1, 5\]\)"):
        cell_index(nb, defines="helper")
    with pytest.raises(TypeError, match="exactly one"):
        cell_index(nb)


def test_dependent_tests_a_cell_are_those_that_lose_it(tmp_path):
    path = _quiz(tmp_path)
    assert dependent_tests(path, "answers") == ["test_a", "test_b"]  # test_c reads only helper
    assert dependent_tests(path, "helper") == ["test_c"]


def test_every_assignment_of_the_course_reads(tmp_path):
    names = sorted(p.name for p in SOLUTIONS.iterdir() if list(p.glob("*.ipynb")))
    assert len(names) >= 11
    for name in names:
        pts = assignment_points(name)
        assert pts.auto > 0 and set(pts.kinds) == set(pts.tests), name
        assert pts.maximum == pts.auto + pts.manual
