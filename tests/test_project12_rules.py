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


# -- results shared across processes (COURSE_PROJECT_CACHE) ---------------------------------------

_FAKE = {"bleu": 7.5, "multi": 9.25, "params": 123, "steps": 300, "final_loss": 2.5, "cpu_seconds": 20.0,
         "translations": {"Go.": "Va !"}}


@pytest.fixture
def counted_runs(monkeypatch):
    """project.run with its training replaced by a counter (the memo in this process cleared
    before and after): what reaches the real work, and with which arguments."""
    calls: list[tuple] = []

    def fake(key, seed, pairs):
        calls.append((key, seed, pairs))
        return json.loads(json.dumps(_FAKE))

    monkeypatch.setattr(project, "_train_and_score", fake)
    project._run.cache_clear()
    yield calls
    project._run.cache_clear()


_SMALLEST = {"d_model": 32, "num_heads": 1, "d_ff": 64, "num_layers": 1, "dropout": 0.0, "merges": 250,
             "batch_size": 128, "peak_lr": 3e-3, "warmup": 0, "schedule": "constant", "label_smoothing": 0.0}


def _config(**change):
    """A configuration, already checked (check_config counts parameters, which builds the BPE vocabularies)."""
    return project.ProjectConfig(**dict(_SMALLEST, **change))


PAIRS = [("Go.", "Va !")]


def test_a_result_kept_in_the_folder_is_reused_by_another_process(counted_runs, monkeypatch, tmp_path):
    monkeypatch.setenv(project.CACHE_ENV, str(tmp_path / "runs"))
    first = project.run(_config(), PAIRS)
    project._run.cache_clear()  # what another process sees: only the folder
    again = project.run(_config(), PAIRS)
    assert len(counted_runs) == 1 and first == again == _FAKE
    kept = list((tmp_path / "runs").iterdir())
    assert len(kept) == 1 and kept[0].name.startswith("run-") and (tmp_path / "runs").stat().st_mode & 0o077 == 0
    # anything a result depends on gives another entry: the configuration, the seed, the pairs scored
    project.run(_config(dropout=0.1), PAIRS)
    project.run(_config(), PAIRS, seed=1)
    project.run(_config(), [("Go.", "Bouge !")])
    assert len(counted_runs) == 4 and len(list((tmp_path / "runs").iterdir())) == 4


def test_the_library_torch_and_cpu_kernels_are_part_of_the_key(counted_runs, monkeypatch, tmp_path):
    monkeypatch.setenv(project.CACHE_ENV, str(tmp_path))
    project.run(_config(), PAIRS)
    project._run.cache_clear()
    monkeypatch.setattr(project, "_library_fingerprint", lambda: "another library or torch build")
    project.run(_config(), PAIRS)
    assert len(counted_runs) == 2
    monkeypatch.undo()
    fingerprint = project._library_fingerprint
    fingerprint.cache_clear()
    before = fingerprint()
    monkeypatch.setattr(project.torch.backends.cpu, "get_cpu_capability", lambda: "another CPU")
    fingerprint.cache_clear()
    try:
        assert fingerprint() != before
    finally:
        monkeypatch.undo()
        fingerprint.cache_clear()


@pytest.mark.parametrize("damage", [
    "", "{", "[]", '{"bleu": 1.0}', json.dumps(dict(_FAKE, bleu="7.5")), json.dumps(dict(_FAKE, steps=True)),
    json.dumps(dict(_FAKE, bleu=99)),
    json.dumps(dict(_FAKE, translations={"Go.": 3})), json.dumps(dict(_FAKE, extra=1))])
def test_a_damaged_entry_is_computed_again_and_replaced(counted_runs, monkeypatch, tmp_path, damage):
    monkeypatch.setenv(project.CACHE_ENV, str(tmp_path))
    project.run(_config(), PAIRS)
    (entry,) = tmp_path.iterdir()
    entry.write_text(damage, "utf-8")
    project._run.cache_clear()
    assert project.run(_config(), PAIRS) == _FAKE
    assert len(counted_runs) == 2 and json.loads(entry.read_text("utf-8")) == _FAKE


