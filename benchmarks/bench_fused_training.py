"""Training speed of the Transformer with and without recording the attention weights.

Every attention module of course_lib records its weights (``attention_weights``) in
evaluation mode only, by default: a training step then takes PyTorch's fused
``F.scaled_dot_product_attention``, which never forms the (B, H, L, S) weights. Before
that contract, the Transformer's blocks always asked for the weights, so training ran the
hand-written softmax path. This script measures what the fused path buys in training.

Same process, same model (lesson 7b's translation Transformer: E = 64, H = 4, F = 256,
2 + 2 layers), same batches; two variants, for each dropout rate:

* ``recorded``: ``model.set_record_attention(True)`` (the old behaviour in training);
* ``fused``: ``model.set_record_attention(None)`` (the default).

The variants alternate (a block of steps of one, then of the other, repeated), so slow
drifts of a shared machine hit both alike; the median over the repeats is reported, in
wall-clock and in the process's CPU time, with the ratio recorded / fused (above 1: the
fused default trains faster).

On CPU, PyTorch has no fused kernel with dropout on the attention weights (it falls back
to an unfused one, slower than course_lib's own), so :func:`course_lib.scoring.attend`
keeps its own path when the attention dropout is above 0 on CPU: with ``--dropout 0.1``
(lesson 7b's setting) both variants then run the same code and the ratio is about 1.

Measured on the course's 2-core machine, shared with other jobs (torch 2.13, CPU time per
step, median; wall clock agreed within a few %):

* lesson 7b's size (B=64, S=L=24), attention dropout 0: 1.05x (2 threads);
* the same with dropout 0.1, as lesson 7b trains: 1.01x (both variants run the same code);
* longer sequences (B=32, S=L=128), dropout 0: 1.17x (2 threads), 1.19x (1 thread).

At lesson 7b's lengths attention is a small part of a step (the FFN, the embeddings and the
output layer dominate), so the fused kernel gains little there; it gains more as S and L grow.

Run:

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/bench_fused_training.py
    .venv/bin/python benchmarks/bench_fused_training.py --threads 1 --repeats 5

Shape letters: B batch, S source length, L target length.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch starts its thread pool

import platform  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402

from course_lib.training import masked_cross_entropy  # noqa: E402
from course_lib.transformer import Transformer, TransformerConfig  # noqa: E402


def make_batches(n: int, batch: int, src_len: int, tgt_len: int, vocab: int,
                 seed: int) -> list[tuple[torch.Tensor, ...]]:
    """Random token batches with padded sources and targets (lengths drawn per row)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        src = torch.randint(4, vocab, (batch, src_len), generator=g)  # (B, S)
        src_valid = torch.randint(src_len // 2, src_len + 1, (batch,), generator=g)  # (B,)
        tgt = torch.randint(4, vocab, (batch, tgt_len + 1), generator=g)  # (B, L+1)
        tgt_valid = torch.randint(tgt_len // 2, tgt_len + 1, (batch,), generator=g)  # (B,)
        out.append((src, src_valid, tgt[:, :-1], tgt[:, 1:], tgt_valid))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    parser.add_argument("--repeats", type=int, default=7, help="blocks of steps per variant")
    parser.add_argument("--steps", type=int, default=10, help="training steps per block")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--src-len", type=int, default=24)
    parser.add_argument("--tgt-len", type=int, default=24)
    parser.add_argument("--dropout", type=float, nargs="+", default=[0.0, 0.1])
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, OMP_WAIT_POLICY="
          f"{os.environ.get('OMP_WAIT_POLICY')}, {platform.machine()}, {os.cpu_count()} CPUs")
    for dropout in args.dropout:
        run(args, dropout)


def run(args: argparse.Namespace, dropout: float) -> None:
    """Time both variants of one model configuration and print the ratio."""
    vocab = 400  # about lesson 7b's vocabularies (255 source, 393 target words)
    config = TransformerConfig(vocab, vocab, d_model=64, num_heads=4, d_ff=256, num_layers=2,
                               dropout=dropout, max_len=max(args.src_len, args.tgt_len) + 2)
    batches = make_batches(args.steps, args.batch, args.src_len, args.tgt_len, vocab, seed=0)
    print(f"\nmodel: {config}\nbatch B={args.batch}, S={args.src_len}, L={args.tgt_len}; "
          f"{args.steps} Adam steps per block, {args.repeats} blocks per variant")

    models, optimizers = {}, {}
    for name, flag in (("recorded", True), ("fused", None)):
        torch.manual_seed(0)
        model = Transformer(config).train()
        model.set_record_attention(flag)
        models[name] = model
        optimizers[name] = torch.optim.Adam(model.parameters(), lr=1e-3)

    def block(name: str) -> tuple[float, float]:
        model, opt = models[name], optimizers[name]
        wall, cpu = time.perf_counter(), time.process_time()
        for src, src_valid, tgt_in, tgt_out, tgt_valid in batches:
            loss = masked_cross_entropy(model(src, src_valid, tgt_in), tgt_out, tgt_valid)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        return time.perf_counter() - wall, time.process_time() - cpu

    for name in models:  # warm-up
        block(name)

    times: dict[str, list[tuple[float, float]]] = {name: [] for name in models}
    for _ in range(args.repeats):
        for name in models:
            times[name].append(block(name))
    medians = {name: (statistics.median(w for w, _ in ts), statistics.median(c for _, c in ts))
               for name, ts in times.items()}
    per_step = {name: (w / args.steps * 1e3, c / args.steps * 1e3) for name, (w, c) in medians.items()}
    for name, (w, c) in per_step.items():
        print(f"{name:9s}: {w:7.1f} ms wall, {c:7.1f} ms CPU per training step (median of {args.repeats})")
    print(f"speed-up of the fused default (recorded / fused): wall {per_step['recorded'][0] / per_step['fused'][0]:.2f}x, "
          f"CPU {per_step['recorded'][1] / per_step['fused'][1]:.2f}x, threads {torch.get_num_threads()}")


if __name__ == "__main__":
    main()
