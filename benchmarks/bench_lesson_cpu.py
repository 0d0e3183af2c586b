"""How much CPU time does each lesson's code take? The figure the 120 s budget is checked on.

Runs each lesson top to bottom in a fresh kernel (nothing saved) and measures, inside the kernel,
the CPU time of every code cell (``time.process_time``: user + system over all the kernel's
threads, so it does not depend on how busy the machine is the way wall time does). Prints one line
per lesson with the total and its three most expensive cells, and, with ``--cells``, every cell
over a second.

    .venv/bin/python benchmarks/bench_lesson_cpu.py                         # every lesson
    .venv/bin/python benchmarks/bench_lesson_cpu.py notebooks/04_*.ipynb --cells
    .venv/bin/python benchmarks/bench_lesson_cpu.py --seed 1 notebooks/10_*.ipynb
    .venv/bin/python benchmarks/bench_lesson_cpu.py --save notebooks/04_*.ipynb     # measure and re-execute

Kernels inherit this process's environment (``OMP_NUM_THREADS``, ``COURSE_SEED``); the lessons
choose their own thread counts where they train. The figures of the last run are in docs/SEEDS.md
("Lesson CPU time").
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from course_tools.lessons import lesson_id, lesson_notebooks
from course_tools.run_notebooks import normalize  # the same normalisation as a re-execution

ROOT = Path(__file__).resolve().parent.parent

# Registered in the kernel before the lesson's first cell: one (CPU, wall) pair per executed cell.
PROBE = """\
import time as __probe_time
__probe_cells = []
def __probe_pre(*args):
    global __probe_start
    __probe_start = (__probe_time.process_time(), __probe_time.perf_counter())
def __probe_post(*args):
    if "__probe_start" not in globals():   # the probe cell itself
        return
    __probe_cells.append((__probe_time.process_time() - __probe_start[0],
                          __probe_time.perf_counter() - __probe_start[1]))
get_ipython().events.register("pre_run_cell", __probe_pre)
get_ipython().events.register("post_run_cell", __probe_post)
"""
REPORT = "import json as __probe_json; print(__probe_json.dumps(__probe_cells))"


def measure(path: Path, timeout: int, save: bool = False) -> tuple[list[tuple[int, float, float]], float]:
    """[(cell index in the notebook from 0, CPU s, wall s)] of every non-empty code cell of the lesson, and the wall
    time of the whole run (kernel start included). ``save``: write the outputs into the lesson's file, normalised
    as ``scripts/run_notebooks.py`` does (so one run both measures and re-executes a lesson)."""
    original = nbformat.read(path, as_version=4)
    nb = nbformat.from_dict(original)
    run = [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.source.strip()]
    numbers = [i for i, _ in run]   # nbclient skips empty cells, so they are not measured
    nb.cells = [nbformat.v4.new_code_cell(PROBE)] + [c for _, c in run] + [nbformat.v4.new_code_cell(REPORT)]
    start = time.perf_counter()
    NotebookClient(nb, timeout=timeout, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    wall = time.perf_counter() - start
    text = "".join(out.get("text", "") for out in nb.cells[-1].outputs if out.get("output_type") == "stream")
    cells = json.loads(text.strip().splitlines()[-1])
    if len(cells) != len(numbers):
        raise RuntimeError(f"{path.name}: measured {len(cells)} cells, the lesson has {len(numbers)} code cells")
    if save:
        for n, executed in zip(numbers, nb.cells[1:-1]):
            original.cells[n].outputs = executed.outputs
        original.metadata = nb.metadata
        normalize(original)
        nbformat.validate(original)
        nbformat.write(original, path)
    return [(n, cpu, w) for n, (cpu, w) in zip(numbers, cells)], wall


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--timeout", type=int, default=600, help="per-cell timeout in seconds")
    parser.add_argument("--seed", type=int, help="COURSE_SEED for the kernels (default: the environment's, else 0)")
    parser.add_argument("--cells", action="store_true", help="also list every cell that took over 1 s of CPU")
    parser.add_argument("--save", action="store_true", help="save the outputs into the notebooks, as "
                        "scripts/run_notebooks.py does")
    args = parser.parse_args(argv)
    if args.seed is not None:
        os.environ["COURSE_SEED"] = str(args.seed)
    paths = args.notebooks or lesson_notebooks(ROOT / "notebooks")
    print(f"{'lesson':7s} {'cell CPU':>9s} {'cell wall':>10s} {'run wall':>9s}  most expensive cells (CPU s)")
    total = 0.0
    for path in paths:
        cells, wall = measure(path, args.timeout, args.save)
        cpu = sum(c for _, c, _ in cells)
        total += cpu
        top = sorted(cells, key=lambda c: -c[1])[:3]
        tops = ", ".join(f"cell {n}: {c:.1f}" for n, c, _ in top)
        print(f"{lesson_id(path):7s} {cpu:8.1f}s {sum(w for _, _, w in cells):9.1f}s {wall:8.1f}s  {tops}", flush=True)
        if args.cells:
            for n, c, w in cells:
                if c >= 1.0:
                    print(f"        cell {n:3d}: {c:6.1f} s CPU, {w:6.1f} s wall", flush=True)
    print(f"{'total':7s} {total:8.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
