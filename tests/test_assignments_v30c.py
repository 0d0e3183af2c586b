"""Issue 30, second edition of the assignments of lessons 1, 2 and 4 (lesson01_seq2seq, lesson02_pooling,
lesson04_bahdanau): what each must carry, checked on the source and on the released notebooks.

* learner A's notebook (its answers computed from A's variant) graded as learner B loses exactly the
  points of the questions and the experiment drawn from the variant, and keeps every code point;
* at least half of the code points (test cells of code tasks) have a public part;
* a written-analysis cell graded by hand: nbgrader metadata of a manually graded answer, a mark
  scheme in the source, and in every released edition only ``YOUR ANSWER HERE``;
* the introduction says how long the assignment takes; at least three hinted mistakes;
* the experiment's tolerance is stated in its text.

The sandboxed grading of these notebooks (solution full marks, stub zero, each mistake, fairness over
seeds, public mistakes caught publicly) is in tests/test_grading_assignments.py and
tests/test_grading_fairness.py, which pick up every assignment.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from course_grader import variants
from course_grader.notebook import Assignment
from course_tools.grading_dev.fairness import outcomes_under_seeds
from course_tools.grading_dev.testing import load_mistakes, variant as notebook_variant

TIER = "fast"  # course_tools/tiers.py

ROOT = Path(__file__).resolve().parents[1]
EDITIONS = (ROOT / "exercises", ROOT / "zh" / "exercises", ROOT / "zh-TW" / "exercises")
#: assignment -> (notebook, the test cells whose expected values come from the variant, the written cell)
OWNED = {
    "lesson01_seq2seq": ("seq2seq", {"test_answer_state_shape", "test_answer_brevity", "test_experiment_drift"},
                         "written_padding"),
    "lesson02_pooling": ("pooling", {"test_answer_boxcar_weight", "test_experiment_width"}, "written_width"),
    "lesson04_bahdanau": ("bahdanau", {"test_answer_weights_shape", "test_answer_extra_params",
                                       "test_experiment_entropy"}, "written_entropy"),
}
#: the solution cell of each assignment's transfer task (a task the lesson did not write out)
TRANSFER = {"lesson01_seq2seq": "scheduled_sampling", "lesson02_pooling": "gaussian_weights_nd",
            "lesson04_bahdanau": "bi_encoder"}
#: test cells of questions and experiments (ANSWER_ variables), not of code tasks
NOT_CODE = re.compile(r"^test_(answer|experiment)_")


@pytest.fixture(autouse=True)
def _grader_id_reset():
    variants.begin_grading(None)
    yield
    variants.begin_grading(None)


def _load(path: Path) -> dict:
    return json.loads(path.read_text("utf-8"))


def _source(name: str) -> Path:
    return ROOT / "solutions" / name / f"{OWNED[name][0]}.ipynb"


def _grade_cells(nb: dict) -> list[dict]:
    return [c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade")]


def _two_ids(name: str) -> tuple[str, str]:
    """Two learner ids whose variants differ in every parameter of the assignment's table."""
    table = variants.TABLES[name]
    a = variants.make_variant(name, "alice")
    for n in range(500):
        b = variants.make_variant(name, f"bob-{n}")
        if all(json.dumps(a[k], sort_keys=True) != json.dumps(b[k], sort_keys=True) for k in a):
            return "alice", f"bob-{n}"
    raise AssertionError(f"{name}: no id differs from alice everywhere ({sorted(table)})")