def test_without_the_variable_nothing_is_written(counted_runs, monkeypatch, tmp_path):
    monkeypatch.delenv(project.CACHE_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    project.run(_config(), PAIRS)
    project._run.cache_clear()
    project.run(_config(), PAIRS)
    assert len(counted_runs) == 2 and list(tmp_path.iterdir()) == []


def test_a_folder_that_cannot_be_written_warns_and_still_gives_the_result(counted_runs, monkeypatch, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", "utf-8")
    monkeypatch.setenv(project.CACHE_ENV, str(blocker))
    with pytest.warns(RuntimeWarning, match="COURSE_PROJECT_CACHE=.*cannot keep the project's result there"):
        assert project.run(_config(), PAIRS) == _FAKE
    assert blocker.read_text("utf-8") == "not a folder"


def test_the_test_run_shares_runs_under_the_name_the_library_reads():
    from course_tools import tiers

    assert tiers.PROJECT_CACHE_ENV == project.CACHE_ENV
    import os
    assert os.environ.get(project.CACHE_ENV), "conftest.py shares the project's runs for the whole test run"


@pytest.mark.slow  # two short trainings, each in a fresh process: ~8 s of CPU
def test_a_kept_result_is_what_a_fresh_process_computes(tmp_path):
    """What makes sharing honest: the same configuration trained in two processes gives the same
    result to the last bit (one thread, fixed seed), kept or not. (A budget of 10 steps and BPE of
    500 merges at most, to keep it short: the same code path as the real budget.)"""
    import os
    import subprocess
    import sys

    code = ("import json; from course_lib import project\n"
            "project.BUDGET_EXAMPLES = 1280; project.CHOICES['merges'] = (250, 500)\n"
            f"r = project.run({_SMALLEST!r}, project.dev_pairs()[:40])\n"
            "assert r['steps'] == 10, r['steps']\n"
            "r.pop('cpu_seconds'); print(json.dumps(r, sort_keys=True))")
    env = {k: v for k, v in os.environ.items() if k != project.CACHE_ENV}
    fresh = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    kept = subprocess.run([sys.executable, "-c", code], env=dict(env, **{project.CACHE_ENV: str(tmp_path)}),
                          capture_output=True, text=True, check=True).stdout
    (entry,) = tmp_path.iterdir()
    from_folder = json.loads(entry.read_text("utf-8"))
    from_folder.pop("cpu_seconds")
    assert json.loads(fresh) == json.loads(kept) == from_folder


@pytest.mark.sandbox  # grades a notebook in the grader's sandbox: ~5 s
def test_a_learner_can_neither_see_nor_fill_the_graders_project_runs(tmp_path, monkeypatch):
    """The folder holds what the grader trusts (scores) and what it hides (translations of the
    held-back sentences): a learner's cell that tries to list it, read it or plant a forged entry
    finds nothing there (its /tmp is its own), and the grader's folder is as the grader left it."""
    from course_grader.notebook import Assignment
    from course_grader.runner import grade_submission
    from course_grader.sandbox import SandboxConfig
    from course_tools.grading_dev.testing import variant, write_notebook

    folder = tmp_path / "runs"
    folder.mkdir(mode=0o700)
    kept = folder / ("run-" + "0" * 64 + ".json")
    kept.write_text(json.dumps(_FAKE), "utf-8")
    monkeypatch.setenv(project.CACHE_ENV, str(folder))
    source = ROOT / "solutions" / "lesson03_scoring" / "scoring.ipynb"
    attack = (f"import json, os\nfolder = {str(folder)!r}\n"
              "seen = os.environ.get('COURSE_PROJECT_CACHE'), os.path.exists(folder)\n"
              "print('ATTACK seen', seen)\n"
              "try:\n    os.makedirs(folder, exist_ok=True)\n"
              "    open(os.path.join(folder, 'run-' + 'f' * 64 + '.json'), 'w').write(json.dumps({'bleu': 99.0}))\n"
              "    print('ATTACK planted')\nexcept OSError as exc:\n    print('ATTACK refused', type(exc).__name__)\n")
    nb = variant(source)
    code = next(i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code")
    nb["cells"].insert(code + 1, {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                                  "source": attack})
    path = write_notebook(nb, tmp_path / "learner" / "scoring.ipynb")
    result = grade_submission(Assignment.load(source.parent), "learner", {"scoring": path},
                              config=SandboxConfig(cell_timeout=60, call_timeout=30))
    out = "".join(str(c.get("stdout", "")) for c in result.notebooks[0].cells)
    assert "ATTACK seen (None, False)" in out, out[-2000:]
    # what it "planted" went to the sandbox's own /tmp, gone with it: the grader's folder is untouched
    assert "ATTACK planted" in out or "ATTACK refused" in out, out[-2000:]
    assert sorted(p.name for p in folder.iterdir()) == [kept.name]
    assert json.loads(kept.read_text("utf-8")) == _FAKE
