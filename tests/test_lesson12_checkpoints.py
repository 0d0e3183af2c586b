"""The checkpoints lesson 12 loads (course_lib/data_files/lesson12_checkpoints) and the script behind them.

* they load, strictly, into lesson 12's three models built from the configuration and vocabulary
  sizes that scripts/train_lesson12_checkpoints.py records, and they are small;
* a file that does not fit the architecture is refused;
* (slow) the script's data pipeline still gives the shipped vocabularies, and its first steps
  still give the training losses recorded with the shipped checkpoints: a short run reproduces
  the start of the run that made them;
* the script refuses bad arguments with a message.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from course_lib.seq2seq import AttentionSeq2Seq, Seq2Seq, Seq2SeqConfig
from course_lib.transformer import Transformer, TransformerConfig
from course_tools import train_lesson12_checkpoints


TIER = "fast"  # course_tools/tiers.py

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "course_lib" / "data_files" / "lesson12_checkpoints"
CLASSES = {"Seq2Seq": (Seq2Seq, Seq2SeqConfig), "AttentionSeq2Seq": (AttentionSeq2Seq, Seq2SeqConfig),
           "Transformer": (Transformer, TransformerConfig)}
MAX_MB = 6.0


def _meta() -> dict:
    return json.loads((SHIPPED / "meta.json").read_text())


def _build(entry: dict) -> torch.nn.Module:
    cls, config_cls = CLASSES[entry["class"]]
    return cls(config_cls(**entry["config"]))


def _load_into(model: torch.nn.Module, path: Path) -> None:
    state = torch.load(path, weights_only=True)
    model.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in state.items()}, strict=True)


def test_shipped_checkpoints_load_into_lesson12s_models() -> None:
    meta = _meta()
    assert set(meta["models"]) == {"gru", "bahdanau", "transformer"}
    total = 0
    for entry in meta["models"].values():
        path = SHIPPED / entry["file"]
        assert path.stat().st_size == entry["bytes"], f"{path.name} is not the file meta.json describes"
        total += entry["bytes"]
        assert entry["config"]["src_vocab_size"] == meta["src_vocab_size"]
        assert entry["config"]["tgt_vocab_size"] == meta["tgt_vocab_size"]
        model = _build(entry)
        _load_into(model, path)
        assert sum(p.numel() for p in model.parameters()) == entry["params"]
        assert all(torch.isfinite(p).all() for p in model.parameters())
        assert entry["steps"] > 400 and entry["cpu_seconds"] >= meta["cpu_budget"]   # longer than the lesson's runs
    assert total < MAX_MB * 1e6, f"the shipped checkpoints take {total / 1e6:.1f} MB; keep them under {MAX_MB} MB"


def test_a_checkpoint_of_another_architecture_is_refused(tmp_path: Path) -> None:
    entry = dict(_meta()["models"]["gru"])
    entry["config"] = dict(entry["config"], num_hiddens=64)
    with pytest.raises(RuntimeError, match="size mismatch"):
        _load_into(_build(entry), SHIPPED / entry["file"])


def test_script_refuses_bad_arguments(tmp_path: Path, capsys) -> None:
    # in this process: argparse exits with 2 before any work (the command line itself is checked by
    # tests/test_tools_package.py)
    for args, message in [(["--models", "lstm", "--max-steps", "1"], "unknown model"),
                          (["--steps-from", str(tmp_path)], "meta.json not found"),
                          (["--cpu-seconds", "0"], "must be > 0")]:
        with pytest.raises(SystemExit) as exit_:
            train_lesson12_checkpoints.main(["--out", str(tmp_path / "out"), *args])
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and message in err, (args, err[-400:])
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_script_reproduces_the_start_of_the_shipped_run(tmp_path: Path) -> None:
    meta = _meta()
    script = train_lesson12_checkpoints
    data = script.prepare(meta["seed"])
    assert data["vocab_hash"] == meta["vocab_hash"], "the data pipeline no longer gives the shipped vocabularies"
    out = tmp_path / "ck"
    assert script.main(["--out", str(out), "--models", "gru,transformer", "--max-steps", "3"]) == 0
    short = json.loads((out / "meta.json").read_text())
    for key in ("gru", "transformer"):
        assert short["models"][key]["steps"] == 3
        _load_into(_build(meta["models"][key]), out / f"{key}.pt")      # same architecture
        assert short["models"][key]["fingerprint"] == pytest.approx(meta["models"][key]["fingerprint"], abs=2e-3), (
            f"{key}: the first {meta['fingerprint_steps']} training losses differ from the shipped run's")
