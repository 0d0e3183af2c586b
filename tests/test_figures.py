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


@pytest.mark.parametrize("name", figures.READMES)
def test_the_readme_quotes_tier_figures_only_from_the_figures_file(name: str) -> None:
    text = (ROOT / name).read_text("utf-8")
    assert set(figures.readme_rows(text)) == set(figures.ORDER), f"{name}: the tests table should have a row per tier"
    bad = figures.stale_quotes(text, figures.read_rows())
    assert not bad, (f"{name} quotes figures that are not in docs/TEST_FIGURES.md: {bad}; measure with "
                     "`.venv/bin/python -m course_tools.figures <tier>` and quote the file")


def test_a_stale_figure_is_caught() -> None:
    measured = {"fast": ["914", "0", "40", "60", "1.0", "2026-11-27 18:00"]}
    assert figures.stale_quotes("| `fast` | x | y | 40 s CPU (914 tests) |", measured) == []
    assert figures.stale_quotes("| `fast` | x | y | 91 s (1,448 tests) |", measured) == [
        "fast: '91' in '91 s (1,448 tests)'", "fast: '1,448' in '91 s (1,448 tests)'"]


def test_a_run_of_several_tiers_writes_the_file_once_and_names_the_quotes_to_update(tmp_path, monkeypatch, capsys):
    # a later tier (content) checks the READMEs against the file: it must see the figures it started with
    old = {"fast": ["914", "0", "21", "22", "1.0", "2026-11-27 18:00"]}
    (tmp_path / "docs").mkdir()
    monkeypatch.setattr(figures, "REPO", tmp_path)
    monkeypatch.setattr(figures, "FIGURES", tmp_path / "docs" / "TEST_FIGURES.md")
    figures.write(old, figures.FIGURES)
    for name in figures.READMES:
        (tmp_path / name).write_text("| `fast` | x | y | 21 s CPU, 914 tests |\n", "utf-8")
    seen = []

    def fake_measure(tier, durations=0):
        seen.append((tier, figures.read_rows(figures.FIGURES).get("fast")))
        if tier == "slow":
            raise SystemExit("the slow tier did not pass")
        return {"passed": "1,022", "skipped": "0", "cpu": "16", "wall": "18", "load": "0.7", "when": "2026-11-28 15:00"}

    monkeypatch.setattr(figures, "measure", fake_measure)
    with pytest.raises(SystemExit, match="slow tier did not pass"):
        figures.main(["fast", "content", "slow"])
    assert seen == [("fast", old["fast"]), ("content", old["fast"]), ("slow", old["fast"])]
    rows = figures.read_rows(figures.FIGURES)
    assert rows["fast"][:3] == ["1,022", "0", "16"] and rows["content"][2] == "16"  # measured before the failure: kept
    out = capsys.readouterr().out
    for name in figures.READMES:
        assert f"{name} now quotes a figure the file does not have: fast: '21'" in out, out


def test_the_figures_stages_are_the_ci_stages() -> None:
    ci = ROOT / ".ci" / "run"
    assert re.search(r"^claim=\(([^)]*)\)", ci.read_text(), re.M)[1].split() == list(figures.CLAIM)
    for tier in figures.ORDER:
        got = subprocess.run(["bash", "-c", f"source <(sed -n '/^claim=/,/^}}/p' {ci}); expr_for {tier}"],
                             capture_output=True, text=True, check=True).stdout.strip()
        assert got == figures.stage_expr(tier)
