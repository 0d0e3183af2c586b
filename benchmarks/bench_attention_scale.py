"""Time and peak memory of attention against sequence length: plain, tiled, PyTorch's fused kernel.

Usage (from the repository root)::

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/bench_attention_scale.py [--max-len 8192] [--write]

Lesson 9 measures the same three up to T = 4096 inside the notebook; this script goes to
T = 8192 and reports medians. One head (B = H = 1), D = 64, float32, no gradients:

* plain: ``softmax(Q K^T / sqrt(D)) V`` with the (T, T) scores materialised;
* tiled: :func:`course_lib.flash.tiled_attention`, tiles of 128 x 128, pure PyTorch;
* fused: ``F.scaled_dot_product_attention`` (PyTorch's compiled CPU kernel).

For each T the three alternate within each repeat (so that a change in machine load hits
all alike); the median wall-clock and CPU time of this process are kept (on a shared
machine the CPU time is the steadier figure). Peak memory is the largest total of CPU
allocations made inside the call, from the profiler's allocator events. The tiled and
fused results are checked against plain attention. With ``--write`` the table replaces
the "Attention at scale" section of docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

from course_lib.flash import tiled_attention

SECTION = "## Attention at scale"
DOC = Path(__file__).resolve().parents[1] / "docs" / "BENCHMARKS.md"
MiB = 2**20


def plain_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v


def peak_bytes(fn: Callable[[], object]) -> int:
    """Largest total of CPU memory allocated inside ``fn()`` at any moment."""
    saved = os.dup(2)  # the profiler logs its start and stop on stderr
    with open(os.devnull, "w") as devnull:
        os.dup2(devnull.fileno(), 2)
        try:
            with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
                fn()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
    events = sorted((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events()
                    if e.name() == "[memory]")
    live = peak = 0
    for _, nbytes in events:
        live += nbytes
        peak = max(peak, live)
    return peak


def measure(lengths: list[int], repeats: int) -> list[dict[str, float]]:
    rows = []
    for steps in lengths:
        torch.manual_seed(0)
        q, k, v = (torch.randn(1, 1, steps, 64) for _ in range(3))
        methods: dict[str, Callable[[], torch.Tensor]] = {
            "plain": lambda: plain_attention(q, k, v),
            "tiled": lambda: tiled_attention(q, k, v, block_size=128),
            "fused": lambda: F.scaled_dot_product_attention(q, k, v),
        }
        with torch.no_grad():
            reference = methods["plain"]()
            for name in ("tiled", "fused"):
                torch.testing.assert_close(methods[name](), reference, rtol=1e-4, atol=1e-5)
            wall: dict[str, list[float]] = {m: [] for m in methods}
            cpu: dict[str, list[float]] = {m: [] for m in methods}
            for _ in range(repeats):
                for name, fn in methods.items():
                    w, c = time.perf_counter(), time.process_time()
                    fn()
                    wall[name].append(time.perf_counter() - w)
                    cpu[name].append(time.process_time() - c)
            row: dict[str, float] = {"T": steps}
            for name, fn in methods.items():
                row[f"{name}_ms"] = 1e3 * statistics.median(wall[name])
                row[f"{name}_cpu_ms"] = 1e3 * statistics.median(cpu[name])
                row[f"{name}_mib"] = peak_bytes(fn) / MiB
        rows.append(row)
        print(f"T = {steps:5d}: " + ", ".join(
            f"{m} {row[f'{m}_ms']:8.1f} ms ({row[f'{m}_cpu_ms']:8.1f} CPU) {row[f'{m}_mib']:7.1f} MiB"
            for m in methods), flush=True)
    return rows


def table(rows: list[dict[str, float]], repeats: int, load: tuple[float, float]) -> str:
    lines = [
        SECTION,
        "",
        "`benchmarks/bench_attention_scale.py` (lesson 9): one head (B = H = 1), D = 64, float32, no",
        "gradients; plain attention with the T x T scores materialised, `course_lib.flash.tiled_attention`",
        "(128 x 128 tiles, pure PyTorch) and `F.scaled_dot_product_attention`; median of "
        f"{repeats} alternating repeats;",
        "peak = largest total of CPU allocations inside the call (profiler allocator events).",
        f"Measured with torch {torch.__version__} on {platform.machine()}, {os.cpu_count()} cores "
        f"({torch.get_num_threads()} threads); load average {load[0]:.1f} at the start, {load[1]:.1f} at the end",
        "(when it exceeds the number of cores, wall-clock times wait for a core: compare CPU times).",
        "",
        "| T | plain ms (CPU ms) | tiled ms (CPU ms) | fused ms (CPU ms) | plain peak MiB | tiled peak MiB | fused peak MiB |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {int(r['T'])} | {r['plain_ms']:.1f} ({r['plain_cpu_ms']:.1f}) | {r['tiled_ms']:.1f} "
            f"({r['tiled_cpu_ms']:.1f}) | {r['fused_ms']:.1f} ({r['fused_cpu_ms']:.1f}) | {r['plain_mib']:.1f} | "
            f"{r['tiled_mib']:.2f} | {r['fused_mib']:.2f} |")
    lines.append("")
    return "\n".join(lines)


def write_section(text: str) -> None:
    doc = DOC.read_text(encoding="utf-8")
    if SECTION in doc:
        start = doc.index(SECTION)
        nxt = doc.find("\n## ", start + len(SECTION))
        doc = doc[:start] + text + ("\n" + doc[nxt + 1:] if nxt != -1 else "")
    else:
        doc = doc.rstrip("\n") + "\n\n" + text
    DOC.write_text(doc, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-len", type=int, default=8192, help="longest T (powers of two from 256)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--write", action="store_true", help="update docs/BENCHMARKS.md")
    args = parser.parse_args()
    lengths = [2**p for p in range(8, int(math.log2(args.max_len)) + 1)]
    load_start = os.getloadavg()[0]
    rows = measure(lengths, args.repeats)
    text = table(rows, args.repeats, (load_start, os.getloadavg()[0]))
    print()
    print(text)
    if args.write:
        write_section(text)
        print(f"wrote the {SECTION!r} section of {DOC}")


if __name__ == "__main__":
    main()
