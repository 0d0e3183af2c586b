"""Lesson 12's graded project: the rules of its budget (course_lib.project) and what the release holds.

The grader trains a learner's configuration itself (docs/GRADING.md, "Lesson 12's project"): the
budget is not a choice, so an unknown key (``steps``, ``epochs``), a value out of range or a model
over the parameter cap is refused with a message that says what and how to fix it. The held-back
sentences that score the project live only in the instructor's source notebook, in hidden test
regions: no released notebook (English, both Chinese editions) and not the shipped sample holds one.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from course_lib import project
from course_lib.fra_eng import load_sample, near_duplicate_key

TIER = "fast"

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "solutions" / "lesson12_project" / "project.ipynb"
RELEASES = [ROOT / d / "exercises" / "lesson12_project" / "project.ipynb" for d in (".", "zh", "zh-TW")]


def _held_back() -> list[tuple[str, str]]:
    cells = json.loads(SOURCE.read_text("utf-8"))["cells"]
    text = next("".join(c["source"]) for c in cells
                if c["metadata"].get("nbgrader", {}).get("grade_id") == "test_project_baseline")
    block = re.search(r'_HELD_BACK = .*?"""\n(.*?)\n"""', text, re.S)
    assert block, "the held-back pairs are no longer where this test looks for them"
    return [tuple(line.split(" ||| ")) for line in block.group(1).splitlines()]


@pytest.mark.slow  # the parameter count needs the BPE vocabularies of 1,000 merges: 3.5 s of CPU
def test_the_baseline_is_the_lessons_recipe_and_is_accepted():
    checked = project.check_config(project.BASELINE)
    assert checked.steps * checked.batch_size == project.BUDGET_EXAMPLES == 19_200
    assert (checked.d_model, checked.num_heads, checked.d_ff, checked.num_layers, checked.merges) == (64, 4, 256, 2, 1000)
    assert project.param_count(checked) == 442_178 < project.PARAM_CAP


@pytest.mark.parametrize("change, message", [
    ({"steps": 5000}, "unknown key(s) ['steps']: the training budget (19,200 sentence pairs) and the seed are fixed"),
    ({"epochs": 3}, "unknown key(s) ['epochs']"),
    pytest.param({"d_model": 256, "d_ff": 1024, "num_layers": 4}, "parameters, over the cap of 1,000,000: make d_model",
                 marks=pytest.mark.slow),  # counts parameters: the BPE vocabularies again
    ({"batch_size": 4096}, "batch_size must be one of [16, 32, 48, 64, 96, 128], got 4096"),
    ({"peak_lr": float("nan")}, "peak_lr must be finite"),
    ({"peak_lr": 0.5}, "peak_lr must be between 0.0001 and 0.01, got 0.5"),
    ({"warmup": 12.5}, "warmup must be a whole number"),
    ({"schedule": "linear"}, "schedule must be one of ['constant', 'cosine'], got 'linear'"),
    ({"dropout": True}, "dropout must be a number, got bool True"),
])
def test_a_configuration_outside_the_rules_is_refused_with_what_and_how(change, message):
    with pytest.raises(ValueError) as err:
        project.check_config({**project.BASELINE, **change})
    assert message in str(err.value)


def test_a_missing_key_or_a_non_dict_is_refused():
    with pytest.raises(ValueError, match=r"missing key\(s\) \['label_smoothing'\]"):
        project.check_config({k: v for k, v in project.BASELINE.items() if k != "label_smoothing"})
    with pytest.raises(ValueError, match="must be a dict of choices, got list"):
        project.check_config([1, 2])


def test_the_schedule_warms_up_then_decays_to_a_tenth():
    lrs = [project.lr_at(s, 300, 60, 3e-3, "cosine") for s in range(1, 301)]
    assert lrs[59] == pytest.approx(3e-3) and lrs[-1] == pytest.approx(3e-4) and lrs[0] == pytest.approx(5e-5)
    assert all(b < a for a, b in zip(lrs[59:-1], lrs[60:]))
    assert [project.lr_at(s, 300, 0, 1e-3, "constant") for s in (1, 300)] == [1e-3, 1e-3]
    with pytest.raises(ValueError, match="1 <= step <= total_steps"):
        project.lr_at(0, 300, 10, 1e-3)


@pytest.mark.slow  # 0.34 s of CPU (a fast test stays under 0.1 s: course_tools/tiers.py)
def test_the_held_back_pairs_are_in_no_released_file():
    held = _held_back()
    assert len({near_duplicate_key(en) for en, _ in held}) == 1000 and len(held) > 1400
    sample = {near_duplicate_key(en) for en, _ in load_sample()}
    assert not {near_duplicate_key(en) for en, _ in held} & sample, "a held-back sentence is in the shipped sample"
    for path in RELEASES:
        text = path.read_text("utf-8")
        assert "_HELD_BACK" not in text and "_THRESHOLDS" not in text, f"{path}: the hidden test leaked"
        leaked = [en for en, fr in held if json.dumps(en)[1:-1] in text or json.dumps(fr, ensure_ascii=False)[1:-1] in text]
        assert not leaked, f"{path.relative_to(ROOT)} holds held-back sentences: {leaked[:3]}"
    nothing_in_dev = {near_duplicate_key(en) for en, _ in project.dev_pairs()} & {near_duplicate_key(en) for en, _ in held}
    assert not nothing_in_dev


def test_a_learners_keys_and_values_are_echoed_bounded():
    # the message reaches the feedback page, --check and grades.json: never a learner's megabyte
    huge = "k" * 100_000
    with pytest.raises(ValueError) as err:
        project.check_config({**project.BASELINE, **{f"{huge}{i}": 1 for i in range(50)}})
    assert len(str(err.value)) < 1_000 and "and 45 more" in str(err.value)
    with pytest.raises(ValueError) as err:
        project.check_config({**project.BASELINE, "schedule": huge})
    assert len(str(err.value)) < 400 and "must be one of ['constant', 'cosine']" in str(err.value)
