"""Forward + backward time of three multi-head attention implementations on the same inputs.

Compares ``course_lib.multihead.MultiHeadAttention``, ``torch.nn.MultiheadAttention`` and
d2l's ``MultiHeadAttention`` (plus a bare "4 Linear + F.scaled_dot_product_attention"
floor), all with the same copied weights, in one process. The variants run round-robin
(one iteration of each in turn, repeated), so slow drifts of a shared machine hit them
alike; the median of the repeats is reported, for wall-clock time and for the process's CPU
time (steadier when other jobs share the cores). Speed is relative to d2l:
d2l_time / time, so 1.25x means 25 % faster than d2l.

need_weights: ``nn.MultiheadAttention`` and ``MultiHeadAttention`` return the attention
weights by default (need_weights=True), which rules out the fused kernel; d2l always
computes and stores them. Both settings are timed.

Run (2 threads by default on the course machine):

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/bench_multihead.py
    .venv/bin/python benchmarks/bench_multihead.py --lengths 64 --repeats 5   # quick look

Shape letters: B batch, T sequence length, E model size, H heads.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch starts its thread pool

import platform  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import Tensor, nn  # noqa: E402

from course_lib.d2l_compat import import_d2l  # noqa: E402
from course_lib.masking import valid_lens_to_real_keys  # noqa: E402
from course_lib.multihead import MultiHeadAttention  # noqa: E402


@dataclass
class BenchConfig:
    batch: int = 32
    lengths: tuple[int, ...] = (64, 256)
    embed_dim: int = 256
    num_heads: int = 8
    bias: bool = False  # d2l's default; all three get the same setting
    repeats: int = 15
    warmup: int = 3
    threads: int | None = None
    seed: int = 0


class LinearSDPA(nn.Module):
    """The floor: four projections and PyTorch's fused attention, no checks, no weights."""

    def __init__(self, ours: MultiHeadAttention) -> None:
        super().__init__()
        self.q, self.k, self.v, self.o = ours.q_proj, ours.k_proj, ours.v_proj, ours.out_proj
        self.h = ours.num_heads

    def forward(self, x: Tensor, keep: Tensor | None) -> Tensor:
        b, t, e = x.shape
        q, k, v = (p(x).view(b, t, self.h, e // self.h).transpose(1, 2) for p in (self.q, self.k, self.v))  # (B, H, T, D)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
        return self.o(out.transpose(1, 2).reshape(b, t, e))  # (B, T, E)


def build_models(cfg: BenchConfig) -> tuple[MultiHeadAttention, nn.MultiheadAttention, nn.Module]:
    """Three modules computing the same function (weights copied from PyTorch's)."""
    d2l = import_d2l()
    torch.manual_seed(cfg.seed)
    ref = nn.MultiheadAttention(cfg.embed_dim, cfg.num_heads, bias=cfg.bias, batch_first=True)
    ours = MultiHeadAttention.from_torch(ref)
    theirs = d2l.MultiHeadAttention(cfg.embed_dim, cfg.num_heads, dropout=0.0, bias=cfg.bias)
    x = torch.zeros(1, 2, cfg.embed_dim)
    theirs(x, x, x, None)  # materialize its LazyLinear layers
    with torch.no_grad():
        for name, mine in (("W_q", ours.q_proj), ("W_k", ours.k_proj), ("W_v", ours.v_proj), ("W_o", ours.out_proj)):
            getattr(theirs, name).weight.copy_(mine.weight)
            if cfg.bias:
                getattr(theirs, name).bias.copy_(mine.bias)
    return ours, ref, theirs


def variants(ours: MultiHeadAttention, ref: nn.MultiheadAttention, theirs: nn.Module,
             x: Tensor, valid_lens: Tensor | None) -> dict[str, Callable[[], Tensor]]:
    """name -> a function running one forward pass (self-attention on x) and returning the output."""
    real = None if valid_lens is None else valid_lens_to_real_keys(valid_lens, x.shape[1])  # (B, T)
    kpm = None if real is None else ~real  # nn.MultiheadAttention's key_padding_mask: True = padding
    keep = None if kpm is None else ~kpm[:, None, None, :]  # (B, 1, 1, T) SDPA convention
    floor = LinearSDPA(ours)
    return {
        "d2l MultiHeadAttention": lambda: theirs(x, x, x, valid_lens),
        "nn.MultiheadAttention (need_weights=True)": lambda: ref(x, x, x, key_padding_mask=kpm)[0],
        "nn.MultiheadAttention (need_weights=False)": lambda: ref(x, x, x, key_padding_mask=kpm,
                                                                  need_weights=False)[0],
        "course_lib MultiHeadAttention (need_weights=True)": lambda: ours(x, x, x, real_keys=real)[0],
        "course_lib MultiHeadAttention (need_weights=False)": lambda: ours(x, x, x, real_keys=real,
                                                                          need_weights=False)[0],
        "floor: 4 Linear + F.sdpa": lambda: floor(x, keep),
    }


def check_same_outputs(runs: dict[str, Callable[[], Tensor]], valid_lens: Tensor | None) -> float:
    """Largest difference between any variant and d2l (padded query rows excluded: none here)."""
    with torch.no_grad():
        outs = {name: run() for name, run in runs.items()}
    base = outs["d2l MultiHeadAttention"]
    return max(float((o - base).abs().max()) for o in outs.values())


def time_round_robin(runs: dict[str, Callable[[], Tensor]], modules: list[nn.Module], x: Tensor, grad: Tensor,
                     cfg: BenchConfig) -> dict[str, tuple[float, float]]:
    """Median (wall seconds, process CPU seconds) of forward + backward per variant.

    One iteration of each variant in turn. CPU time (all threads of this process) is
    less sensitive than wall time to other jobs competing for the cores.
    """
    wall: dict[str, list[float]] = {name: [] for name in runs}
    cpu: dict[str, list[float]] = {name: [] for name in runs}
    for rep in range(cfg.warmup + cfg.repeats):
        for name, run in runs.items():
            for m in modules:
                m.zero_grad(set_to_none=True)
            x.grad = None
            start, start_cpu = time.perf_counter(), time.process_time()
            run().backward(grad)
            if rep >= cfg.warmup:
                wall[name].append(time.perf_counter() - start)
                cpu[name].append(time.process_time() - start_cpu)
    return {name: (statistics.median(wall[name]), statistics.median(cpu[name])) for name in runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=BenchConfig.batch)
    parser.add_argument("--lengths", type=int, nargs="+", default=list(BenchConfig.lengths))
    parser.add_argument("--embed-dim", type=int, default=BenchConfig.embed_dim)
    parser.add_argument("--heads", type=int, default=BenchConfig.num_heads)
    parser.add_argument("--repeats", type=int, default=BenchConfig.repeats)
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    args = parser.parse_args()
    cfg = BenchConfig(batch=args.batch, lengths=tuple(args.lengths), embed_dim=args.embed_dim,
                      num_heads=args.heads, repeats=args.repeats, threads=args.threads)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)

    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, OMP_WAIT_POLICY="
          f"{os.environ.get('OMP_WAIT_POLICY')}, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs")
    print(f"B={cfg.batch} E={cfg.embed_dim} H={cfg.num_heads} bias={cfg.bias} float32, forward+backward, "
          f"self-attention, median of {cfg.repeats} round-robin repeats ({cfg.warmup} warm-up)")
    ours, ref, theirs = build_models(cfg)
    modules = [ours, ref, theirs]
    for m in modules:
        m.train()  # dropout is 0; training mode as in real use (and no inference fast paths)
    gen = torch.Generator().manual_seed(cfg.seed)
    print("\n| T | masks | implementation | wall ms | speed vs d2l (wall) | CPU ms | speed vs d2l (CPU) |")
    print("|---|---|---|---:|---:|---:|---:|")
    for steps in cfg.lengths:
        x = torch.randn(cfg.batch, steps, cfg.embed_dim, generator=gen).requires_grad_()
        grad = torch.randn(cfg.batch, steps, cfg.embed_dim, generator=gen)
        for masked in (False, True):
            valid_lens = torch.randint(steps // 2, steps + 1, (cfg.batch,), generator=gen) if masked else None
            runs = variants(ours, ref, theirs, x, valid_lens)
            diff = check_same_outputs(runs, valid_lens)
            if diff > 1e-4:
                raise RuntimeError(f"the implementations disagree (max |diff| {diff:.2e}); benchmark is void")
            medians = time_round_robin(runs, modules, x, grad, cfg)
            base_wall, base_cpu = medians["d2l MultiHeadAttention"]
            label = "valid_lens / key_padding_mask" if masked else "none"
            for name, (seconds, cpu_seconds) in medians.items():
                print(f"| {steps} | {label} | {name} | {seconds * 1e3:.1f} | {base_wall / seconds:.2f}x "
                      f"| {cpu_seconds * 1e3:.1f} | {base_cpu / cpu_seconds:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
