"""The READMEs quote the test tiers' figures from docs/TEST_FIGURES.md only, which
`python -m course_tools.figures` writes; its stages are .ci/run's."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from course_tools import figures

TIER = "content"  # content lint (course_tools/tiers.py)

ROOT = Path(__file__).resolve().parent.parent
READMES = ("README.md", "README.zh-CN.md", "README.zh-TW.md")
NUMBER = re.compile(r"\d[\d,.]*\d|\d")


def _tier_rows(text: str) -> dict[str, str]:
    """The tests table's last cell (the figures) by tier."""
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and cells[0].strip("`") in figures.ORDER and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells[-1]
    return rows


def quoted_but_not_measured(readme: str, measured: dict[str, list[str]]) -> list[str]:
    bad = []
    for tier, cell in _tier_rows(readme).items():
        have = set(measured.get(tier, []))
        for number in NUMBER.findall(cell):
            if number not in have:
                bad.append(f"{tier}: {number!r} in {cell!r}")
    return bad


@pytest.mark.parametrize("name", READMES)
def test_the_readme_quotes_tier_figures_only_from_the_figures_file(name: str) -> None:
    text = (ROOT / name).read_text("utf-8")
    assert set(_tier_rows(text)) == set(figures.ORDER), f"{name}: the tests table should have a row per tier"
    bad = quoted_but_not_measured(text, figures.read_rows())
    assert not bad, (f"{name} quotes figures that are not in docs/TEST_FIGURES.md: {bad}; measure with "
                     "`.venv/bin/python -m course_tools.figures <tier>` and quote the file")


def test_a_stale_figure_is_caught() -> None:
    measured = {"fast": ["914", "0", "40", "60", "1.0", "2026-11-27 18:00"]}
    assert quoted_but_not_measured("| `fast` | x | y | 40 s CPU (914 tests) |", measured) == []
    assert quoted_but_not_measured("| `fast` | x | y | 91 s (1,448 tests) |", measured) == [
        "fast: '91' in '91 s (1,448 tests)'", "fast: '1,448' in '91 s (1,448 tests)'"]


def test_the_figures_stages_are_the_ci_stages() -> None:
    ci = ROOT / ".ci" / "run"
    assert re.search(r"^claim=\(([^)]*)\)", ci.read_text(), re.M)[1].split() == list(figures.CLAIM)
    for tier in figures.ORDER:
        got = subprocess.run(["bash", "-c", f"source <(sed -n '/^claim=/,/^}}/p' {ci}); expr_for {tier}"],
                             capture_output=True, text=True, check=True).stdout.strip()
        assert got == figures.stage_expr(tier)
