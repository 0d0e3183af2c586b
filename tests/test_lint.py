"""ruff over the repository's code, with the configuration in pyproject.toml ([tool.ruff]).

The lint tier, CI's first stage (with mypy, tests/test_typing.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from course_tools import tiers as _tiers

TIER = "lint"  # course_tools/tiers.py

ROOT = Path(__file__).resolve().parent.parent


def _ruff() -> list[str]:
    exe = Path(sys.executable).with_name("ruff")
    if exe.exists():
        return [str(exe)]
    if (found := shutil.which("ruff")) is not None:
        return [found]
    why = "ruff is not installed: install the dev extra with `bash scripts/setup.sh` (or `.venv/bin/pip install -e '.[dev]'`)"
    if _tiers.in_ci():
        pytest.fail(f"CI=true and a piece is missing: {why}", pytrace=False)
    pytest.skip(why)


def test_ruff_finds_nothing() -> None:
    result = subprocess.run([*_ruff(), "check", "--no-cache", "--output-format", "concise", "."],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, f"ruff found problems (fix them, or configure [tool.ruff] on purpose):\n{result.stdout}{result.stderr}"


def test_ruff_reads_the_configuration(tmp_path: Path) -> None:
    # the rule set is the repository's: an unused import in a file under the checkout's settings is found
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n")
    result = subprocess.run([*_ruff(), "check", "--no-cache", "--config", str(ROOT / "pyproject.toml"), str(bad)],
                            capture_output=True, text=True)
    assert result.returncode == 1 and "F401" in result.stdout, result.stdout + result.stderr
