"""Do the lessons' claims about trained models hold for other seeds, and by what margin?

The lessons that train a model (1b, 4, 5, 7b, 8, 9, 10, 11, 12) read their training seed from the
environment variable ``COURSE_SEED`` (default 0, the committed run). Cells that print
training results are marked ``NBVAL_IGNORE_OUTPUT`` and followed by a cell that asserts the
claim the prose draws from them. This script runs each such lesson top to bottom with
several seeds (a fresh kernel each, nothing saved), reports whether every assertion held,
and shows the spread of every number printed by the ignored cells: each output line of the
first seed, with each number replaced by ``[min .. max]`` over the seeds.

    .venv/bin/python benchmarks/bench_lesson_seeds.py                       # seeds 0 1 2, all
    .venv/bin/python benchmarks/bench_lesson_seeds.py --seeds 0 1 2 3 --lessons 04 07b
    .venv/bin/python benchmarks/bench_lesson_seeds.py --markdown docs/SEEDS.md
    .venv/bin/python benchmarks/bench_lesson_seeds.py --seeds 1 2 --with-committed   # seed 0 = committed

The figures of the last run are in ``docs/SEEDS.md``. Thread count: the kernels inherit
this process's environment (set ``OMP_NUM_THREADS`` to choose; the default is all cores).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from course_tools.run_notebooks import normalize  # bars' final text, split streams joined

ROOT = Path(__file__).resolve().parent.parent

TRAINING_LESSONS = ["01b", "04", "05", "07b", "08", "09", "10", "11", "12"]
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[+-]?\d+)?")


def _ignored_outputs(nb: nbformat.NotebookNode) -> list[tuple[str, list[str]]]:
    """(first source line, output lines) of every NBVAL_IGNORE_OUTPUT cell, in order.

    Read as the committed notebook would show them (``run_notebooks.normalize``: a progress bar
    as its final text, a stream split over outputs joined); each output starts a new line, so a
    bar or a figure's ``<Figure ...>`` text never runs into the line printed after it.
    """
    nb = nbformat.from_dict(nb)
    normalize(nb)
    result = []
    for cell in nb.cells:
        if cell.cell_type != "code" or "# NBVAL_IGNORE_OUTPUT" not in cell.source:
            continue
        text = ""
        for out in cell.outputs:
            text += "".join(out.get("text", "")) + "".join(out.get("data", {}).get("text/plain", "")) + "\n"
        lines = [line for line in text.splitlines() if line.strip() and not line.startswith("<Figure")]
        comments = [ln.strip().lstrip("#").strip() for ln in cell.source.splitlines() if ln.strip().startswith("#")]
        reasons = [c for c in comments if c != "NBVAL_IGNORE_OUTPUT"]
        result.append((reasons[0] if reasons else "ignored cell", lines))
    return result


def run_lesson(path: Path, seed: int, timeout: int) -> tuple[str, float, list[tuple[str, list[str]]]]:
    nb = nbformat.read(path, as_version=4)
    env_before = os.environ.get("COURSE_SEED")
    os.environ["COURSE_SEED"] = str(seed)
    start = time.perf_counter()
    status = "all assertions held"
    try:
        NotebookClient(nb, timeout=timeout, kernel_name="python3",
                       resources={"metadata": {"path": str(path.parent)}}).execute()
    except CellExecutionError as err:
        first = str(err).strip().splitlines()
        status = "FAILED: " + next((line for line in reversed(first) if line.strip()), "error")[:200]
    finally:
        if env_before is None:
            os.environ.pop("COURSE_SEED", None)
        else:
            os.environ["COURSE_SEED"] = env_before
    return status, time.perf_counter() - start, _ignored_outputs(nb)


def spread(lines_by_seed: list[list[str]]) -> list[str]:
    """Merge the same output line of every seed: numbers become [min .. max]."""
    merged = []
    for i, line in enumerate(lines_by_seed[0]):
        numbers = [NUMBER.findall(lines[i]) if i < len(lines) else [] for lines in lines_by_seed]
        if not NUMBER.findall(line) or any(len(n) != len(numbers[0]) for n in numbers):
            same = all(i < len(lines) and lines[i] == line for lines in lines_by_seed)
            merged.append(line if same else f"{line}    [other seeds: different text]")
            continue
        pieces, pos = [], 0
        for k, match in enumerate(NUMBER.finditer(line)):
            values = [float(n[k]) for n in numbers]
            lo, hi = min(values), max(values)
            shown = match.group() if lo == hi else f"[{lo:g} .. {hi:g}]"
            pieces.append(line[pos:match.start()] + shown)
            pos = match.end()
        merged.append("".join(pieces) + line[pos:])
    return merged


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--lessons", nargs="+", default=TRAINING_LESSONS, help="lesson file prefixes, e.g. 01b 04 07b")
    parser.add_argument("--timeout", type=int, default=600, help="per-cell timeout in seconds")
    parser.add_argument("--markdown", type=Path, help="also write the report to this file")
    parser.add_argument("--with-committed", action="store_true",
                        help="also count the committed outputs as a run of seed 0 (they are one, made by "
                             "scripts/run_notebooks.py with COURSE_SEED unset) instead of re-running it")
    args = parser.parse_args(argv)

    report = ["# Lesson claims across seeds\n",
              f"Seeds {args.seeds}; OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset (all cores)')}; "
              f"{os.cpu_count()} CPUs; made by `benchmarks/bench_lesson_seeds.py`.\n"]
    failures = 0
    for lesson in args.lessons:
        matches = sorted((ROOT / "notebooks").glob(f"{lesson}_*.ipynb"))
        if not matches:
            print(f"no notebook for lesson {lesson}", file=sys.stderr)
            return 2
        path = matches[0]
        runs = []
        if args.with_committed:
            committed = _ignored_outputs(nbformat.read(path, as_version=4))
            runs.append(("0 (committed outputs)", "all assertions held (committed run)", float("nan"), committed))
        for seed in args.seeds:
            status, seconds, outputs = run_lesson(path, seed, args.timeout)
            failures += status.startswith("FAILED")
            print(f"{path.name} seed {seed}: {status} ({seconds:.0f} s)", flush=True)
            runs.append((seed, status, seconds, outputs))
        report.append(f"\n## {path.name}\n")
        for seed, status, seconds, _ in runs:
            took = "" if seconds != seconds else f" ({seconds:.0f} s)"
            report.append(f"- seed {seed}: {status}{took}")
        cells = min(len(r[3]) for r in runs)
        for c in range(cells):
            title = runs[0][3][c][0].strip(" ()")
            lines = spread([r[3][c][1] for r in runs])
            if not lines:
                continue
            report.append(f"\n{title}:\n\n```\n" + "\n".join(lines[:30]) + "\n```")
    text = "\n".join(report) + "\n"
    print(text)
    if args.markdown:
        args.markdown.write_text(text, encoding="utf-8")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
