"""Train lesson 12's three translators for a few CPU minutes each and save small checkpoints.

Lesson 12 trains its three models (GRU encoder-decoder, GRU with Bahdanau attention, Transformer)
for 400 steps each, seconds of CPU: too little to rank them. This script trains the same three
models, on the same data pipeline (lesson 12's split, 1,000 BPE merges per language, vocabularies,
batches of 64 grouped by length, the training seed) and with the same optimizer settings, for
longer; the lesson loads what it saves, so that it can show the ranking within its time budget.

Two ways to say how long:

* ``--cpu-seconds S``: every model trains until it has used ``S`` seconds of process CPU time
  (``time.process_time``, one torch thread, checked every 50 steps), so the three get the same
  CPU budget; the steps reached are recorded in ``meta.json``.
* ``--steps-from DIR`` (the default: the shipped checkpoints' folder): every model trains for the
  number of steps recorded there, which reproduces those checkpoints (same torch version and
  thread count: the same weights up to floating-point rounding of the kernels).

Weights are saved in float16 (half the size of float32; the lesson loads them as float32).
``meta.json`` records, per model, the steps, the CPU seconds, the parameter count, the configuration,
the vocabulary sizes and a fingerprint: the training loss of the first ``FINGERPRINT_STEPS``
steps, which a short run (``--max-steps``) can recompute to check that it runs the same pipeline
as the shipped checkpoints (``tests/test_lesson12_checkpoints.py``).

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python scripts/train_lesson12_checkpoints.py --cpu-seconds 180 \\
        --out course_lib/data_files/lesson12_checkpoints          # what shipped (about 10 CPU minutes)
    .venv/bin/python scripts/train_lesson12_checkpoints.py --out /tmp/ck   # reproduce the shipped steps
    .venv/bin/python scripts/train_lesson12_checkpoints.py --models transformer --max-steps 20 --out /tmp/ck
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from course_lib.checkpoints import vocab_hash
from course_lib.bpe import BPE
from course_lib.data import build_vocabs, make_translation_loader
from course_lib.fra_eng import load_sample, near_duplicate_key, split_pairs
from course_lib.seq2seq import AttentionSeq2Seq, Seq2Seq, Seq2SeqConfig
from course_lib.training import TrainConfig, fit, seq2seq_loss, set_seed
from course_lib.transformer import Transformer, TransformerConfig

ROOT = Path(__file__).resolve().parent.parent

SHIPPED = ROOT / "course_lib" / "data_files" / "lesson12_checkpoints"
MODELS = {"gru": "GRU seq2seq", "bahdanau": "GRU + Bahdanau", "transformer": "Transformer"}
MERGES, BATCH, CHECK_EVERY, FINGERPRINT_STEPS = 1000, 64, 50, 20


class _OutOfBudget(Exception):
    """Raised from fit's checkpoint hook to stop training at the CPU budget."""


def prepare(seed: int = 0) -> dict[str, Any]:
    """Lesson 12's data: split, BPE (1,000 merges per language), token pairs, vocabularies, configs."""
    real = load_sample()
    splits = split_pairs(real, n_valid=0, n_test=1000, seed=0, key=near_duplicate_key)
    train_pairs = splits.train
    fr_bpe = BPE.train([fr for _, fr in train_pairs], num_merges=MERGES)
    en_bpe = BPE.train([en for en, _ in train_pairs], num_merges=MERGES)
    token_pairs = [(en_bpe(en), fr_bpe(fr)) for en, fr in train_pairs]
    src_vocab, tgt_vocab = build_vocabs(token_pairs, min_freq=1)
    gru_config = Seq2SeqConfig(src_vocab_size=len(src_vocab), tgt_vocab_size=len(tgt_vocab),
                               embed_size=64, num_hiddens=128, num_layers=1, dropout=0.1)
    transformer_config = TransformerConfig(src_vocab_size=len(src_vocab), tgt_vocab_size=len(tgt_vocab),
                                           d_model=64, num_heads=4, d_ff=256, num_layers=2, dropout=0.1,
                                           max_len=64)
    recipes = {   # name: (model class, config, learning rate, warm-up steps): lesson 12's
        "GRU seq2seq": (Seq2Seq, gru_config, 5e-3, 0),
        "GRU + Bahdanau": (AttentionSeq2Seq, gru_config, 5e-3, 0),
        "Transformer": (Transformer, transformer_config, 2e-3, 100),
    }
    return {"token_pairs": token_pairs, "src_vocab": src_vocab, "tgt_vocab": tgt_vocab, "recipes": recipes,
            "seed": seed, "vocab_hash": vocab_hash(src_vocab, tgt_vocab)}


