"""A default test run leaves nothing in the temporary directory (issue 33): temporary files are
made by fixtures and removed; only a failed test's tmp_path, or an artefact folder a test names
and prints, stays."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from course_tools import tiers as _tiers

TIER = "slow"  # course_tools/tiers.py: two pytest runs in subprocesses

ROOT = Path(__file__).resolve().parent.parent


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    scratch = tmp_path / "tmpdir"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch), "OMP_WAIT_POLICY": "PASSIVE"}
    env.pop("COURSE_TEST_SYSTEM", None)
    env.pop("PYTEST_ADDOPTS", None)
    for name in _tiers.RUN_FOLDERS:  # the run makes its own shared folders (lesson 12's runs, torch's cache) and removes them
        env.pop(name, None)
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
    # tests that use tmp_path, temporary folders of their own and subprocesses; test_training's step
    # optimizers in this process (torch makes its compiler's cache folder at the first step)
    result = _run(tmp_path, "-m", "fast", "tests/test_ci_stages.py", "tests/test_run_notebooks.py",
                  "tests/test_course_lessons.py", "tests/test_project12_rules.py", "tests/test_training.py")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.left == [], f"the run left {result.left} in TMPDIR"


def test_an_optimizer_step_leaves_no_torch_cache_in_the_temporary_directory(tmp_path: Path) -> None:
    # the mechanism the run's folders guard against: without a folder named, torch makes
    # <TMPDIR>/torchinductor_<user> at an optimizer's first step and never removes it
    scratch = tmp_path / "tmpdir"
    scratch.mkdir()
    step = "import torch; m = torch.nn.Linear(2, 2); torch.optim.Adam(m.parameters()).step()"
    env = {k: v for k, v in os.environ.items() if k not in _tiers.RUN_FOLDERS}
    subprocess.run([sys.executable, "-c", step], env={**env, "TMPDIR": str(scratch)}, check=True, timeout=120)
    assert [p.name for p in scratch.iterdir()][0].startswith("torchinductor_"), "torch no longer makes its cache folder"
    for p in scratch.iterdir():
        p.rmdir()
    made = tmp_path / "made"
    subprocess.run([sys.executable, "-c", step], env={**env, "TMPDIR": str(scratch), _tiers.TORCH_CACHE_ENV: str(made)},
                   check=True, timeout=120)
    assert list(scratch.iterdir()) == [] and made.is_dir()


def test_run_folders_are_made_when_unnamed_and_removed_after(monkeypatch, tmp_path: Path) -> None:
    given = tmp_path / "given"
    given.mkdir()
    monkeypatch.setenv(_tiers.PROJECT_CACHE_ENV, str(given))
    monkeypatch.delenv(_tiers.TORCH_CACHE_ENV, raising=False)
    monkeypatch.setattr(_tiers, "_run_folders_made", {})
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)  # tempfile reads TMPDIR again
    _tiers.make_run_folders()
    made = Path(os.environ[_tiers.TORCH_CACHE_ENV])
    assert made.parent == tmp_path and made.name.startswith("course-torch-cache-") and made.is_dir()
    assert os.environ[_tiers.PROJECT_CACHE_ENV] == str(given)  # a folder given is used as it is
    (made / "inductor-file").write_text("x")
    _tiers.remove_run_folders()
    assert not made.exists() and _tiers.TORCH_CACHE_ENV not in os.environ
    assert given.is_dir() and os.environ[_tiers.PROJECT_CACHE_ENV] == str(given)
