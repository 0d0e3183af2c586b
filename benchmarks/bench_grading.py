"""Benchmark: grade 30 submissions of lesson03_scoring with course-grade, nbgrader autograde and bare.

course-grade runs with its normal isolation (each sandbox under bubblewrap; it refuses to
run without it), so the figures include the isolation's cost.

    .venv/bin/python benchmarks/bench_grading.py [--jobs 2] [--n 30] [--no-nbgrader]

The class: a third correct solutions, a sixth released stubs, the rest the typical
mistakes of ``solutions/lesson03_scoring/mistakes.py`` in turn. Prints the wall time of
``course-grade --jobs N`` (worker start-up included) and the time per submission; then,
unless ``--no-nbgrader``, the same 30 notebooks with ``nbgrader autograde`` in a temporary
course directory (for reference: nbgrader runs each notebook in a fresh Jupyter kernel); then
the **bare floor**: the same 30 notebooks' code cells and the answer key's test cells (hidden
parts included) run in one plain Python process, one namespace per notebook, no sandbox, no
isolation, nothing recorded. Each figure is given as wall time and as CPU time (the process and
all its children, ``getrusage``): on a shared machine CPU time is the one to compare, and the
ratios are of CPU times.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from course_grader import cli
from course_tools.grading_dev.testing import load_mistakes, variant, write_notebook

ROOT = Path(__file__).resolve().parents[1]


ASSIGNMENT = "lesson03_scoring"
SOLUTION = ROOT / "solutions" / ASSIGNMENT / "scoring.ipynb"
STUB = ROOT / "exercises" / ASSIGNMENT / "scoring.ipynb"


def build_class(folder: Path, n: int) -> dict[str, str]:
    """Write n submissions as folder/<student>/scoring.ipynb; returns student -> kind."""
    mistakes = list(load_mistakes(SOLUTION.parent).items())
    kinds = {}
    for i in range(n):
        student = f"learner{i:02d}"
        if i % 3 == 0:
            nb, kind = variant(SOLUTION), "solution"
        elif i % 6 == 1:
            nb, kind = variant(STUB), "stub"
        else:
            name, spec = mistakes[i % len(mistakes)]
            nb, kind = variant(SOLUTION, replace=spec["replace"]), f"mistake:{name}"
        write_notebook(nb, folder / student / "scoring.ipynb")
        kinds[student] = kind
    return kinds


def cpu_now() -> float:
    """CPU seconds (user + system) of this process and of its children reaped so far."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def children_cpu() -> float:
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return kids.ru_utime + kids.ru_stime


CPU: dict[str, float] = {}


def run_course_grade(folder: Path, out: Path, jobs: int) -> tuple[float, list[dict]]:
    start, cpu = time.perf_counter(), cpu_now()
    code = cli.main(["grade", ASSIGNMENT, str(folder), "--out", str(out), "--jobs", str(jobs), "--quiet"])
    wall = time.perf_counter() - start
    CPU["course-grade"] = cpu_now() - cpu  # workers, fork servers and sandboxes are all reaped by now
    if code != 0:
        raise SystemExit(f"course-grade failed with {code}")
    book = out / ASSIGNMENT if (out / ASSIGNMENT / "grades.csv").exists() else out  # either gradebook layout
    rows = list(csv.DictReader((book / "grades.csv").open()))
    return wall, rows


def run_nbgrader(folder: Path, jobs: int) -> float | None:
    """nbgrader autograde of the same notebooks in a temporary course (db in the temp dir)."""
    nbgrader = Path(sys.executable).with_name("nbgrader")
    if not nbgrader.exists():
        print("nbgrader not found; skipped")
        return None
    course = Path(tempfile.mkdtemp(prefix="bench-nbgrader-"))
    try:
        (course / "source" / ASSIGNMENT).mkdir(parents=True)
        shutil.copy(SOLUTION, course / "source" / ASSIGNMENT / "scoring.ipynb")
        (course / "nbgrader_config.py").write_text(
            "c = get_config()\n"
            f"c.CourseDirectory.root = {str(course)!r}\n"
            f"c.CourseDirectory.db_url = 'sqlite:///{course}/gradebook.db'\n"
            "c.ExecutePreprocessor.timeout = 120\n")
        for student_dir in sorted(folder.iterdir()):
            dest = course / "submitted" / student_dir.name / ASSIGNMENT
            dest.mkdir(parents=True)
            shutil.copy(student_dir / "scoring.ipynb", dest / "scoring.ipynb")
        env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE",
                   PATH=f"{nbgrader.parent}{os.pathsep}{os.environ.get('PATH', '')}")  # nbgrader runs alembic
        gen = subprocess.run([str(nbgrader), "generate_assignment", ASSIGNMENT, "--force"], cwd=course, env=env,
                             capture_output=True, text=True)
        if gen.returncode != 0:
            print("nbgrader generate_assignment failed:", gen.stderr[-1500:])
            return None
        start, cpu = time.perf_counter(), children_cpu()
        res = subprocess.run([str(nbgrader), "autograde", ASSIGNMENT, "--create", "--force"], cwd=course, env=env,
                             capture_output=True, text=True)
        wall = time.perf_counter() - start
        CPU["nbgrader"] = children_cpu() - cpu
        if res.returncode != 0:
            print("nbgrader autograde exited with", res.returncode, res.stderr[-500:])
        return wall
    finally:
        shutil.rmtree(course, ignore_errors=True)


