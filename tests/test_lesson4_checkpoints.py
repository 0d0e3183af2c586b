"""The two models lesson 4 loads (course_lib/data_files/lesson4_checkpoints) and the script behind them.

* they load, strictly, into the models lesson 4 builds from the recorded configuration, with the
  lesson's vocabularies, and their recorded training is the lesson's (16 epochs, loss falling);
* a file of another width is refused, and so is a file that is not a checkpoint;
* the lesson refuses them when its recipe or its vocabularies differ from the recorded ones;
* (slow) the script's first steps still give the training losses recorded with the shipped
  checkpoints, and it refuses bad arguments with a message.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
import torch
from _bench import load_script
from _lesson_head import assert_lesson_refuses

from course_lib.checkpoints import load_checkpoint
from course_lib.corpus import make_splits
from course_lib.data import build_vocabs
from course_lib.seq2seq import Seq2Seq, Seq2SeqConfig

TIER = "fast"  # course_tools/tiers.py

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "course_lib" / "data_files" / "lesson4_checkpoints"
LESSON = ROOT / "notebooks" / "04_bahdanau_attention.ipynb"
MAX_MB = 2.0


def _meta() -> dict:
    return json.loads((SHIPPED / "meta.json").read_text())


@pytest.mark.slow  # 0.57 s of CPU (a fast test stays under 0.1 s: course_tools/tiers.py)
def test_shipped_checkpoints_load_into_lesson4s_models() -> None:
    meta = _meta()
    assert set(meta["models"]) == {"plain", "wide"}
    splits = make_splits(n_train=8000, n_valid=500, n_test=1000, seed=0)      # lesson 4's section 1
    src_vocab, tgt_vocab = build_vocabs(splits.train, min_freq=2)
    assert meta["vocab_hash"] == load_script("train_lesson4_checkpoints").vocab_hash(src_vocab, tgt_vocab)
    total = 0
    for stem, hiddens in (("plain", 64), ("wide", 128)):
        entry = meta["models"][stem]
        path = SHIPPED / entry["file"]
        assert path.stat().st_size == entry["bytes"], f"{path.name} is not the file meta.json describes"
        total += entry["bytes"]
        config = Seq2SeqConfig(**entry["config"])
        assert (config.num_hiddens, config.src_vocab_size, config.tgt_vocab_size) == (hiddens, len(src_vocab),
                                                                                      len(tgt_vocab))
        model = Seq2Seq(config)
        ckpt = load_checkpoint(path, model)
        assert sum(p.numel() for p in model.parameters()) == entry["parameters"]
        assert all(torch.isfinite(p).all() for p in model.parameters())
        val = ckpt["extra"]["val_loss"]
        assert val == entry["val_loss"] and entry["epochs"] == len(val) == 16 and val[-1] < 0.4 * val[0]
    assert total < MAX_MB * 1e6, f"the shipped checkpoints take {total / 1e6:.2f} MB; keep them under {MAX_MB} MB"


def test_a_checkpoint_of_another_width_or_a_foreign_file_is_refused(tmp_path: Path) -> None:
    entry = _meta()["models"]["plain"]
    narrow = Seq2Seq(Seq2SeqConfig(**dict(entry["config"], num_hiddens=32)))
    with pytest.raises(ValueError, match="does not match the checkpoint"):
        load_checkpoint(SHIPPED / entry["file"], narrow)
    junk = tmp_path / "plain.pt"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="not a readable checkpoint"):
        load_checkpoint(junk, Seq2Seq(Seq2SeqConfig(**entry["config"])))


def _lesson_cells(upto: int) -> list[str]:
    """The sources of lesson 4's code cells up to the one that defines load_or_train."""
    nb = nbformat.read(LESSON, as_version=4)
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    end = next(i for i, src in enumerate(code) if "def load_or_train" in src)
    return code[:end + upto]


@pytest.mark.slow  # runs the lesson's first cells (imports torch, builds the corpus)
def test_the_lesson_checks_recipe_and_vocabularies_before_loading(tmp_path: Path) -> None:
    assert_lesson_refuses(_lesson_cells(1), 'CKPT_DIR = Path(course_lib.__file__).resolve().parent / '
                          '"data_files" / "lesson4_checkpoints"', _meta(),
                          [(lambda m: m["recipe"].update(lr=1e-3), "recipe"),
                           (lambda m: m.update(vocab_hash="0" * 16), "other vocabularies")], tmp_path, LESSON.parent)


def test_script_refuses_bad_arguments(tmp_path: Path, capsys) -> None:
    # in this process: argparse exits with 2 before any work (the command line itself is checked by
    # tests/test_tools_package.py)
    for args, message in [(["--models", "lstm"], "invalid choice"),
                          (["--max-steps", "0"], "at least 1"),
                          (["--max-steps", "3", "--out", str(SHIPPED)], "holds the shipped checkpoints")]:
        if "--out" not in args:
            args = ["--out", str(tmp_path / "out"), *args]
        with pytest.raises(SystemExit) as exit_:
            load_script("train_lesson4_checkpoints").main(args)
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and message in err, (args, err[-400:])
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_script_reproduces_the_start_of_the_shipped_run(tmp_path: Path) -> None:
    meta = _meta()
    out = tmp_path / "ck"
    assert load_script("train_lesson4_checkpoints").main(["--out", str(out), "--max-steps", "20"]) == 0
    short = json.loads((out / "meta.json").read_text())
    assert short["recipe"] == meta["recipe"] and short["vocab_hash"] == meta["vocab_hash"]
    for stem in ("plain", "wide"):
        load_checkpoint(out / f"{stem}.pt", Seq2Seq(Seq2SeqConfig(**meta["models"][stem]["config"])))
        assert short["models"][stem]["fingerprint"] == pytest.approx(meta["models"][stem]["fingerprint"], abs=2e-3), (
            f"{stem}: the first {meta['fingerprint_steps']} training losses differ from the shipped run's")
