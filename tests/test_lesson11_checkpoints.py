"""The checkpoints lesson 11 loads (course_lib/data_files/lesson11_checkpoints) and the script behind them.

* they were made by the lesson's current training cells (the recorded hash of the cells the
  script executes is the hash of those cells now): edit train() or the recipes and this fails
  until the script is run again;
* every file loads, strictly, into the model the recorded recipe builds; meta.json says its
  size, the total stays small, and the float16 weights score on validation within 0.5 BLEU of the
  float32 weights they were rounded from;
* the shipped steps are exactly the checkpoints lesson 11's section 3 chooses from the recorded
  curves (best within each step budget, best within the smallest CPU total);
* the lesson refuses a meta.json with other recipes or vocabularies; the script refuses bad
  arguments with a message; (slow) a shortened run of the script repeats the shipped run's first
  100 training losses.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import torch
from _lesson_head import assert_lesson_refuses, run_lesson_head

from course_lib.checkpoints import load_checkpoint
from course_lib.seq2seq import AttentionSeq2Seq, Seq2Seq, Seq2SeqConfig
from course_lib.training import Checkpoint, History
from course_lib.transformer import Transformer, TransformerConfig
from course_tools import train_lesson11_checkpoints as script

TIER = "fast"  # course_tools/tiers.py

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = script.SHIPPED
LESSON = script.LESSON
MAX_MB = 2.5
BUILD = {"Seq2Seq": (Seq2Seq, Seq2SeqConfig), "AttentionSeq2Seq": (AttentionSeq2Seq, Seq2SeqConfig),
         "Transformer": (Transformer, TransformerConfig)}


def _meta() -> dict:
    return json.loads((SHIPPED / "meta.json").read_text())


def _histories(meta: dict) -> dict[str, History]:
    return {name: History(steps=e["steps"], train_cpu_seconds=e["train_cpu_seconds"],
                          checkpoints=[Checkpoint(*c) for c in e["checkpoints"]]) for name, e in meta["models"].items()}


def test_shipped_checkpoints_come_from_the_lessons_current_training_cells(tmp_path: Path) -> None:
    assert _meta()["code_sha256"] == script.code_sha256(script.training_cells()), (
        "lesson 11's training cells changed since its checkpoints were trained: run "
        "`scripts/train_lesson11_checkpoints.py --out course_lib/data_files/lesson11_checkpoints` again")
    nb = nbformat.read(LESSON, as_version=4)             # and an edit of those cells does change the hash
    cell = next(c for c in nb.cells if c.cell_type == "code" and "def train(" in c.source)
    cell.source = cell.source.replace("clip_grad_norm=1.0", "clip_grad_norm=2.0")
    nbformat.write(nb, tmp_path / "edited.ipynb")
    assert script.code_sha256(script.training_cells(tmp_path / "edited.ipynb")) != _meta()["code_sha256"]


@pytest.mark.slow  # 0.12 s of CPU (a fast test stays under 0.1 s: course_tools/tiers.py)
def test_shipped_checkpoints_load_and_are_the_ones_the_lesson_chooses() -> None:
    meta = _meta()
    histories = _histories(meta)
    chosen = {name: max(h.checkpoints, key=lambda c: (c.value, -c.step)).step for name, h in histories.items()}
    expected = script.shipped_steps(histories, chosen)
    total = 0
    for name, entry in meta["models"].items():
        kind, config, _lr, _warmup, steps = meta["recipes"][name]
        assert entry["steps"] == steps == entry["checkpoints"][-1][0] and len(entry["step_loss"]) == steps
        assert sorted(int(s) for s in entry["files"]) == expected[name], f"{name}: not the checkpoints section 3 picks"
        cls, cfg_cls = BUILD[kind]
        for step, file in entry["files"].items():
            path = SHIPPED / file
            assert path.stat().st_size == entry["bytes"][step], f"{file} is not the file meta.json describes"
            total += entry["bytes"][step]
            stored = torch.load(path, weights_only=True)["model"]
            assert all(t.dtype == torch.float16 for t in stored.values() if t.is_floating_point())
            model = cls(cfg_cls(**config))
            load_checkpoint(path, model)
            assert all(p.dtype == torch.float32 and torch.isfinite(p).all() for p in model.parameters())
            valid32 = next(c[4] for c in entry["checkpoints"] if c[0] == int(step))
            assert abs(entry["half_valid_bleu"][step] - valid32) < 0.5, f"{file}: float16 changed validation BLEU"
    assert total < MAX_MB * 1e6, f"lesson 11's checkpoints take {total / 1e6:.2f} MB; keep them under {MAX_MB} MB"


@pytest.mark.slow  # runs the lesson's first cells (imports torch, builds the corpus)
def test_the_lesson_checks_recipes_and_vocabularies_before_loading(tmp_path: Path) -> None:
    code = [c.source for c in nbformat.read(LESSON, as_version=4).cells if c.cell_type == "code"]
    cells = code[:next(i for i, src in enumerate(code) if "def load_or_train" in src) + 1]
    ckpt_line = 'CKPT_DIR = Path(course_lib.__file__).resolve().parent / "data_files" / "lesson11_checkpoints"'
    meta = _meta()
    assert_lesson_refuses(cells, ckpt_line, meta,
                          [(lambda m: m["recipes"]["Transformer"].__setitem__(2, 1e-3), "other recipes"),
                           (lambda m: m.update(vocab_hash="0" * 16), "other vocabularies")], tmp_path, LESSON.parent)
    (tmp_path / "meta.json").write_text(json.dumps(meta))         # the unchanged record passes the same checks
    run = run_lesson_head(cells, ckpt_line, tmp_path, LESSON.parent)
    assert run.returncode == 0, run.stderr[-600:]


def test_script_refuses_bad_arguments(tmp_path: Path, capsys) -> None:
    # in this process: argparse exits with 2 before any work (the command line itself is checked by
    # tests/test_tools_package.py)
    for args, message in [(["--max-steps", "50"], "multiple of 100"), (["--max-steps", "0"], "multiple of 100"),
                          (["--max-steps", "100", "--out", str(SHIPPED)], "holds the shipped checkpoints")]:
        if "--out" not in args:
            args = ["--out", str(tmp_path / "out"), *args]
        with pytest.raises(SystemExit) as exit_:
            script.main(args)
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and message in err, (args, err[-400:])
    assert not (tmp_path / "out").exists()


@pytest.mark.slow  # trains the three models for 100 steps each (about half a CPU minute)
def test_script_repeats_the_start_of_the_shipped_run(tmp_path: Path) -> None:
    out = tmp_path / "ck"
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "train_lesson11_checkpoints.py"), "--out", str(out),
                          "--max-steps", "100"], capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-600:]
    short, meta = json.loads((out / "meta.json").read_text()), _meta()
    assert (short["code_sha256"], short["vocab_hash"]) == (meta["code_sha256"], meta["vocab_hash"])
    for name, entry in short["models"].items():
        assert entry["step_loss"] == pytest.approx(meta["models"][name]["step_loss"][:100], abs=2e-3), (
            f"{name}: the first 100 training losses differ from the shipped run's")
