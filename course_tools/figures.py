"""Measure the test tiers and write the figures in one place: docs/TEST_FIGURES.md.

    .venv/bin/python -m course_tools.figures                  # every tier CI runs as a stage
    .venv/bin/python -m course_tools.figures lint content     # some tiers (the others' rows are kept)
    .venv/bin/python -m course_tools.figures --durations 20 fast   # and print the 20 slowest tests

Each tier runs as its CI stage does (``.ci/run``: the tier less the tiers that claim a test
first), in a pytest of its own; the figures are the tests that passed and were skipped, the CPU
time of pytest and everything it started (user + system, from the children's rusage: the machine
is shared, so wall time says little), the wall time and the load average at the start. The READMEs
quote the tiers' figures from this file only (tests/test_figures.py checks it).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

from course_tools.tiers import CLAIM, REPO

FIGURES = REPO / "docs" / "TEST_FIGURES.md"
#: the order of the table (and of a full measurement)
ORDER = ("lint", "fast", "content", "slow", "sandbox", "notebooks", "browser", "system")
HEADER = ("| tier | passed | skipped | CPU (s) | wall (s) | load average at the start | measured (UTC) |\n"
          "| --- | --- | --- | --- | --- | --- | --- |\n")


def stage_expr(tier: str) -> str:
    """The -m expression of ``tier``'s CI stage (as .ci/run's expr_for)."""
    before = CLAIM[:CLAIM.index(tier)]
    return tier if not before else f"{tier} and not ({' or '.join(before)})"


def slowest(stdout: str) -> str:
    """pytest's ``--durations`` section of ``stdout`` ("" if there is none)."""
    match = re.search(r"^=+ slowest .*?(?=^=+ )", stdout, re.M | re.S)
    return match[0].rstrip() if match else ""


def measure(tier: str, durations: int = 0) -> dict[str, str]:
    if tier not in ORDER:
        raise SystemExit(f"unknown tier {tier!r}; choose from: {' '.join(ORDER)}")
    where = "notebooks" if tier == "notebooks" else "tests"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", stage_expr(tier), where]
    if durations:
        cmd.append(f"--durations={durations}")
    env = dict(os.environ)
    # as a developer's Python runs (and .ci/run): modules' bytecode is cached in __pycache__ and reused
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if tier == "system":
        env["COURSE_TEST_SYSTEM"] = "1"
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    result = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    last = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    counts = {k: int(v) for v, k in re.findall(r"(\d+) (passed|skipped|failed|error)", last)}
    if durations:  # printed even when the tier fails: the time was spent either way
        print(slowest(result.stdout), flush=True)
    if result.returncode not in (0, 5) or counts.get("failed") or counts.get("error"):
        failures = "\n".join(line for line in result.stdout.splitlines() if line.startswith(("FAILED ", "ERROR ")))
        raise SystemExit(f"the {tier} tier did not pass ({last or result.stderr[-500:]}): "
                         f"figures are written only for a passing tier\n{failures}")
    return {"tier": tier, "passed": f"{counts.get('passed', 0):,}", "skipped": f"{counts.get('skipped', 0):,}",
            "cpu": f"{cpu:.0f}", "wall": f"{wall:.0f}", "load": f"{load:.1f}",
            "when": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M")}


def read_rows(path: Path = FIGURES) -> dict[str, list[str]]:
    """The table's rows by tier: [passed, skipped, cpu, wall, load, when]."""
    rows: dict[str, list[str]] = {}
    if not path.exists():
        return rows
    for line in path.read_text("utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 7 and cells[0].strip("`") in ORDER:
            rows[cells[0].strip("`")] = cells[1:]
    return rows


def write(rows: dict[str, list[str]], path: Path = FIGURES) -> None:
    lines = ["# Test tiers: measured figures\n\n",
             "Written by `.venv/bin/python -m course_tools.figures` (never by hand): each tier run as its CI\n",
             "stage, on the 2-core development machine, with Python's bytecode cache on (as a developer's\n",
             "Python runs). CPU is pytest's and its children's (user + system); wall time depends on the load.\n",
             "The READMEs quote these figures only (`tests/test_figures.py`).\n\n",
             HEADER]
    for tier in ORDER:
        cells = rows.get(tier, ["-", "-", "-", "-", "-", "not measured yet"])
        lines.append(f"| `{tier}` | " + " | ".join(cells) + " |\n")
    path.write_text("".join(lines), "utf-8")


#: the READMEs whose tests table quotes these figures (the last cell of each tier's row)
READMES = ("README.md", "README.zh-CN.md", "README.zh-TW.md")
NUMBER = re.compile(r"\d[\d,.]*\d|\d")


def readme_rows(text: str) -> dict[str, str]:
    """A README's tests table: the last cell (the figures it quotes) by tier."""
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and cells[0].strip("`") in ORDER and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells[-1]
    return rows


def stale_quotes(readme: str, measured: dict[str, list[str]]) -> list[str]:
    """The numbers a README's tests table quotes that are not among its tier's measured figures."""
    bad = []
    for tier, cell in readme_rows(readme).items():
        have = set(measured.get(tier, []))
        for number in NUMBER.findall(cell):
            if number not in have:
                bad.append(f"{tier}: {number!r} in {cell!r}")
    return bad


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_tools.figures", description=__doc__.split("\n\n")[0])
    parser.add_argument("tiers", nargs="*", help=f"tiers to measure (default: {' '.join(ORDER)})")
    parser.add_argument("--durations", type=int, default=0, metavar="N",
                        help="print each tier's N slowest tests (wall time: pytest's --durations)")
    args = parser.parse_args(argv)
    rows = read_rows(FIGURES)
    # The file is written once, after the last tier (or the first that fails): a tier measured
    # later (content checks the READMEs' quotes against this file) sees the figures it started with.
    try:
        for tier in args.tiers or ORDER:
            got = measure(tier, args.durations)
            rows[tier] = [got["passed"], got["skipped"], got["cpu"], got["wall"], got["load"], got["when"]]
            print(f"{tier}: {got['passed']} passed, {got['skipped']} skipped, {got['cpu']} s CPU, "
                  f"{got['wall']} s wall (load {got['load']})", flush=True)
    finally:
        write(rows, FIGURES)
        print(f"wrote {FIGURES.relative_to(REPO)}")
        for name in READMES:
            for quote in stale_quotes((REPO / name).read_text("utf-8"), rows):
                print(f"{name} now quotes a figure the file does not have: {quote}: quote the file's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
