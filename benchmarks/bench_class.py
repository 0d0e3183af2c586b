"""Benchmark: a teacher grading a class of 30 and of 300 with ``course-grade``, nbgrader layout.

    .venv/bin/python benchmarks/bench_class.py [--sizes 30 300] [--jobs 2] [--assignment lesson03_scoring]

For each size, a temporary nbgrader course (``course-grade init-course``, then
``nbgrader generate_assignment``) gets that many submissions in ``submitted/<student>/<assignment>/``
(a third correct solutions, a sixth released stubs, the rest the assignment's typical
mistakes in turn, each with a ``timestamp.txt``), and the teacher's command runs as a
subprocess, start-up included:

    course-grade <assignment> submitted/ --out grades/ --jobs N --to-nbgrader

Prints the wall time, the time per submission, and checks the grades (solutions full
marks, stubs zero, no mistake full marks).
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def make_class(course: Path, assignment: str, n: int) -> dict[str, str]:
    """Write n submissions into course/submitted/; returns student -> kind."""
    from course_grader.notebook import Assignment
    from course_tools.grading_dev.testing import load_mistakes, variant, write_notebook

    source = Assignment.load(ROOT / "solutions" / assignment)
    (name, nb), = source.notebooks.items()
    stub = ROOT / "exercises" / assignment / f"{name}.ipynb"
    mistakes = list(load_mistakes(ROOT / "solutions" / assignment).items())
    kinds = {}
    for i in range(n):
        student = f"s{i:04d}"
        folder = course / "submitted" / student / assignment
        if i % 3 == 0:
            kind, notebook = "solution", variant(nb.path)
        elif i % 6 == 1:
            kind, notebook = "stub", variant(stub)
        else:
            m, spec = mistakes[i % len(mistakes)]
            kind, notebook = f"mistake:{m}", variant(nb.path, replace=spec["replace"])
        write_notebook(notebook, folder / f"{name}.ipynb")
        (folder / "timestamp.txt").write_text("2026-11-23 12:00:00.000000 UTC")
        kinds[student] = kind
    return kinds


def run(n: int, jobs: int, assignment: str) -> float:
    with tempfile.TemporaryDirectory(prefix="bench-class-") as tmp:
        course = Path(tmp) / "course"
        env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
        subprocess.run([str(BIN / "course-grade"), "init-course", str(course), assignment, "--from", str(ROOT / "solutions")], check=True, env=env,
                       capture_output=True)
        subprocess.run([str(BIN / "nbgrader"), "generate_assignment", assignment], cwd=course, check=True,
                       env=env, capture_output=True)
        kinds = make_class(course, assignment, n)
        start = time.monotonic()
        proc = subprocess.run([str(BIN / "course-grade"), assignment, "submitted", "--out", "grades",
                               "--jobs", str(jobs), "--to-nbgrader", "--quiet"], cwd=course, env=env,
                              capture_output=True, text=True)
        wall = time.monotonic() - start
        if proc.returncode != 0:
            raise SystemExit(f"course-grade failed:\n{proc.stdout}\n{proc.stderr}")
        rows = {r["student"]: r for r in csv.DictReader((course / "grades" / assignment / "grades.csv").open())}
        bad = []
        for student, kind in kinds.items():
            total, top = float(rows[student]["total"]), float(rows[student]["max"])
            if (kind == "solution" and total != top) or (kind == "stub" and total != 0) \
                    or (kind.startswith("mistake") and total >= top):
                bad.append((student, kind, total))
        print(f"{n:4d} submissions, --jobs {jobs}: {wall:6.1f} s wall, {wall / n:.2f} s per submission"
              + (f"   UNEXPECTED GRADES: {bad[:5]}" if bad else "   (grades as expected)"), flush=True)
        return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[30, 300])
    parser.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--assignment", default="lesson03_scoring")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    print(f"{args.assignment}, {os.cpu_count()} cores, load average {load:.1f} at start")
    for n in args.sizes:
        run(n, args.jobs, args.assignment)


if __name__ == "__main__":
    main()
