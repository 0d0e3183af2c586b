"""course_lib and course_grader ship py.typed markers: their annotations must hold up under mypy; the
course's tools (course_tools) are held to the same rule.

The lint tier (CI's first stage): mypy keeps its cache in .mypy_cache (git-ignored), so a run
after a small change checks only what changed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TIER = "lint"  # course_tools/tiers.py

ROOT = Path(__file__).resolve().parent.parent


def test_course_lib_type_checks() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary", "course_lib", "course_grader", "course_tools"],
        cwd=ROOT, capture_output=True, text=True,
    )
    assert result.returncode == 0, f"mypy found problems:\n{result.stdout}{result.stderr}"
