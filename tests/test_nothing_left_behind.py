"""A default test run leaves nothing in the temporary directory (issue 33): temporary files are
made by fixtures and removed; only a failed test's tmp_path, or an artefact folder a test names
and prints, stays."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TIER = "slow"  # course_tools/tiers.py: two pytest runs in subprocesses

ROOT = Path(__file__).resolve().parent.parent


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    scratch = tmp_path / "tmpdir"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch), "OMP_WAIT_POLICY": "PASSIVE"}
    env.pop("COURSE_TEST_SYSTEM", None)
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("COURSE_PROJECT_CACHE", None)  # the run makes its own folder for lesson 12's runs, and removes it
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    result.left = sorted(str(p.relative_to(scratch)) for p in scratch.rglob("*"))  # type: ignore[attr-defined]
    return result


def test_collecting_every_test_leaves_nothing(tmp_path: Path) -> None:
    # every test module imported (the hub test used to make its artefact folder at import)
    result = _run(tmp_path, "--collect-only", "tests")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.left == [], f"collecting the tests left {result.left} in TMPDIR"


def test_a_default_run_leaves_nothing(tmp_path: Path) -> None:
    # tests that use tmp_path, temporary folders of their own and subprocesses
    result = _run(tmp_path, "-m", "fast", "tests/test_ci_stages.py", "tests/test_run_notebooks.py",
                  "tests/test_course_lessons.py", "tests/test_project12_rules.py")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.left == [], f"the run left {result.left} in TMPDIR"
