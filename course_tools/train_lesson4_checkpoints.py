"""Train lesson 4's two models without attention and save them: the lesson loads them.

Lesson 4 compares the GRU encoder-decoder with attention (trained in the lesson, 8 epochs) against
two models without attention trained for 16 epochs each: lesson 1b's plain model and a control with
a context twice as wide. Those two cost more than half of the lesson's CPU time and teach nothing
new to train, so this script trains them with exactly the lesson's recipe (the same split,
vocabularies, length-bucketed batches of 128, training seed, Adam at 5e-3, gradient clipping at 1,
dropout 0.1, 16 epochs, one torch thread) and saves them; the lesson loads them for its default
seed 0 and trains them itself for any other seed or when started with ``COURSE_RETRAIN_LESSON4=1``.

Each model's file (``course_lib.checkpoints.save_checkpoint``, float32, read back with
``weights_only=True``) holds the weights; ``meta.json`` holds the recipe, a hash of the
vocabularies, and per model its validation loss after every epoch, its CPU time per epoch, its
parameter count and a fingerprint: the training loss of its first ``FINGERPRINT_STEPS`` steps, which
a short run (``--max-steps``) recomputes to check that it still runs the same pipeline
(``tests/test_lesson4_checkpoints.py``). On the machine that trained them, a training run in the
lesson gives the same weights (one thread, same kernels): the lesson's printed figures are the same.

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python scripts/train_lesson4_checkpoints.py \\
        --out course_lib/data_files/lesson4_checkpoints          # what shipped (about 1.5 CPU minutes)
    .venv/bin/python scripts/train_lesson4_checkpoints.py --max-steps 20 --out /tmp/ck   # a quick check
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch

from course_lib.checkpoints import save_checkpoint, vocab_hash
from course_lib.corpus import make_splits
from course_lib.data import build_vocabs, make_translation_loader
from course_lib.seq2seq import Seq2Seq, Seq2SeqConfig
from course_lib.training import TrainConfig, fit, seq2seq_loss, set_seed

ROOT = Path(__file__).resolve().parent.parent  # the checkout (the shipped files are written into it)

SHIPPED = ROOT / "course_lib" / "data_files" / "lesson4_checkpoints"
# Lesson 4's recipe (section 1 and the train() function of section 4); the lesson asserts it equals
# the recipe recorded in meta.json before it loads anything.
RECIPE: dict[str, Any] = {"n_train": 8000, "n_valid": 500, "n_test": 1000, "split_seed": 0, "min_freq": 2, "batch_size": 128,
          "epochs": 16, "lr": 5e-3, "clip_grad_norm": 1.0, "seed": 0, "embed_size": 32, "num_layers": 1,
          "dropout": 0.1}
MODELS = {"plain": ("GRU seq2seq", 64), "wide": ("GRU seq2seq, h = 128", 128)}   # file stem: (lesson's name, h)
FINGERPRINT_STEPS = 20


def train_one(stem: str, max_steps: int | None = None) -> tuple[torch.nn.Module, Any, dict[str, Any]]:
    """Train one of the two models as lesson 4's train() does; returns (model, config, record)."""
    r = RECIPE
    splits = make_splits(n_train=r["n_train"], n_valid=r["n_valid"], n_test=r["n_test"], seed=r["split_seed"])
    src_vocab, tgt_vocab = build_vocabs(splits.train, min_freq=r["min_freq"])
    name, hiddens = MODELS[stem]
    config = Seq2SeqConfig(src_vocab_size=len(src_vocab), tgt_vocab_size=len(tgt_vocab), embed_size=r["embed_size"],
                           num_hiddens=hiddens, num_layers=r["num_layers"], dropout=r["dropout"])
    set_seed(r["seed"])
    model = Seq2Seq(config)
    train_loader = make_translation_loader(splits.train, src_vocab, tgt_vocab, r["batch_size"], seed=r["seed"],
                                           bucket=True)
    valid_loader = make_translation_loader(splits.valid, src_vocab, tgt_vocab, r["batch_size"], seed=1, bucket=True)
    cpu_start = time.process_time()
    history = fit(model, train_loader, seq2seq_loss,
                  TrainConfig(epochs=r["epochs"], lr=r["lr"], clip_grad_norm=r["clip_grad_norm"], seed=r["seed"],
                              max_steps=max_steps, progress=False),
                  val_data=valid_loader)
    cpu = time.process_time() - cpu_start
    record = {"name": name, "file": f"{stem}.pt", "parameters": sum(p.numel() for p in model.parameters()),
              "config": dataclasses.asdict(config), "epochs": len(history.val_loss),
              "val_loss": [round(v, 6) for v in history.val_loss],
              "cpu_seconds_per_epoch": round(cpu / max(len(history.val_loss), 1), 2),
              "fingerprint": [round(v, 4) for v in history.step_loss[:FINGERPRINT_STEPS]],
              "vocab_hash": vocab_hash(src_vocab, tgt_vocab)}
    return model, config, record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="folder for the checkpoints and meta.json")
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--max-steps", type=int, help="stop each model after this many steps (a check, not a "
                        "checkpoint to ship)")
    args = parser.parse_args(argv)
    if args.max_steps is not None and args.max_steps < 1:
        parser.error(f"--max-steps must be at least 1, not {args.max_steps}")
    if args.out.resolve() == SHIPPED.resolve() and (args.max_steps is not None or set(args.models) != set(MODELS)):
        parser.error(f"{SHIPPED} holds the shipped checkpoints: write a partial or shortened run elsewhere (--out)")
    torch.set_num_threads(1)   # as the lesson: the same kernels, so the same weights
    meta: dict[str, Any] = {"recipe": RECIPE, "torch_version": str(torch.__version__),
                            "fingerprint_steps": FINGERPRINT_STEPS, "models": {}}
    for stem in args.models:
        model, config, record = train_one(stem, args.max_steps)
        meta["vocab_hash"] = record.pop("vocab_hash")
        path = save_checkpoint(args.out / record["file"], model, config=config,
                               extra={"val_loss": record["val_loss"]})
        record["bytes"] = path.stat().st_size
        meta["models"][stem] = record
        print(f"{record['name']:22s} {record['epochs']} epochs, {record['cpu_seconds_per_epoch']} CPU s per epoch, "
              f"validation loss {record['val_loss'][-1]:.3f}, {record['bytes'] / 1e6:.2f} MB", flush=True)
    (args.out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