@pytest.mark.slow  # 0.29 s of CPU in its costliest case (a fast test stays under 0.1 s: course_tools/tiers.py)
@pytest.mark.parametrize("name", sorted(OWNED))
def test_a_copied_notebook_loses_the_variant_points_and_keeps_the_code_points(name):
    """Alice's whole notebook (her variant cell forced in, so every answer is computed for her numbers)
    graded as bob: exactly the variant-dependent cells fail; graded as alice: nothing fails."""
    alice, bob = _two_ids(name)
    source = Assignment.load(ROOT / "solutions" / name).notebooks[OWNED[name][0]]
    forced = notebook_variant(source.path, replace={"variant": (
        "from course_grader.variants import make_variant, variant\n"
        f"VARIANT = make_variant({name!r}, {alice!r})\n")})
    failed = {}
    for who in (alice, bob):
        variants.begin_grading(who)
        out = outcomes_under_seeds(source, forced, [0])
        assert out.learner_errors == [], (who, out.learner_errors)
        failed[who] = out.always_failed()
    assert failed[alice] == set(), failed[alice]
    assert failed[bob] == OWNED[name][1], failed[bob]


@pytest.mark.parametrize("name", sorted(OWNED))
def test_at_least_half_of_the_code_points_have_a_public_check(name):
    code = public = 0.0
    for cell in _grade_cells(_load(_source(name))):
        meta = cell["metadata"]["nbgrader"]
        if cell["cell_type"] != "code" or meta.get("solution") or NOT_CODE.match(meta["grade_id"]):
            continue
        text = "".join(cell["source"])
        before_hidden = text.split("### BEGIN HIDDEN TESTS")[0]
        has_public = any(line.strip() and not line.lstrip().startswith("#") for line in before_hidden.splitlines())
        code += meta["points"]
        public += meta["points"] if has_public else 0
    assert code > 0 and public / code >= 0.5, f"{name}: {public:g} of {code:g} code points have a public check"


@pytest.mark.parametrize("name", sorted(OWNED))
def test_the_written_analysis_is_graded_by_hand_and_its_mark_scheme_is_not_released(name):
    written = OWNED[name][2]
    cells = [c for c in _load(_source(name))["cells"]
             if c["metadata"].get("nbgrader", {}).get("grade_id") == written]
    assert len(cells) == 1, f"{name}: no written-analysis cell {written!r}"
    cell = cells[0]
    meta = cell["metadata"]["nbgrader"]
    assert cell["cell_type"] == "markdown"
    assert (meta["grade"], meta["solution"], meta["locked"], meta["points"], meta["schema_version"]) == (True, True, False, 2, 3)
    text = "".join(cell["source"])
    assert text.startswith("=== BEGIN MARK SCHEME ===") and text.rstrip().endswith("=== END MARK SCHEME ===")
    assert "Rubric" in text
    for edition in EDITIONS:
        released = _load(edition / name / f"{OWNED[name][0]}.ipynb")
        assert "MARK SCHEME" not in json.dumps(released, ensure_ascii=False), f"{edition}/{name}: the mark scheme leaked"
        out = [c for c in released["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == written]
        assert len(out) == 1 and "".join(out[0]["source"]) == "YOUR ANSWER HERE", f"{edition}/{name}"


@pytest.mark.parametrize("name", sorted(OWNED))
def test_the_introduction_states_the_time_and_the_experiment_its_tolerance(name):
    cells = _load(_source(name))["cells"]
    intro = "".join(cells[0]["source"])
    assert re.search(r"\*\*Time:\*\* about \d+ minutes", intro), f"{name}: no time estimate in the introduction"
    experiment = [c for c in cells if c["cell_type"] == "markdown" and "Experiment:" in "".join(c["source"])]
    assert len(experiment) == 1 and re.search(r"within \*\*[0-9.]+", "".join(experiment[0]["source"]))


@pytest.mark.parametrize("name", sorted(OWNED))
def test_at_least_three_mistakes_name_themselves_two_of_them_in_the_transfer_task(name):
    mistakes = load_mistakes(ROOT / "solutions" / name)
    hinted = [m for m, spec in mistakes.items() if spec.get("hint")]
    assert len(hinted) >= 3, f"{name}: {hinted}"
    for m in hinted:
        assert mistakes[m].get("lesson") and isinstance(mistakes[m].get("section"), int), m
    in_transfer = [m for m in hinted if TRANSFER[name] in mistakes[m]["replace"]]
    assert len(in_transfer) >= 2, f"{name}: hinted mistakes of the transfer task {TRANSFER[name]!r}: {in_transfer}"
