"""Generation speed of a small GPT with and without the key/value cache.

Usage (from the repository root)::

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/bench_kv_cache.py [--write]

For each number of new tokens, cached and uncached generation alternate (so that a
change in machine load hits both alike) and the median time of the repeats is kept, both
wall-clock and CPU time of this process (on a shared machine the CPU time is the steadier
figure: it does not count the time the process waits for a core).
Both runs must return the same tokens (greedy decoding), which the script checks.
With ``--write`` the table replaces the "Key/value cache" section of docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from pathlib import Path

import torch

from course_lib.gpt import GPT, GPTConfig

SECTION = "## Key/value cache"
DOC = Path(__file__).resolve().parents[1] / "docs" / "BENCHMARKS.md"


def time_generate(model: GPT, prompt: torch.Tensor, new_tokens: int,
                  use_cache: bool) -> tuple[float, float, torch.Tensor]:
    """Wall-clock seconds, CPU seconds and the generated tokens."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = model.generate(prompt, new_tokens, top_k=1, use_cache=use_cache)
    return time.perf_counter() - wall, time.process_time() - cpu, out


def run(lengths: list[int], repeats: int, config: GPTConfig, prompt_len: int) -> list[dict[str, float]]:
    torch.manual_seed(0)
    model = GPT(config).eval()
    prompt = torch.randint(0, config.vocab_size, (1, prompt_len))
    time_generate(model, prompt, 8, True)  # warm-up
    time_generate(model, prompt, 8, False)
    rows: list[dict[str, float]] = []
    for n in lengths:
        walls: dict[bool, list[float]] = {True: [], False: []}
        cpus: dict[bool, list[float]] = {True: [], False: []}
        outputs = {}
        for _ in range(repeats):
            for use_cache in (True, False):
                wall, cpu, out = time_generate(model, prompt, n, use_cache)
                walls[use_cache].append(wall)
                cpus[use_cache].append(cpu)
                outputs[use_cache] = out
        if not torch.equal(outputs[True], outputs[False]):
            raise RuntimeError(f"cached and uncached generation differ for {n} new tokens")
        row: dict[str, float] = {"new": n}
        for key, use_cache in (("cached", True), ("uncached", False)):
            row[key] = statistics.median(walls[use_cache])
            row[key + "_cpu"] = statistics.median(cpus[use_cache])
        rows.append(row)
        print(f"{n:5d} new tokens: cached {row['cached'] * 1e3:8.1f} ms wall ({n / row['cached']:6.0f} tok/s), "
              f"{row['cached_cpu'] * 1e3:8.1f} ms CPU | uncached {row['uncached'] * 1e3:8.1f} ms wall "
              f"({n / row['uncached']:6.0f} tok/s), {row['uncached_cpu'] * 1e3:8.1f} ms CPU | speed-up "
              f"x{row['uncached'] / row['cached']:.2f} wall, x{row['uncached_cpu'] / row['cached_cpu']:.2f} CPU",
              flush=True)
    return rows


def markdown(rows: list[dict[str, float]], config: GPTConfig, prompt_len: int, repeats: int, params: int) -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines = [
        SECTION,
        "",
        f"`benchmarks/bench_kv_cache.py`: greedy generation with `GPT.generate(use_cache=True/False)`, "
        f"batch 1, prompt of {prompt_len} tokens, GPT with n_layer={config.n_layer}, n_head={config.n_head}, "
        f"n_embd={config.n_embd}, block_size={config.block_size}, vocab {config.vocab_size} "
        f"({params / 1e6:.2f} M parameters). Median of {repeats} interleaved repeats; both paths return "
        f"identical tokens. torch {torch.__version__}, {torch.get_num_threads()} thread(s), "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, load average {load:.1f} "
        f"when measured. On a shared machine wall-clock times are noisy; CPU time (this process "
        f"only) is the steadier measure of the work saved.",
        "",
        "| new tokens | with cache: wall ms (tok/s) | without cache: wall ms (tok/s) | speed-up, wall "
        "| with cache: CPU ms | without cache: CPU ms | speed-up, CPU |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['new']} | {r['cached'] * 1e3:.0f} ({r['new'] / r['cached']:.0f}) | "
                     f"{r['uncached'] * 1e3:.0f} ({r['new'] / r['uncached']:.0f}) | "
                     f"{r['uncached'] / r['cached']:.2f}x | {r['cached_cpu'] * 1e3:.0f} | "
                     f"{r['uncached_cpu'] * 1e3:.0f} | {r['uncached_cpu'] / r['cached_cpu']:.2f}x |")
    lines += [
        "",
        "Without the cache, step n reruns all n positions through every layer, so the cost of "
        "generating N tokens grows like N^2 (attention itself like N^3 in total); with the cache "
        "a step processes one position and attends to n cached keys. The speed-up therefore "
        "grows with the number of generated tokens. At this model size much of a cached step is "
        "Python and kernel-launch overhead, which is why the ratio is far below N.",
        "",
    ]
    return "\n".join(lines)


def write_section(text: str) -> None:
    """Replace (or append) the Key/value cache section, leaving the other sections alone."""
    doc = DOC.read_text() if DOC.exists() else "# Benchmarks\n\n"
    start = doc.find(SECTION + "\n")
    if start == -1:
        doc = doc.rstrip("\n") + "\n\n" + text
    else:
        end = doc.find("\n## ", start + len(SECTION))
        doc = doc[:start] + text + (doc[end + 1:] if end != -1 else "")
    DOC.parent.mkdir(parents=True, exist_ok=True)
    DOC.write_text(doc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[64, 128, 256])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    parser.add_argument("--prompt-len", type=int, default=16)
    parser.add_argument("--write", action="store_true", help="write the table into docs/BENCHMARKS.md")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    config = GPTConfig(vocab_size=65, block_size=max(args.lengths) + args.prompt_len,
                       n_layer=4, n_head=4, n_embd=128)
    params = GPT(config).num_parameters()
    print(f"torch {torch.__version__}, threads: {torch.get_num_threads()}, "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'unset')}, model: {params / 1e6:.2f} M parameters")
    rows = run(args.lengths, args.repeats, config, args.prompt_len)
    if args.write:
        write_section(markdown(rows, config, args.prompt_len, args.repeats, params))
        print(f"wrote the '{SECTION[3:]}' section of {DOC}")


if __name__ == "__main__":
    main()
