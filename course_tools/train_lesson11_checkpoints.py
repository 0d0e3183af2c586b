"""Run lesson 11's own train() for its three models at seed 0 and save what the lesson loads.

Lesson 11 trains three translators (plain GRU, GRU with Bahdanau attention, Transformer) for
1500 / 1000 / 600 steps with a validation-BLEU checkpoint every 100 steps: about three CPU minutes,
more than the lesson's time budget, and training is not what the lesson teaches (it compares the
models at several budgets, then studies decoding). So this script executes the lesson's own code
cells up to the one that defines ``train()`` (imports, split, vocabularies, recipes, training and
checkpoint functions), calls ``train(name)`` for the three models in one process, on one torch
thread, with ``COURSE_SEED=0``, and saves:

* per model, in ``meta.json``: the training loss of every step, and the step, epoch, wall and CPU
  time of training and validation BLEU of every checkpoint (``fit``'s ``History``), which the
  lesson's figure, rankings and matched CPU budget are computed from;
* the weights of the checkpoints the lesson's section 3 chooses: each model's best within its step
  budget, and its best within the smallest of the three CPU totals (the matched budget), in
  float16 (half the bytes; the lesson reads them into float32 models), with their validation BLEU
  recomputed from the float16 weights (``half_valid_bleu``, next to the float32 figure);
* what makes them valid: a hash of both vocabularies, the recipes, the loop's constants, the
  torch version, and ``code_sha256``, a hash of the executed cells' sources.
  ``tests/test_lesson11_checkpoints.py`` fails when those cells change without a new run of this
  script, and the lesson asserts the recipes and vocabularies before it loads anything.

The lesson loads these for seed 0 and trains live (the same ``train()``) for any other
``COURSE_SEED`` or with ``COURSE_RETRAIN_LESSON11=1``; the three models always come from one run,
so the CPU budget that matches them is measured on one machine at one time.

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python scripts/train_lesson11_checkpoints.py \\
        --out course_lib/data_files/lesson11_checkpoints          # what shipped (about 3 CPU minutes)
    .venv/bin/python scripts/train_lesson11_checkpoints.py --max-steps 100 --out /tmp/ck   # a quick check
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import nbformat

from course_lib.checkpoints import save_checkpoint, vocab_hash

ROOT = Path(__file__).resolve().parent.parent  # the checkout (the shipped files are written into it)

SHIPPED = ROOT / "course_lib" / "data_files" / "lesson11_checkpoints"
LESSON = ROOT / "notebooks" / "11_translation_head_to_head.ipynb"
STEMS = {"GRU seq2seq": "gru", "GRU + Bahdanau": "bahdanau", "Transformer": "transformer"}


def training_cells(lesson: Path = LESSON) -> list[str]:
    """The sources of the lesson's code cells up to and including the one that defines train()."""
    code = [c.source for c in nbformat.read(lesson, as_version=4).cells if c.cell_type == "code"]
    end = next((i for i, src in enumerate(code) if "\ndef train(" in "\n" + src), None)
    if end is None:
        raise ValueError(f"{lesson} has no code cell that defines train(): update {__name__} with the lesson")
    return code[:end + 1]


def code_sha256(cells: list[str]) -> str:
    """The hash that ties shipped checkpoints to the cells that trained them."""
    return hashlib.sha256("\n\n# ---- next cell ----\n\n".join(cells).encode()).hexdigest()[:16]


def run_lesson_cells(cells: list[str]) -> dict[str, Any]:
    """Execute the cells in a fresh namespace at COURSE_SEED=0 (the lesson's setup_lesson reads it)."""
    os.environ["COURSE_SEED"] = "0"
    os.environ.setdefault("MPLBACKEND", "Agg")
    ns: dict[str, Any] = {"__name__": "lesson11"}
    for k, src in enumerate(cells):
        exec(compile(src, f"<lesson 11 code cell {k}>", "exec"), ns)   # the repository's own notebook
    return ns


