"""Lesson 12's graded project, graded end to end with course-grade on a class.

The class: the reference solution, the baseline (the lesson's recipe unchanged, honest figures), the
released stub, and two learners who try to buy marks with more training: one asks for more steps in
their configuration (refused, with a message, no project points), one trains and tampers inside
their own notebook (the sandbox's copy of course_lib: a bigger budget, a forged ``run``) and gets
exactly the reference's grade, because the grader trains and scores on its own side.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from course_grader import cli
from course_lib import project
from course_tools.grading_dev.testing import variant, write_notebook

TIER = "sandbox"
pytestmark = [pytest.mark.sandbox, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
KEY = ROOT / "solutions" / "lesson12_project"
PROJECT = ["test_project_baseline", "test_project_better", "test_project_reference"]
AUTO = {"test_loss_public": 1, "test_loss": 3, "test_schedule": 3, "test_project_config": 2,
        "test_project_baseline": 2, "test_project_better": 2, "test_project_reference": 2, "test_experiment": 2}

_TAMPER = '''
# A learner who tries to train longer: a bigger budget and a forged scorer in their own process, and a
# model trained here for more steps than the budget allows (never read by the grader).
import course_lib.project as _p
_p.BUDGET_EXAMPLES = 10 ** 7
_p.PARAM_CAP = 10 ** 9
_p.run = lambda *args, **kwargs: {"bleu": 99.0, "params": 1, "steps": 10 ** 6}
_p.check_config = lambda config: config
from course_lib.transformer import Transformer, TransformerConfig
torch.manual_seed(0)
my_longer_trained_model = Transformer(TransformerConfig(src_vocab_size=50, tgt_vocab_size=50, d_model=16,
                                                        num_heads=2, d_ff=32, num_layers=1, dropout=0.0))
_opt = torch.optim.Adam(my_longer_trained_model.parameters(), lr=1e-3)
for _ in range(30):
    _src = torch.randint(4, 50, (8, 6))
    _loss = my_longer_trained_model(_src, torch.full((8,), 6), _src).logsumexp(-1).mean()
    _opt.zero_grad()
    _loss.backward()
    _opt.step()
'''


def _answers(baseline_dev: float, mine_dev: float) -> str:
    return f"ANSWER_BASELINE_DEV_BLEU = {baseline_dev:.2f}\nANSWER_MY_DEV_BLEU = {mine_dev:.2f}\n"


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("project12")
    subs = tmp / "submitted"
    baseline_dev = project.run(project.BASELINE)["bleu"]   # what an honest learner measured
    write_notebook(variant(KEY / "project.ipynb"), subs / "reference" / "project.ipynb")
    write_notebook(variant(KEY / "project.ipynb", replace={
        "config": "def project_config():\n    return dict(BASELINE)\n",
        "answers": _answers(baseline_dev, baseline_dev)}), subs / "baseline" / "project.ipynb")
    (subs / "stub").mkdir()
    shutil.copy(ROOT / "exercises" / "lesson12_project" / "project.ipynb", subs / "stub" / "project.ipynb")
    source = json.loads((KEY / "project.ipynb").read_text("utf-8"))
    config_cell = next("".join(c["source"]) for c in source["cells"]
                       if c["metadata"].get("nbgrader", {}).get("grade_id") == "config")
    reference = json.loads(config_cell.split("### BEGIN SOLUTION")[1].split("### END SOLUTION")[0]
                           .strip().removeprefix("return").strip())
    write_notebook(variant(KEY / "project.ipynb", replace={
        "config": f"def project_config():\n    return {json.dumps(dict(reference, steps=5000))}\n"}),
        subs / "more_steps" / "project.ipynb")
    write_notebook(variant(KEY / "project.ipynb", append={"config": _TAMPER}), subs / "tamperer" / "project.ipynb")
    out = tmp / "grades"
    code = cli.main([str(KEY), str(subs), "--out", str(out), "--jobs", "1"])
    assert code == 0
    rows = json.loads((out / "lesson12_project" / "grades.json").read_text("utf-8"))["results"]
    return {r["student"]: r for r in rows}


def _tests(row: dict) -> dict[str, dict]:
    return {t["grade_id"]: t for nb in row["notebooks"] for t in nb["tests"]}


def test_the_reference_earns_every_auto_graded_point(graded):
    tests = _tests(graded["reference"])
    assert {g: t["points"] for g, t in tests.items()} == AUTO
    assert graded["reference"]["total"] == 17 and graded["reference"]["pending_manual"] == 3


def test_the_baseline_earns_the_baselines_share_of_the_project(graded):
    tests = _tests(graded["baseline"])
    assert [tests[g]["points"] for g in PROJECT] == [2, 0, 0]
    assert graded["baseline"]["total"] == 13
    assert "needs at least" in tests["test_project_better"]["message"]


def test_the_stub_earns_nothing_and_says_why(graded):
    tests = _tests(graded["stub"])
    assert graded["stub"]["total"] == 0
    assert all(t["message"] for t in tests.values())
    assert "project_config" in tests["test_project_config"]["message"]


def test_asking_for_more_steps_is_refused_with_no_project_points(graded):
    tests = _tests(graded["more_steps"])
    assert [tests[g]["points"] for g in ["test_project_config", *PROJECT, "test_experiment"]] == [0] * 5
    assert "unknown key(s) ['steps']" in tests["test_project_config"]["message"]
    assert "fixed by the grader" in tests["test_project_config"]["message"]
    assert graded["more_steps"]["total"] == 17 - 2 - 6 - 2


def test_training_longer_in_the_notebook_buys_nothing(graded):
    assert {g: t["points"] for g, t in _tests(graded["tamperer"]).items()} == AUTO
    assert graded["tamperer"]["total"] == graded["reference"]["total"]
