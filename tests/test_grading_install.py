"""Issue 18 item 5 (grader part): ``course-grade`` and every subcommand work from a
non-editable install, run outside the checkout. Answer keys and course sources come from
arguments or the course's configuration, never from the package's location.

The distribution is installed with ``pip install --no-deps --target`` into a temporary folder
(its dependencies come from this environment through PYTHONPATH's order: the target first);
every command runs with the current folder outside the checkout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from course_tools.grading_dev.points import assignment_points
from course_tools.grading_dev.testing import variant, write_notebook

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    base = tmp_path_factory.mktemp("noneditable")
    target = base / "site"
    build = base / "src"
    # build from a copy: pip's build would otherwise write build/ and *.egg-info into the checkout
    import shutil
    shutil.copytree(ROOT, build, ignore=shutil.ignore_patterns(".venv", ".git", "build", "*.egg-info", "__pycache__",
                                                               "notebooks", "test-artifacts"))
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--quiet",
                           "--target", str(target), str(build)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (target / "course_grader" / "cli.py").is_file()
    assert not (target / "solutions").exists()
    env = {k: v for k, v in os.environ.items() if k.startswith(("PATH", "LANG", "OMP_"))}
    env.update(PYTHONPATH=str(target), HOME=str(base))
    work = base / "elsewhere"
    work.mkdir()
    return {"base": base, "target": target, "env": env, "work": work}


def _run(installed, *args: str, cwd: Path | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "course_grader", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=str(cwd or installed["work"]), env=installed["env"])


def test_the_installed_grader_is_the_one_running(installed):
    out = subprocess.run([sys.executable, "-c", "import course_grader; print(course_grader.__file__)"],
                         capture_output=True, text=True, cwd=str(installed["work"]), env=installed["env"]).stdout
    assert out.startswith(str(installed["target"])), out


def test_init_course_needs_its_sources_and_takes_them_with_from(installed):
    proc = _run(installed, "init-course", "course1")
    assert proc.returncode == 2 and "--from" in proc.stderr, proc.stderr  # no solutions/ here: says how
    proc = _run(installed, "init-course", "course", "lesson03_scoring", "--from", str(ROOT / "solutions"))
    assert proc.returncode == 0, proc.stderr
    assert (installed["work"] / "course" / "source" / "lesson03_scoring" / "scoring.ipynb").is_file()
    assert (installed["work"] / "course" / "nbgrader_config.py").is_file()


def test_grading_finds_the_answer_key_by_configuration_or_argument(installed):
    course = installed["work"] / "course"
    if not course.exists():
        assert _run(installed, "init-course", "course", "lesson03_scoring", "--from",
                    str(ROOT / "solutions")).returncode == 0
    solution = ROOT / "solutions" / "lesson03_scoring" / "scoring.ipynb"
    sub = course / "submitted"
    write_notebook(variant(solution), sub / "honest" / "lesson03_scoring" / "scoring.ipynb")
    proc = _run(installed, "grade", "lesson03_scoring", str(sub), "--out", str(course / "grades"), "--jobs", "1",
                cwd=course)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"answer key: {course / 'source' / 'lesson03_scoring'}" in proc.stdout
    row = json.loads((course / "grades" / "lesson03_scoring" / "grades.json").read_text())["results"][0]
    points = assignment_points(solution)  # full marks; the maximum also counts the written (hand-graded) cells
    assert (row["total"], row["max_total"]) == (points.auto, points.maximum)
    # outside any course: an explicit --answer-key, never the installed package's neighbourhood
    import shutil
    loose = installed["work"] / "loose"
    shutil.copytree(sub, loose)
    proc = _run(installed, "grade", "lesson03_scoring", str(loose), "--out", str(installed["work"] / "g2"), "--jobs", "1")
    assert proc.returncode == 2 and "--answer-key" in proc.stderr, proc.stdout + proc.stderr
    proc = _run(installed, "grade", "lesson03_scoring", str(loose), "--out", str(installed["work"] / "g2"),
                "--jobs", "1", "--answer-key", str(solution.parent))
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_check_and_help_work_from_the_install(installed):
    released = write_notebook(variant(ROOT / "exercises" / "lesson03_scoring" / "scoring.ipynb"),
                              installed["work"] / "me" / "scoring.ipynb")
    proc = _run(installed, "--check", str(released))
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    assert "Public checks" in proc.stdout
    proc = _run(installed, "--help")
    assert proc.returncode == 0
    for sub in ("init-course", "check", "grade"):
        assert sub in proc.stdout, sub