def shipped_steps(histories: dict[str, Any], chosen: dict[str, int]) -> dict[str, list[int]]:
    """Per model, the checkpoints the lesson's section 3 picks: best in its step budget, best in the matched CPU."""
    cpu_all = min(h.train_cpu_seconds for h in histories.values())
    out = {}
    for name, h in histories.items():
        matched = max((c for c in h.checkpoints if c.train_cpu_seconds <= cpu_all), key=lambda c: (c.value, -c.step),
                      default=None)   # none when a shortened run's first checkpoint is past the budget
        out[name] = sorted({chosen[name]} | ({matched.step} if matched else set()))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="folder for the checkpoints and meta.json")
    parser.add_argument("--max-steps", type=int, help="stop each model after this many steps, a multiple of the "
                        "checkpoint spacing (a check, not checkpoints to ship)")
    args = parser.parse_args(argv)
    if args.max_steps is not None and (args.max_steps < 100 or args.max_steps % 100):
        parser.error(f"--max-steps must be a positive multiple of 100 (one checkpoint every 100 steps), "
                     f"not {args.max_steps}")
    if args.out.resolve() == SHIPPED.resolve() and args.max_steps is not None:
        parser.error(f"{SHIPPED} holds the shipped checkpoints: write a shortened run elsewhere (--out)")
    cells = training_cells()
    ns = run_lesson_cells(cells)
    recipes = ns["RECIPES"]
    if args.max_steps is not None:
        recipes.update({name: (*r[:-1], min(r[-1], args.max_steps)) for name, r in recipes.items()})
    meta: dict[str, Any] = {
        "code_sha256": code_sha256(cells), "torch_version": str(ns["torch"].__version__),
        "vocab_hash": vocab_hash(ns["src_vocab"], ns["tgt_vocab"]),
        "recipes": {name: [cls.__name__, dataclasses.asdict(cfg), lr, warmup, steps]
                    for name, (cls, cfg, lr, warmup, steps) in recipes.items()},
        "loop": {"batch": ns["BATCH"], "every": ns["EVERY"], "max_out": ns["MAX_OUT"],
                 "n_valid": len(ns["valid_sources"])},
        "models": {}}
    for name in recipes:
        ns["train"](name)
        ns["report"](name)
    histories, weights = ns["histories"], ns["weights"]
    args.out.mkdir(parents=True, exist_ok=True)
    for name, steps in shipped_steps(histories, ns["chosen"]).items():
        h, (cls, cfg, *_) = histories[name], recipes[name]
        entry: dict[str, Any] = {
            "steps": h.steps, "train_cpu_seconds": round(h.train_cpu_seconds, 3),
            "step_loss": [round(v, 5) for v in h.step_loss],
            "checkpoints": [[c.step, c.epoch, round(c.train_seconds, 3), round(c.train_cpu_seconds, 3), c.value]
                            for c in h.checkpoints],
            "files": {}, "bytes": {}, "half_valid_bleu": {}}
        for step in steps:
            model = cls(cfg)
            model.load_state_dict(weights[name][step])
            half = copy.deepcopy(model).half()
            model.load_state_dict(half.state_dict())          # float32 again, rounded as the lesson will read it
            file = f"{STEMS[name]}_{step}.pt"
            path = save_checkpoint(args.out / file, half, config=cfg, extra={"name": name, "step": step})
            entry["files"][str(step)] = file
            entry["bytes"][str(step)] = path.stat().st_size
            entry["half_valid_bleu"][str(step)] = ns["valid_bleu"](model.eval())
        meta["models"][name] = entry
        print(f"{name}: saved steps {steps}, {sum(entry['bytes'].values()) / 1e6:.2f} MB; validation BLEU float32 / "
              f"float16: " + ", ".join(f"{next(c.value for c in h.checkpoints if c.step == s):.2f} / "
                                       f"{entry['half_valid_bleu'][str(s)]:.2f}" for s in steps), flush=True)
    (args.out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
