"""Issue 30, item 6 and "Done when": public checks cover at least half of each assignment's code
points, and each assignment's introduction says how long it takes.

``course_tools.grading_dev.coverage`` defines the share (points of code test cells whose visible
part makes a check, over all code points; cells that read ``ANSWER_...`` grade questions, not
code). Every assignment of ``solutions/`` must meet both bars (at least 11 of them are
expected, so an empty or partial list cannot pass vacuously); the table for every assignment
is printed (``pytest -s``) and written to the test's report.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from course_tools.grading_dev.coverage import coverage, format_table, has_public_check, table, time_estimate

TIER = "content"  # course_tools/tiers.py: reads notebooks only

ROOT = Path(__file__).resolve().parents[1]

#: Every assignment (a folder of solutions/ with an instructor notebook): each must meet the bar.
ASSIGNMENTS = sorted({p.parent.name for p in (ROOT / "solutions").glob("*/*.ipynb")})
#: Assignments whose public checks cover at least half of the code points: all of them.
MEETS_HALF = set(ASSIGNMENTS)
#: Assignments whose introduction states a time estimate ("about N minutes"): all of them.
HAS_ESTIMATE = set(ASSIGNMENTS)

ROWS = {name: (cov, estimate) for name, cov, estimate in table(ROOT)}


def test_the_table_of_every_assignment(record_property):
    text = format_table(table(ROOT))
    print("\n" + text)
    record_property("public_share_table", text)
    assert len(ROWS) >= 11, f"expected every assignment (at least 11) in the table, found {sorted(ROWS)}"
    assert set(ROWS) == set(ASSIGNMENTS), "the table must have one row per assignment of solutions/"
    assert MEETS_HALF <= set(ROWS) and HAS_ESTIMATE <= set(ROWS), "a listed assignment has no solutions/ notebook"


@pytest.mark.parametrize("name", sorted(MEETS_HALF))
def test_public_checks_cover_half_the_code_points(name):
    cov, _ = ROWS[name]
    hidden_only = [c.grade_id for c in cov.cells if c.code and not c.public]
    assert cov.share >= 0.5, (f"{name}: public checks cover {cov.public_code_points:g} of {cov.code_points:g} code "
                              f"points; give a public part (checks before '### BEGIN HIDDEN TESTS') to some of "
                              f"{hidden_only}")


@pytest.mark.parametrize("name", sorted(HAS_ESTIMATE))
def test_the_introduction_states_a_time_estimate(name):
    _, estimate = ROWS[name]
    assert estimate, f"{name}: the introduction (first markdown cell) says no 'about N minutes'"


def _nb(*cells):
    return {"cells": [{"cell_type": t, "source": s, "metadata": {"nbgrader": m}} for t, s, m in cells]}


def test_the_share_counts_public_code_cells_and_ignores_questions():
    nb = _nb(("markdown", "# A\nThis takes about 40 minutes.", {}),
             ("code", "x = 1  # a solution", {"solution": True, "grade_id": "s"}),
             ("code", "# public\nassert_shape(f(1), (1,))\n### BEGIN HIDDEN TESTS\nassert 0\n### END HIDDEN TESTS",
              {"grade": True, "points": 3, "grade_id": "t1"}),
             ("code", "# hidden only\nrng = fresh_rng()\n### BEGIN HIDDEN TESTS\nassert 0\n### END HIDDEN TESTS",
              {"grade": True, "points": 2, "grade_id": "t2"}),
             ("code", "assert_number(ANSWER_X, 1)", {"grade": True, "points": 5, "grade_id": "q"}))
    cov = coverage(nb)
    assert (cov.public_code_points, cov.code_points, cov.total_points) == (3, 5, 10)
    assert cov.share == pytest.approx(0.6)
    assert time_estimate(nb) == "about 40 minutes"
    assert time_estimate(_nb(("markdown", "# A\nno estimate", {}))) is None
    assert not has_public_check("x = call  # a name, not a check\n### BEGIN HIDDEN TESTS\nassert False")
    with pytest.raises(ValueError, match="does not parse"):
        coverage(_nb(("code", "assert (", {"grade": True, "points": 1, "grade_id": "bad"})))