#: The bare floor: every notebook's code cells in order, each test cell replaced by the answer
#: key's (hidden parts included), exec'd in one namespace per notebook in this one process.
FLOOR = r"""
import json, sys
from IPython.core.inputtransformer2 import TransformerManager
source, paths = json.loads(sys.argv[1]), json.loads(sys.argv[2])
def cells(path):
    return [c for c in json.load(open(path))["cells"] if c.get("cell_type") == "code"]
def grade_id(cell):
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return meta.get("grade_id") if meta.get("grade") and not meta.get("solution") else None
tests = {grade_id(c): "".join(c["source"]) for c in cells(source) if grade_id(c)}
passed = total = 0
transform = TransformerManager().transform_cell
for path in paths:
    ns = {"__name__": "__main__"}
    for cell in cells(path):
        gid = grade_id(cell)
        code = tests.get(gid) if gid else "".join(cell["source"])
        if code is None:
            continue
        try:
            exec(compile(transform(code), "<cell>", "exec"), ns)
            passed += bool(gid)
        except BaseException:
            pass
        total += bool(gid)
print(json.dumps({"passed": passed, "tests": total}))
"""


def run_floor(folder: Path) -> tuple[float, dict]:
    """The bare floor in one child process (interpreter and imports included, as the grader pays
    them too). Returns (wall seconds, {"passed": .., "tests": ..}); its CPU time goes to CPU."""
    paths = [str(p / "scoring.ipynb") for p in sorted(folder.iterdir())]
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", OMP_NUM_THREADS="1", MPLBACKEND="Agg")
    start, cpu = time.perf_counter(), children_cpu()
    res = subprocess.run([sys.executable, "-c", FLOOR, json.dumps(str(SOLUTION)), json.dumps(paths)],
                         capture_output=True, text=True, env=env, cwd=str(folder))
    wall = time.perf_counter() - start
    CPU["floor"] = children_cpu() - cpu
    if res.returncode != 0:
        raise SystemExit(f"the bare floor failed: {res.stderr[-1500:]}")
    return wall, json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--n", type=int, default=30)
    parser.add_argument("--no-nbgrader", action="store_true")
    parser.add_argument("--no-floor", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    with tempfile.TemporaryDirectory(prefix="bench-grading-") as tmp:
        folder, out = Path(tmp) / "submitted", Path(tmp) / "grades"
        kinds = build_class(folder, args.n)
        wall, rows = run_course_grade(folder, out, args.jobs)
        totals = {r["student"]: float(r["total"]) for r in rows}
        full = max(float(r["max"]) for r in rows)
        ok = all((totals[s] == full) == (k == "solution") and (totals[s] == 0) == (k == "stub") or k.startswith("mistake")
                 for s, k in kinds.items())
        wrong_full = [s for s, k in kinds.items() if k.startswith("mistake") and totals[s] >= full]
        from course_grader.sandbox import isolation_status
        print(f"isolation: {isolation_status()[1][:80]}")
        print(f"course-grade: {args.n} submissions, --jobs {args.jobs}: {wall:.1f} s wall, "
              f"{CPU['course-grade']:.1f} s CPU ({wall / args.n:.2f} s wall per submission, "
              f"{wall * args.jobs / args.n:.2f} s per submission per job); load average {os.getloadavg()[0]:.1f}")
        print(f"  solutions full marks, stubs zero: {ok}; mistakes with full marks: {wrong_full or 'none'}")
        if not args.no_nbgrader:
            nb_wall = run_nbgrader(folder, args.jobs)
            if nb_wall is not None:
                print(f"nbgrader autograde (serial, one kernel per notebook): {nb_wall:.1f} s wall, "
                      f"{CPU['nbgrader']:.1f} s CPU ({nb_wall / args.n:.2f} s wall per submission)")
                print(f"  course-grade is {CPU['nbgrader'] / CPU['course-grade']:.1f}x faster in CPU time "
                      f"({nb_wall / wall:.1f}x in wall time; issue 29's goal: at least 10x)")
        if not args.no_floor:
            floor_wall, score = run_floor(folder)
            print(f"bare floor (the same code and checks in one process, no sandbox): {floor_wall:.1f} s wall, "
                  f"{CPU['floor']:.1f} s CPU; {score['passed']}/{score['tests']} test cells passed")
            print(f"  course-grade costs {CPU['course-grade'] / CPU['floor']:.2f}x the floor in CPU time "
                  f"({wall / floor_wall:.2f}x in wall time; issue 29's goal: at most 2x)")


if __name__ == "__main__":
    main()
