"""Issue 29 (grader, fourth edition): identity and sinks, graded for real as a teacher grades.

* a learner whose id is the assignment's name, graded by a teacher working inside
  ``submitted/`` (``course-grade lesson03_scoring .``): it used to become the answer key of the
  class, its "test cells" running with the teacher's rights outside the sandbox;
* a learner id and a learner's exception message carrying terminal escape sequences (OSC 52
  clipboard write, cursor up + erase + a forged line): nothing raw reaches the terminal, in a
  class run or in ``--check``;
* a class run stopped by SIGTERM mid-class: the grades finished so far are on disk, the
  previous gradebook is untouched, the run stops at once (no worker grades on), and the same
  command resumes.

The class runs happen as the user running the tests, as root with an unprivileged sandbox uid
("root-dropped") and as an ordinary account ("user", system tier), as in
tests/test_grading_attacks.py. Each test fails on the grader of commit f5ff00a.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from course_tools.grading_dev.points import assignment_points
from course_tools.grading_dev.testing import load_mistakes, variant, write_notebook

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
NAME = "lesson03_scoring"
SOLUTION = ROOT / "solutions" / NAME / "scoring.ipynb"
RELEASED = ROOT / "exercises" / NAME / "scoring.ipynb"
#: lesson 3's points, read from its instructor notebook (full marks: POINTS.auto; the maximum counts the written cells)
POINTS = assignment_points(SOLUTION.parent)
MISSING_SQRT = load_mistakes(SOLUTION.parent)["missing_sqrt"]
ESCAPES = "\x1b]52;c;ZWNobyBwd25lZA==\x07\x1b[1A\x1b[2K  b_victim: 0/15  refused\r"
CONDITIONS = ["self", "root-dropped", pytest.param("user", marks=pytest.mark.system if os.geteuid() == 0 else ())]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k.startswith(("PATH", "LANG", "OMP_"))}
    env.update(PYTHONPATH=str(ROOT), **extra)
    return env


def _as(mode: str, base: Path) -> list[str]:
    """The command prefix of the condition; hands ``base`` to the ordinary account."""
    from test_grading_attacks import condition_prefix
    prefix, owner = condition_prefix(mode)
    if owner is not None and os.geteuid() == 0:
        for path in [base, *base.rglob("*")]:
            os.lchown(path, *owner)
    return prefix


@pytest.fixture
def base(request):
    path = Path(tempfile.mkdtemp(prefix="grading-fourth-"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _course(base: Path) -> Path:
    course = base / "course"
    subprocess.run([sys.executable, "-m", "course_grader", "init-course", str(course), NAME, "--from",
                    str(ROOT / "solutions")], check=True, capture_output=True, env=_env(HOME=str(base)), cwd=str(base))
    return course


def _answer_key_impostor(marker: Path) -> dict:
    """The released notebook (no solutions) whose test cells write ``marker`` and pass."""
    nb = json.loads(RELEASED.read_text())
    for cell in nb["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution"):
            cell["source"] = (f"import os\nopen({str(marker)!r}, 'w').write(str(os.getuid()))\n")
    return nb


@pytest.mark.parametrize("mode", CONDITIONS)
def test_a_learner_named_after_the_assignment_never_becomes_the_answer_key(base, mode):
    course = _course(base)
    sub = course / "submitted"
    marker = base / "ran-as-the-teacher.txt"
    write_notebook(_answer_key_impostor(marker), sub / NAME / NAME / "scoring.ipynb")
    write_notebook(variant(SOLUTION), sub / "honest" / NAME / "scoring.ipynb")
    wrong = MISSING_SQRT["replace"]
    write_notebook(variant(SOLUTION, replace=wrong), sub / "wrong" / NAME / "scoring.ipynb")
    bad_id = "mallory" + ESCAPES
    write_notebook(variant(SOLUTION), sub / bad_id / NAME / "scoring.ipynb")
    out = base / "grades"
    cmd = [*_as(mode, base), sys.executable, "-m", "course_grader", NAME, ".", "--out", str(out), "--jobs", "1",
           "--cell-timeout", "60"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=str(sub), env=_env(HOME=str(base)))
    printed = proc.stdout + proc.stderr
    for ch in ("\x1b", "\x07", "\r"):  # the learner id never reaches the terminal raw
        assert ch not in printed, printed[-2000:]
    assert proc.returncode == 1, printed[-3000:]  # graded, with one submission not graded: said so
    assert "mallory\\x1b]52;c;" in proc.stderr
    assert f"answer key: {(course / 'source' / NAME).resolve()} (the nbgrader course at" in proc.stdout
    assert not marker.exists(), "a learner's test cell ran with the teacher's rights"
    rows = {r["student"]: r for r in json.loads((out / NAME / "grades.json").read_text())["results"]}
    assert sorted(rows) == sorted([NAME, "honest", "wrong"])  # the impostor is graded as a learner
    assert rows["honest"]["total"] == POINTS.auto and rows["honest"]["max_total"] == POINTS.maximum
    assert rows["wrong"]["total"] == POINTS.without(MISSING_SQRT["fails"]) < POINTS.auto
    assert rows[NAME]["total"] < POINTS.auto


def test_check_prints_no_escape_sequence_from_the_learners_exception(tmp_path):
    nb = json.loads(RELEASED.read_text())
    code = next(c for c in nb["cells"] if c["cell_type"] == "code" and c.get("metadata", {}).get("nbgrader", {})
                .get("solution"))
    code["source"] = f"raise ValueError({ESCAPES!r})\n"
    path = write_notebook(nb, tmp_path / "learner" / "scoring.ipynb")
    proc = subprocess.run([sys.executable, "-m", "course_grader", "--check", str(path)], capture_output=True,
                          text=True, timeout=600, cwd=str(tmp_path), env=_env(HOME=str(tmp_path)))
    assert proc.returncode == 1, proc.stderr[-2000:]
    for ch in ("\x1b", "\x07", "\r"):
        assert ch not in proc.stdout + proc.stderr, proc.stdout[-2000:]
    assert "\\x1b]52;c;" in proc.stdout  # shown, visibly


SLOW_CELL = "import time\ntime.sleep(300)\n"


@pytest.mark.parametrize("mode", CONDITIONS)
def test_sigterm_mid_class_keeps_what_was_graded_and_a_rerun_resumes(base, mode):
    sub, out = base / "submitted", base / "grades"
    for s in ("a1", "a2", "a3"):
        write_notebook(variant(SOLUTION), sub / s / "scoring.ipynb")
    write_notebook(variant(SOLUTION, append={"masked_softmax": SLOW_CELL}), sub / "zz_slow" / "scoring.ipynb")
    (out / NAME).mkdir(parents=True)
    (out / NAME / "grades.csv").write_text("student,total\nprevious_run,15\n")
    prefix = _as(mode, base)
    cmd = [*prefix, sys.executable, "-m", "course_grader", "grade", str(SOLUTION.parent), str(sub), "--out", str(out),
           "--jobs", "1", "--cell-timeout", "600"]
    env = _env(HOME=str(base))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(base), env=env)
    journal = out / NAME / "journal"
    deadline = time.monotonic() + 600
    while len(list(journal.glob("*.json"))) < 3 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.5)
    assert len(list(journal.glob("*.json"))) == 3, proc.communicate(timeout=60)
    time.sleep(3)  # zz_slow is in its 300 s cell now
    stopped = time.monotonic()
    os.kill(proc.pid, signal.SIGTERM) if not prefix else _signal_tree(proc.pid)
    stdout, stderr = proc.communicate(timeout=120)
    assert time.monotonic() - stopped < 30, "the run went on grading after SIGTERM"
    assert proc.returncode != 0, stdout + stderr
    assert "interrupted (SIGTERM): 3 of 4" in stderr, stderr[-2000:]
    assert (out / NAME / "grades.csv").read_text() == "student,total\nprevious_run,15\n"
    assert not list((out / NAME).glob("grades.2*.csv"))  # the previous gradebook never moved aside
    kept = {json.loads(p.read_text())["student"]: json.loads(p.read_text()) for p in journal.glob("*.json")}
    assert sorted(kept) == ["a1", "a2", "a3"] and all(k["result"]["total"] == POINTS.auto for k in kept.values())
    # the teacher fixes nothing but re-runs (zz_slow now submitted without the sleep)
    write_notebook(variant(SOLUTION), sub / "zz_slow" / "scoring.ipynb")
    _as(mode, base)
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=str(base), env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resuming: 3 learner(s)" in again.stdout and "grading 1 submission(s)" in again.stdout
    data = json.loads((out / NAME / "grades.json").read_text())
    rows = {r["student"]: r for r in data["results"]}
    assert sorted(rows) == ["a1", "a2", "a3", "zz_slow"]
    for s in ("a1", "a2", "a3"):  # taken from the journal, as graded then
        assert rows[s]["duration"] == kept[s]["result"]["duration"]
    assert all(r["total"] == POINTS.auto for r in rows.values())
    assert rows["zz_slow"]["submission_sha256"]["scoring"]
    assert not journal.exists()
    assert "previous_run" in next((out / NAME).glob("grades.2*.csv")).read_text()


def _signal_tree(pid: int) -> None:
    """SIGTERM the grader itself under a prefix (sudo/runuser/bwrap): the deepest python."""
    target = pid
    for _ in range(10):
        try:
            kids = Path(f"/proc/{target}/task/{target}/children").read_text().split()
        except OSError:
            break
        if not kids:
            break
        cmd = Path(f"/proc/{target}/cmdline").read_bytes()
        if b"course_grader" in cmd and b"-m" in cmd and Path(f"/proc/{target}/exe").resolve().name.startswith("python"):
            break
        target = int(kids[0])
    os.kill(target, signal.SIGTERM)
