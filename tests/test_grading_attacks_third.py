"""Issue 19 (grader, third edition): attacks that need the real sandbox and command line.

* class 1 - a notebook "checked for a classmate" whose test cell carries a recomputed
  nbgrader checksum: its code must run inside the sandbox, never with the checker's rights;
* class 5 - nothing writable shared between learners' sandboxes (``/dev`` was one tmpfs for
  every sandbox of a fork server), and one memory bound over all of a learner's processes
  where a memory cgroup can be had (which bound applied is recorded in ``grades.json``);
* issue 18 item 4 - the grader works when the installation lives under ``/tmp`` (every
  sandbox has its own private ``/tmp``: the installation's folders are bound inside it), and a
  learner's ``--check`` never mentions ``--unsafe-no-sandbox``.

The class runs happen as the user running the tests, as root with an unprivileged sandbox uid
("root-dropped") and as an ordinary account ("user", which creates a Unix account as root:
the system tier), as in tests/test_grading_attacks.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from course_tools.grading_dev.points import assignment_points
from course_tools.grading_dev.testing import variant, write_notebook

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
SOLUTION = ROOT / "solutions" / "lesson03_scoring" / "scoring.ipynb"
#: lesson 3's points from its instructor notebook: full marks (auto) and the maximum (with the written cells)
POINTS = assignment_points(SOLUTION)
RELEASED = ROOT / "exercises" / "lesson03_scoring" / "scoring.ipynb"
DEV_MARK = "devmark-3e9a"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k.startswith(("PATH", "LANG", "OMP_"))}
    env.update(PYTHONPATH=str(ROOT), **extra)
    return env


# -- class 1: the self-check runs no code of the checked notebook outside the sandbox ----------

def _forged_check_notebook(marker: Path) -> dict:
    """The released notebook with wrong code, and a public test cell replaced by code that
    writes ``marker`` and passes - its nbgrader checksum recomputed (an unkeyed MD5)."""
    import nbformat
    from nbgrader.utils import compute_checksum  # here: importing nbgrader costs about 1.4 s of CPU
    nb = json.loads(RELEASED.read_text())
    forged = f"open({str(marker)!r}, 'w').write('ran with the checker rights')\n"
    for cell in nb["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution"):
            cell["source"] = forged
            meta["checksum"] = compute_checksum(nbformat.from_dict(cell))
    return nb


def test_self_check_runs_the_checked_notebooks_tests_in_the_sandbox(tmp_path):
    marker = tmp_path / "host-marker.txt"
    nb_path = write_notebook(_forged_check_notebook(marker), tmp_path / "classmate" / "scoring.ipynb")
    proc = subprocess.run([sys.executable, "-m", "course_grader", "--check", str(nb_path)], capture_output=True,
                          text=True, timeout=600, cwd=str(tmp_path), env=_env(HOME=str(tmp_path)))
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    assert not marker.exists(), "a test cell of the checked notebook ran outside the sandbox"
    assert "not proof of a grade" in proc.stdout  # the report says what it is
    assert "--unsafe-no-sandbox" not in proc.stdout + proc.stderr


# -- class 5: no channel between learners; one memory bound per learner ------------------------

WRITE_DEV = f'''
import os
for _d in ("/dev", "/dev/shm", "/dev/mqueue", "/dev/pts"):
    try:
        open(os.path.join(_d, "{DEV_MARK}"), "w").write("left for the next learner")
        print("WROTE", _d)
    except OSError as _e:
        print("refused", _d, _e.errno)
'''

READ_DEV = f'''
import os
for _d in ("/dev", "/dev/shm", "/dev/mqueue", "/dev/pts"):
    try:
        if "{DEV_MARK}" in os.listdir(_d):
            print("FOUND", _d)
    except OSError:
        pass
'''

# Six children each touch 500 MB and say so; the memory cgroup's OOM killer may then kill a
# child that had already said so (the largest, not the one allocating), so a child's "done"
# proves nothing about the others. What counts is how many answer a ping sent after all six
# reported: each held its block from its "done" to its answer, so those that answer held
# theirs at one moment together.
SPREAD_MEMORY = '''
import os, time
_kids = []
for _i in range(6):
    _up_r, _up_w = os.pipe()
    _down_r, _down_w = os.pipe()
    _pid = os.fork()
    if _pid == 0:
        try:
            os.close(_up_r)
            os.close(_down_w)
            _block = bytearray(500 * 2**20)   # touched: resident, 500 MB per process
            for _j in range(0, len(_block), 4096):
                _block[_j] = 1
            os.write(_up_w, b"1")
            if os.read(_down_r, 1) == b"?":
                os.write(_up_w, b"2" if _block[0] == 1 and _block[-4096] == 1 else b"x")
            time.sleep(20)
        finally:
            os._exit(0)
    os.close(_up_w)
    os.close(_down_r)
    _kids.append((_pid, _up_r, _down_w))
_done = [os.read(_r, 1) == b"1" for _pid, _r, _w in _kids]
for _pid, _r, _w in _kids:
    try:
        os.write(_w, b"?")
    except OSError:   # that child is gone
        pass
_held = sum(1 for (_pid, _r, _w), _d in zip(_kids, _done) if _d and os.read(_r, 1) == b"2")
print("DONE", sum(_done))
print("HELD-AT-ONCE", _held)
for _pid, _r, _w in _kids:
    try:
        os.kill(_pid, 9)
    except OSError:
        pass
'''


def _class_run(mode: str, base: Path) -> dict:
    from test_grading_attacks import condition_prefix
    prefix, owner = condition_prefix(mode)
    sub, out = base / "submitted", base / "grades"
    write_notebook(variant(SOLUTION, append={"answers": WRITE_DEV}), sub / "a_writer" / "scoring.ipynb")
    write_notebook(variant(SOLUTION, append={"answers": READ_DEV}), sub / "b_reader" / "scoring.ipynb")
    write_notebook(variant(SOLUTION, append={"answers": SPREAD_MEMORY}), sub / "c_memory" / "scoring.ipynb")
    if owner is not None and os.geteuid() == 0:
        for path in [base, *base.rglob("*")]:
            os.lchown(path, *owner)
    cmd = [*prefix, sys.executable, "-m", "course_grader", "grade", "lesson03_scoring", str(sub), "--out", str(out),
           "--jobs", "1", "--memory-mb", "1500", "--cell-timeout", "60", "--quiet"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=str(ROOT), env=_env(HOME=str(base)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads((out / "lesson03_scoring" / "grades.json").read_text())
    return {"_mode": mode, **{r["student"]: r for r in data["results"]}}


@pytest.fixture(scope="module", params=["self", "root-dropped",
                                        pytest.param("user", marks=pytest.mark.system if os.geteuid() == 0 else ())])
def channel_run(request):
    base = Path(tempfile.mkdtemp(prefix=f"grading-third-{request.param}-"))
    os.chmod(base, 0o755)
    try:
        yield _class_run(request.param, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _printed(result: dict) -> str:
    return "".join(c.get("stdout", "") for nb in result["notebooks"] for c in nb["cells"])


def test_nothing_written_in_dev_reaches_the_next_learner(channel_run):
    assert "FOUND" not in _printed(channel_run["b_reader"]), _printed(channel_run["b_reader"])
    assert "WROTE /dev\n" not in _printed(channel_run["a_writer"])


def test_one_memory_bound_covers_all_of_a_learners_processes(channel_run):
    printed = _printed(channel_run["c_memory"])
    held = [int(line.split()[1]) for line in printed.splitlines() if line.startswith("HELD-AT-ONCE")]
    cgroup_here = (os.geteuid() == 0 and channel_run["_mode"] != "user"
                   and (os.access("/sys/fs/cgroup/memory", os.W_OK) or os.access("/sys/fs/cgroup/cgroup.procs", os.W_OK)))
    if cgroup_here:
        # 1500 MB + the fork server's share: 6 processes of 500 MB each never fit at once (the
        # OOM killer takes the largest process, a child, never the cell that prints)
        assert held and held[0] < 6, printed
    nb = channel_run["c_memory"]["notebooks"][0]
    bound = nb.get("memory_bound", "")
    assert bound, "grades.json records which memory bound applied"
    assert bound.startswith("memory cgroup" if cgroup_here else "RLIMIT_AS"), bound
    assert nb.get("seccomp", "").startswith("seccomp filter by libseccomp"), nb.get("seccomp")
    for student in ("a_writer", "b_reader"):  # honest work around the attacks keeps full marks
        assert (channel_run[student]["total"], channel_run[student]["max_total"]) == (POINTS.auto, POINTS.maximum), \
            student


# -- issue 18 item 4: an installation under /tmp ------------------------------------------------

def _installation_under_tmp(base: Path) -> tuple[str, dict[str, str]]:
    """A Python environment whose prefix and course packages live under ``base`` (in /tmp):
    a venv (its own prefix under /tmp) reusing this environment's site-packages through a
    .pth file, and copies of course_lib and course_grader. Returns (python, env)."""
    assert str(base).startswith(("/tmp/", "/var/tmp/")), base
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    import site
    pyver = f"python{sys.version_info.major}.{sys.version_info.minor}"
    (venv / "lib" / pyver / "site-packages" / "course_deps.pth").write_text(
        "\n".join(p for p in site.getsitepackages()) + "\n")
    inst = base / "install"
    inst.mkdir()
    for pkg in ("course_lib", "course_grader"):
        shutil.copytree(ROOT / pkg, inst / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    (venv / "lib" / pyver / "site-packages" / "course_pkgs.pth").write_text(str(inst) + "\n")
    env = {k: v for k, v in os.environ.items() if k.startswith(("PATH", "LANG", "OMP_"))}
    env["HOME"] = str(base)
    return str(venv / "bin" / "python"), env


def test_grading_and_check_work_from_an_installation_under_tmp(tmp_path):
    base = Path(tempfile.mkdtemp(prefix="course-under-tmp-", dir="/tmp"))
    try:
        python, env = _installation_under_tmp(base)
        where = subprocess.run([python, "-c", "import course_lib, course_grader, sys; "
                                "print(course_lib.__file__, course_grader.__file__, sys.prefix)"],
                               capture_output=True, text=True, env=env, cwd=str(base), check=True).stdout
        assert where.count(str(base)) == 3, where  # everything the sandbox binds lives under /tmp
        sub, out = base / "submitted", base / "grades"
        write_notebook(variant(SOLUTION), sub / "honest" / "scoring.ipynb")
        proc = subprocess.run([python, "-m", "course_grader", "grade", str(SOLUTION.parent), str(sub),
                               "--out", str(out), "--jobs", "1", "--quiet"],
                              capture_output=True, text=True, timeout=900, cwd=str(base), env=env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        data = json.loads((out / "lesson03_scoring" / "grades.json").read_text())
        row = data["results"][0]
        assert row["status"] == "ok" and (row["total"], row["max_total"]) == (POINTS.auto, POINTS.maximum), \
            row["notebooks"][0]["notes"]
        notes = " ".join(row["notebooks"][0]["notes"])
        assert "WITHOUT" not in notes
        released = write_notebook(variant(RELEASED), base / "learner" / "scoring.ipynb")
        check = subprocess.run([python, "-m", "course_grader", "--check", str(released)], capture_output=True,
                               text=True, timeout=600, cwd=str(base), env=env)
        assert check.returncode in (0, 1), check.stderr[-2000:]
        assert "--unsafe-no-sandbox" not in check.stdout + check.stderr
        assert "WITHOUT" not in check.stdout
    finally:
        shutil.rmtree(base, ignore_errors=True)


# -- what learners see: a failing test names the learner function behind it --------------------

def test_a_failing_test_names_the_learner_function_that_failed_its_own_check(tmp_path):
    from course_grader.notebook import Assignment
    from course_grader.runner import grade_submission
    from course_grader.sandbox import SandboxConfig
    from course_tools.grading_dev.testing import load_mistakes
    wrong = load_mistakes(SOLUTION.parent)["mask_after_softmax"]["replace"]
    path = write_notebook(variant(SOLUTION, replace=wrong), tmp_path / "learner" / "scoring.ipynb")
    res = grade_submission(Assignment.load(SOLUTION.parent), "learner", {"scoring": path}, seed=1,
                           config=SandboxConfig(cell_timeout=60, call_timeout=30))
    tests = {t.grade_id: t for nb in res.notebooks for t in nb.tests}
    assert not tests["test_masked_softmax"].passed
    failed_users = [t for gid, t in tests.items() if gid.startswith(("test_dot_product", "test_additive"))
                    and not t.passed]
    assert failed_users, "the classes built on the wrong masked_softmax fail"
    for t in failed_users:
        assert "uses your masked_softmax, which failed its own check" in t.message, t.message
    assert "uses your" not in tests["test_masked_softmax"].message


# -- class 2: a learner result sized to make a test compute without bound ------------------------

def test_a_result_of_16000_rows_is_refused_by_its_shape_before_any_product(tmp_path):
    """lesson 9's relative-position test multiplied the learner's (rows x D) results into a
    (rows x rows) matrix before looking at them: 16,000 rows cost the grader 1 GB (more rows,
    the OOM killer), and zeros even passed the test."""
    from course_grader.notebook import Assignment
    from course_grader.runner import grade_submission
    from course_grader.sandbox import SandboxConfig
    scale = ROOT / "solutions" / "lesson09_scale" / "scale.ipynb"
    huge = "import torch\ndef apply_rotary(x):\n    return torch.zeros(16000, x.shape[-1], dtype=x.dtype)"
    path = write_notebook(variant(scale, replace={"rotary": huge}), tmp_path / "learner" / "scale.ipynb")
    res = grade_submission(Assignment.load(scale.parent), "learner", {"scale": path}, seed=1,
                           config=SandboxConfig(cell_timeout=60, call_timeout=30))
    test = next(t for nb in res.notebooks for t in nb.tests if t.grade_id == "test_rotary_relative")
    assert not test.passed and "shape" in test.message, test.message