def train_one(data: dict[str, Any], name: str, *, steps: int | None = None,
              cpu_seconds: float | None = None) -> tuple[torch.nn.Module, dict[str, Any]]:
    """Train one model for ``steps`` optimizer steps or until ``cpu_seconds`` of CPU time."""
    if (steps is None) == (cpu_seconds is None):
        raise ValueError("give exactly one of steps and cpu_seconds")
    cls, cfg, lr, warmup = data["recipes"][name]
    set_seed(data["seed"])
    model = cls(cfg)
    loader = make_translation_loader(data["token_pairs"], data["src_vocab"], data["tgt_vocab"], BATCH,
                                     seed=data["seed"], bucket=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    scheduler = (torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / warmup))
                 if warmup else None)
    start = time.process_time()
    reached = {"step": 0}

    def on_checkpoint(m: torch.nn.Module, step: int) -> float:
        reached["step"] = step
        if cpu_seconds is not None and time.process_time() - start >= cpu_seconds:
            raise _OutOfBudget
        return 0.0

    losses: list[float] = []
    config = TrainConfig(epochs=1000, max_steps=steps, clip_grad_norm=1.0, seed=data["seed"], progress=None,
                         checkpoint_every=CHECK_EVERY if cpu_seconds is not None else 0)
    try:
        history = fit(model, loader, seq2seq_loss, config, optimizer=optimizer, scheduler=scheduler,
                      on_checkpoint=on_checkpoint if cpu_seconds is not None else None)
        losses, done = history.step_loss, history.steps
    except _OutOfBudget:
        done = reached["step"]
        losses = []   # fit's history is lost with the exception; the fingerprint is recomputed below
    cpu = time.process_time() - start
    return model.eval(), {"steps": done, "cpu_seconds": round(cpu, 1), "step_loss": losses}


def fingerprint(data: dict[str, Any], name: str) -> list[float]:
    """The training losses of the first FINGERPRINT_STEPS steps (rounded): a short run's signature."""
    _, info = train_one(data, name, steps=FINGERPRINT_STEPS)
    return [round(x, 4) for x in info["step_loss"]]


def save(out: Path, data: dict[str, Any], key: str, model: torch.nn.Module, info: dict[str, Any]) -> dict[str, Any]:
    name = MODELS[key]
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{key}.pt"
    torch.save({k: v.half() if v.is_floating_point() else v for k, v in model.state_dict().items()}, path)
    cls, cfg, lr, warmup = data["recipes"][name]
    return {"name": name, "file": path.name, "class": cls.__name__, "config": asdict(cfg), "lr": lr,
            "warmup": warmup, "steps": info["steps"], "cpu_seconds": info["cpu_seconds"],
            "params": sum(p.numel() for p in model.parameters()), "bytes": path.stat().st_size,
            "fingerprint": fingerprint(data, name)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for <model>.pt and meta.json")
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, from {list(MODELS)}")
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--cpu-seconds", type=float, help="train each model for this much CPU time")
    how.add_argument("--steps-from", type=Path, default=SHIPPED, help="train for the steps recorded in DIR/meta.json")
    how.add_argument("--max-steps", type=int, help="train each model for this many steps (a short check)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the shipped run: 1)")
    parser.add_argument("--seed", type=int, default=0, help="training seed (initialisation and batch order)")
    args = parser.parse_args(argv)
    keys = [k.strip() for k in args.models.split(",") if k.strip()]
    unknown = [k for k in keys if k not in MODELS]
    if unknown or not keys:
        parser.error(f"unknown model(s) {unknown}: choose from {', '.join(MODELS)}")
    if args.cpu_seconds is not None and args.cpu_seconds <= 0:
        parser.error("--cpu-seconds must be > 0")
    if args.max_steps is not None and args.max_steps < 1:
        parser.error("--max-steps must be >= 1")
    recorded: dict[str, Any] = {}
    if args.cpu_seconds is None and args.max_steps is None:
        meta_path = args.steps_from / "meta.json"
        if not meta_path.exists():
            parser.error(f"{meta_path} not found: give --cpu-seconds or --max-steps, or a folder with meta.json")
        recorded = json.loads(meta_path.read_text())["models"]
    torch.set_num_threads(args.threads)
    data = prepare(args.seed)
    entries: dict[str, Any] = {}
    for key in keys:
        if args.cpu_seconds is not None:
            model, info = train_one(data, MODELS[key], cpu_seconds=args.cpu_seconds)
        else:
            steps = args.max_steps if args.max_steps is not None else recorded[key]["steps"]
            model, info = train_one(data, MODELS[key], steps=steps)
        entries[key] = save(args.out, data, key, model, info)
        print(f"{MODELS[key]}: {info['steps']} steps, {info['cpu_seconds']} s CPU -> {args.out / (key + '.pt')}",
              flush=True)
    # Several processes may train one model each into the same folder: update meta.json under a lock.
    import fcntl

    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / ".meta.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        meta_path = args.out / "meta.json"
        meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
        if meta and meta.get("vocab_hash") != data["vocab_hash"]:
            meta = {}   # another pipeline's checkpoints: start afresh
        meta.update({"seed": args.seed, "threads": args.threads, "torch": torch.__version__,
                     "vocab_hash": data["vocab_hash"], "src_vocab_size": len(data["src_vocab"]),
                     "tgt_vocab_size": len(data["tgt_vocab"]), "fingerprint_steps": FINGERPRINT_STEPS,
                     "cpu_budget": args.cpu_seconds if args.cpu_seconds is not None else meta.get("cpu_budget")})
        meta.setdefault("models", {}).update(entries)
        meta_path.write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    (args.out / ".meta.lock").unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
