"""The Vision Transformer against a small CNN and an MLP on scikit-learn's 8 x 8 digits (lesson 10).

Usage (from the repository root)::

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/bench_vit.py [--seeds 0 1 2] [--steps 1000]

Every model is trained on the same fixed split (``course_lib.vit.load_digits_split``: 70 % of
each class for training, 30 % held out) with the same budget: the same number of AdamW steps
of 64 images, the same learning-rate schedule, for every model and every data fraction. The
fractions 10 %, 30 % and 100 % are stratified subsets of the training set (chosen with the
seed). The seed sets the initialisation, the batch order and the subset. CPU time is
``time.process_time`` of the training loop, on one thread unless ``--threads`` says otherwise. Prints one markdown
table per measure: test accuracy (mean over the seeds, and min-max), parameters, CPU time.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
from typing import Callable

import torch
from torch import nn

from course_lib.vit import (MLPClassifier, SmallCNN, ViTConfig, VisionTransformer, accuracy,
                            count_parameters, load_digits_split, subsample, train_classifier)

MODELS: dict[str, Callable[[], nn.Module]] = {
    "ViT, class token (P = 2)": lambda: VisionTransformer(ViTConfig()),
    "ViT, mean pooling (P = 2)": lambda: VisionTransformer(ViTConfig(pool="mean")),
    "ViT, no position embeddings (P = 2)": lambda: VisionTransformer(ViTConfig(position_embedding=False)),
    "ViT, class token (P = 4)": lambda: VisionTransformer(ViTConfig(patch_size=4)),
    "small CNN": lambda: SmallCNN(),
    "MLP": lambda: MLPClassifier(),
}
FRACTIONS = (0.1, 0.3, 1.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--fractions", type=float, nargs="+", default=list(FRACTIONS))
    parser.add_argument("--models", nargs="+", default=list(MODELS), help="names of MODELS")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (default 1, as in the lesson: these models are too small to gain from more)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    split = load_digits_split()
    print(f"# torch {torch.__version__}, {platform.processor() or platform.machine()}, "
          f"{torch.get_num_threads()} threads, OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"# {len(split.train_labels)} training and {len(split.test_labels)} test images; {args.steps} steps of 64, "
          f"seeds {args.seeds}", flush=True)
    acc: dict[tuple[str, float], list[float]] = {}
    cpu: dict[tuple[str, float], list[float]] = {}
    params: dict[str, int] = {}
    for fraction in args.fractions:
        for seed in args.seeds:
            images, labels = subsample(split.train_images, split.train_labels, fraction, seed=seed)
            for name in args.models:
                torch.manual_seed(seed)
                model = MODELS[name]()
                params[name] = count_parameters(model)
                history = train_classifier(model, images, labels, steps=args.steps, seed=seed)
                a = accuracy(model, split.test_images, split.test_labels)
                acc.setdefault((name, fraction), []).append(a)
                cpu.setdefault((name, fraction), []).append(history.train_cpu_seconds)
                print(f"#   {fraction:4.0%} of {len(split.train_labels)} ({len(labels)} images) seed {seed} "
                      f"{name:36s} test accuracy {a:.3f}  CPU {history.train_cpu_seconds:5.1f} s", flush=True)

    def cell(values: list[float]) -> str:
        return f"{statistics.mean(values):.3f} ({min(values):.3f}-{max(values):.3f})"

    sizes = {f: len(subsample(split.train_images, split.train_labels, f, seed=args.seeds[0])[1]) for f in args.fractions}
    header = " | ".join(f"{f:.0%} ({sizes[f]} images)" for f in args.fractions)
    print(f"\n| model | parameters | {header} | CPU s per run (100 %) |")
    print("| --- | --- |" + " --- |" * len(args.fractions) + " --- |")
    for name in args.models:
        accs = " | ".join(cell(acc[(name, f)]) for f in args.fractions)
        times = cpu[(name, args.fractions[-1])]
        print(f"| {name} | {params[name]:,} | {accs} | {statistics.mean(times):.1f} "
              f"({min(times):.1f}-{max(times):.1f}) |")
    base = "small CNN"
    if base in args.models and "ViT, class token (P = 2)" in args.models:
        print("\nCNN minus ViT (class token, P = 2), mean over seeds: " + ", ".join(
            f"{f:.0%}: {statistics.mean(acc[(base, f)]) - statistics.mean(acc[('ViT, class token (P = 2)', f)]):+.3f}"
            for f in args.fractions))


if __name__ == "__main__":
    main()
