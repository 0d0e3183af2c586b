"""Issue 29: any torch build grades right, and an environment failure is never a learner's grade.

* a CUDA build of torch reserves ~3.1 GB of address space at import (the CPU build ~0.6 GB):
  the sandbox's bounds are measured from the fork server at start-up plus the learner's
  allowance, so the class is graded right with it. The stand-in for a CUDA build is a
  temporary virtual environment whose ``import torch`` first reserves 3.2 GB of address space
  (``mmap(PROT_NONE, MAP_NORESERVE)``: no memory, the same address space); the real build (6 GB
  from PyPI) is the optional system-tier test at the end;
* a sandbox that cannot start (a stand-in environment where the sandbox dies while starting, a
  fork server that cannot start) stops ``course-grade`` with a non-zero exit, one message with
  the cause and the fix, and no grade file written; ``--check`` says the same to the learner;
* nothing of a sandbox lands on the grader's disk (a learner's ``fallocate`` on its own stderr
  reserved the grader's free space);
* ``--memory-mb`` is the learner's own bound where a memory cgroup exists (``memfd`` pages that
  are never mapped included).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from course_tools.grading_dev.points import assignment_points
from course_tools.grading_dev.testing import variant, write_notebook

pytestmark = [pytest.mark.sandbox]

ROOT = Path(__file__).resolve().parents[1]
SOLUTION = ROOT / "solutions" / "lesson03_scoring" / "scoring.ipynb"
#: lesson 3's points from its instructor notebook: full marks (auto) and the maximum (with the written cells)
POINTS = assignment_points(SOLUTION)
RELEASED = ROOT / "exercises" / "lesson03_scoring" / "scoring.ipynb"
#: What the stand-in reserves at ``import torch`` (a CUDA build of torch 2.13 with numpy: ~3.1 GB).
CUDA_RESERVE = 3_200_000_000

CUDA_STANDIN = f'''"""Stand-in for a CUDA build of torch (tests only): the first ``import torch`` reserves
{CUDA_RESERVE} bytes of address space, as the CUDA build's libraries do, without using memory."""
import ctypes
import sys

_HELD = []


class _ReserveAtTorchImport:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "torch" and not _HELD:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.mmap.restype = ctypes.c_void_p
            libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                  ctypes.c_long]
            # PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE
            addr = libc.mmap(None, {CUDA_RESERVE}, 0, 0x02 | 0x20 | 0x4000, -1, 0)
            if addr in (None, ctypes.c_void_p(-1).value):
                raise MemoryError("the CUDA stand-in could not reserve its address space")
            _HELD.append(addr)
        return None


sys.meta_path.insert(0, _ReserveAtTorchImport)
'''

#: A sandbox that dies while starting: the sandbox's own start (sandbox_main._child seeds the
#: random module before any learner code) raises, as a broken library would.
BROKEN_START = '''"""Stand-in for a broken environment (tests only): a sandbox dies while starting."""
import os

if os.environ.get("COURSE_GRADING") == "1":  # the grader's fork server and sandboxes only
    import random

    def _broken_seed(*args, **kwargs):
        raise RuntimeError("stand-in: this environment's libraries are broken")

    random.seed = _broken_seed
'''


def _venv(base: Path, standin: str, name: str) -> tuple[str, dict[str, str]]:
    """A virtual environment in ``base`` using this environment's packages and the checkout's
    course packages, plus a stand-in module imported at every start (a .pth line).
    Returns (python, env)."""
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    import site
    pyver = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site_dir = venv / "lib" / pyver / "site-packages"
    (site_dir / "course_deps.pth").write_text("\n".join(site.getsitepackages()) + f"\n{ROOT}\n")
    (site_dir / f"{name}.py").write_text(standin)
    (site_dir / f"{name}.pth").write_text(f"import {name}\n")
    env = {k: v for k, v in os.environ.items() if k.startswith(("PATH", "LANG", "OMP_"))}
    env["HOME"] = str(base)
    return str(venv / "bin" / "python"), env


@pytest.fixture
def base():
    path = Path(tempfile.mkdtemp(prefix="course-env-"))
    os.chmod(path, 0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _grade(python: str, env: dict, sub: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([python, "-m", "course_grader", "grade", "lesson03_scoring", str(sub), "--out", str(out),
                           "--jobs", "1", *extra], capture_output=True, text=True, timeout=900, cwd=str(ROOT), env=env)


# -- a CUDA build: graded right --------------------------------------------------------------

@pytest.mark.slow
def test_a_cuda_build_of_torch_grades_the_class_right(base):
    python, env = _venv(base, CUDA_STANDIN, "cuda_standin")
    # the stand-in is honest: importing torch reserves what a CUDA build reserves, and the third
    # edition's constant bound (RLIMIT_AS 3 GiB per process) leaves such a process no room at all
    probe = subprocess.run([python, "-c", (
        "import resource, torch\n"
        "vm = [int(l.split()[1]) * 1024 for l in open('/proc/self/status') if l.startswith('VmSize')][0]\n"
        "print('vm', vm)\n"
        "resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))\n"
        "try:\n    bytearray(16 * 2**20)\n    print('room')\nexcept MemoryError:\n    print('no room')\n")],
        capture_output=True, text=True, env=env, timeout=300, check=True).stdout
    vm = int(re.search(r"vm (\d+)", probe).group(1))
    assert vm > 3 * 2**30 + 2**28, probe
    assert "no room" in probe, probe

    sub, out = base / "submitted", base / "grades"
    write_notebook(variant(SOLUTION), sub / "alice" / "scoring.ipynb")
    write_notebook(variant(RELEASED), sub / "bob" / "scoring.ipynb")
    proc = _grade(python, env, sub, out)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    data = json.loads((out / "lesson03_scoring" / "grades.json").read_text())
    rows = {r["student"]: r for r in data["results"]}
    alice = rows["alice"]
    assert alice["status"] == "ok" and (alice["total"], alice["max_total"]) == (POINTS.auto, POINTS.maximum), alice["notebooks"][0]["notes"]
    assert rows["bob"]["status"] == "ok" and rows["bob"]["total"] == 0  # the released stub: graded, not died
    bound = alice["notebooks"][0]["memory_bound"]
    start = int(re.search(r"(\d+) MB of address space at start", bound).group(1))
    assert start * 2**20 > CUDA_RESERVE, bound  # the bound was measured with the CUDA-sized import


# -- an unstartable sandbox: a loud stop, no grade -------------------------------------------

GRADE_FILES = ("grades.csv", "grades.json", "lms_grades.csv", "feedback")


@pytest.mark.slow
def test_a_sandbox_that_dies_while_starting_stops_the_run_and_writes_no_grade(base):
    python, env = _venv(base, BROKEN_START, "broken_start")
    sub, out = base / "submitted", base / "grades"
    write_notebook(variant(SOLUTION), sub / "alice" / "scoring.ipynb")
    previous = out / "lesson03_scoring" / "grades.csv"
    previous.parent.mkdir(parents=True)
    previous.write_text("student,total\nalice,15\n")  # the last good run's: neither replaced nor moved
    proc = _grade(python, env, sub, out)
    assert proc.returncode != 0, proc.stdout[-2000:]
    assert previous.read_text() == "student,total\nalice,15\n"
    left = sorted(p.name for p in out.rglob("*"))
    assert left == ["grades.csv", "lesson03_scoring"], left  # nothing written, nothing rotated
    message = proc.stderr
    assert "no grade file was written" in message, message
    assert "could not start" in message and "stand-in: this environment's libraries are broken" in message, message
    assert "Fix:" in message, message
    assert "while running your code" not in proc.stdout + proc.stderr
    assert "alice" not in proc.stdout  # nobody was graded


@pytest.mark.slow
def test_check_says_the_environment_is_broken_not_the_learners_checks(base):
    python, env = _venv(base, BROKEN_START, "broken_start")
    learner = write_notebook(variant(RELEASED), base / "learner" / "scoring.ipynb")
    proc = subprocess.run([python, "-m", "course_grader", "--check", str(learner)], capture_output=True, text=True,
                          timeout=600, cwd=str(base), env=env)
    assert proc.returncode not in (0, 1), proc.stdout[-2000:]  # neither "passed" nor "your checks failed"
    assert "NOT checked" in proc.stderr and "not a problem of your notebook" in proc.stderr, proc.stderr
    assert "stand-in: this environment's libraries are broken" in proc.stderr, proc.stderr
    assert "scripts/setup.sh" in proc.stderr
    assert "FAIL" not in proc.stdout and "while running your code" not in proc.stdout + proc.stderr


def _isolated() -> bool:
    from course_grader.sandbox import isolation_status
    return isolation_status()[0]


def test_a_fork_server_that_cannot_start_fails_loudly_without_a_second_mode(monkeypatch):
    """The third edition fell back to a one-off interpreter (no memory or pids cgroup) when the
    fork server failed; now the failure is the answer."""
    if not _isolated():
        pytest.skip("bubblewrap unavailable")
    from course_grader import sandbox as sandbox_mod
    from course_grader.sandbox import Sandbox, SandboxConfig, SandboxStartFailed
    real = sandbox_mod.bwrap_argv

    def broken_fork_server(*, zygote: bool, tmp_bytes: int = 64 * 2**20) -> list[str]:
        if zygote:
            return ["/bin/sh", "-c", "echo 'stand-in: the fork server cannot start' >&2; exit 7", "sh"]
        return real(zygote=zygote, tmp_bytes=tmp_bytes)

    monkeypatch.setattr(sandbox_mod, "bwrap_argv", broken_fork_server)
    sb = Sandbox(SandboxConfig(tmp_bytes=40 * 2**20))  # a fork server of its own (not a cached one)
    with pytest.raises(SandboxStartFailed) as caught:
        sb.start()
    sb.close()
    assert "fork server did not start (exit code 7)" in str(caught.value), caught.value
    assert "stand-in: the fork server cannot start" in str(caught.value)
    # a learner graded meanwhile gets a grader error (ours), never "sandbox died" (theirs)
    from course_grader.notebook import Assignment
    from course_grader.runner import Status, grade_notebook
    source = Assignment.load(SOLUTION.parent).notebooks["scoring"]
    res = grade_notebook(source, SOLUTION, config=SandboxConfig(tmp_bytes=40 * 2**20), student="scoring")
    assert res.status == Status.GRADER_ERROR, (res.status, res.notes)
    assert any("could not start" in n for n in res.notes) and not any("your code" in n for n in res.notes), res.notes


# -- a learner fills the grader's disk ---------------------------------------------------------

RESERVE_ON_OUR_FDS = '''
import ctypes, os, stat
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
for fd in range(64):
    try:
        st = os.fstat(fd)
    except OSError:
        continue
    rc = libc.fallocate(fd, 1, 0, 128 * 2**20)   # FALLOC_FL_KEEP_SIZE: bounded by no RLIMIT_FSIZE
    print("fd", fd, "regular" if stat.S_ISREG(os.fstat(fd).st_mode) else "other", rc,
          os.fstat(fd).st_blocks * 512)
'''


def test_a_learner_cannot_reserve_the_graders_disk_through_its_output(tmp_path, monkeypatch):
    if not _isolated():
        pytest.skip("bubblewrap unavailable")
    from course_grader.sandbox import Sandbox, SandboxConfig
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the grader's files would be
    sb = Sandbox(SandboxConfig())
    sb.start()
    try:
        reply = sb.request({"op": "exec", "cell": 1, "source": RESERVE_ON_OUR_FDS}, 60, "x")
    finally:
        sb.close()
    lines = [line.split() for line in reply["stdout"].splitlines() if line.startswith("fd ")]
    assert any(fd == "2" for _, fd, *_ in lines), reply
    reserved = [(fd, kind, rc, blocks) for _, fd, kind, rc, blocks in lines if rc == "0" and int(blocks) >= 2**27]
    assert not reserved, f"the learner reserved 128 MB on a file of the grader: {reserved}"
    assert not any(kind == "regular" for _, _, kind, _, _ in lines), lines  # no file of the grader at all


# -- --memory-mb is the learner's own bound ----------------------------------------------------

HOLD_MEMFD = '''
import os
_fds, _chunk, _held = [], b"x" * (16 * 2**20), 0
while _held < {mb} * 2**20:
    if _held % (48 * 2**20) == 0:   # files of 48 MB each: under RLIMIT_FSIZE
        _fds.append(os.memfd_create("hold"))
    os.write(_fds[-1], _chunk)   # pages of a file: never mapped, invisible to RLIMIT_AS
    _held += len(_chunk)
print("HELD", _held // 2**20)
'''


def _memory_cgroup_here() -> bool:
    return os.geteuid() == 0 and (os.access("/sys/fs/cgroup/memory", os.W_OK)
                                  or os.access("/sys/fs/cgroup/cgroup.procs", os.W_OK))


@pytest.mark.slow
def test_memory_mb_is_the_learners_own_bound_memfd_included():
    if not _isolated():
        pytest.skip("bubblewrap unavailable")
    if not _memory_cgroup_here():
        pytest.skip("no memory cgroup here (not root): --memory-mb bounds each process's address space only, "
                    "as --help says")
    from course_grader.sandbox import Sandbox, SandboxConfig, SandboxDied
    cfg = SandboxConfig(memory_bytes=1024 * 2**20, cell_timeout=120)

    bounds = []

    def hold(mb: int) -> str:
        sb = Sandbox(cfg)
        sb.start()
        bounds.append(sb.memory_bound)
        try:
            return sb.request({"op": "exec", "cell": 1, "source": HOLD_MEMFD.format(mb=mb)}, 120, "x")["stdout"]
        except SandboxDied as exc:
            return f"died: {exc}"
        finally:
            sb.close()

    assert "HELD 768" in hold(768)  # within the allowance
    over = hold(1536)  # the third edition's cgroup (1024 MB + the fork server's 1 GB) let this through
    assert "HELD" not in over, over
    from course_grader.sandbox import fork_server_pids
    assert fork_server_pids(), "the OOM killer took the learner, not the fork server"
    assert "HELD 768" in hold(768)  # the next learner is graded as before
    assert bounds[0].startswith("memory cgroup: 1024 MB for all of your processes"), bounds[0]  # recorded as such


# -- the real CUDA build (system tier: ~6 GB from PyPI) ------------------------------------------

@pytest.mark.system
@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("COURSE_TEST_CUDA_DOWNLOAD") != "1",
                    reason="downloads about 3 GB of CUDA wheels from PyPI: run with COURSE_TEST_CUDA_DOWNLOAD=1 "
                           "(the stand-in test above reserves the same address space at import on every run)")
def test_the_real_cuda_build_from_pypi_grades_the_class_right(base):
    """torch==2.13.0 from PyPI (the CUDA build, with its nvidia-* wheels) installed into a folder
    of the temporary environment that comes before this environment's site-packages, so the
    grader and its sandboxes import it; everything is removed afterwards with ``base``."""
    python, env = _venv(base, "", "nothing")
    cuda_dir = base / "cuda" / "site-packages"  # a site-packages folder: the sandbox binds it read-only
    pip_env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    pip_env.update(PIP_CONFIG_FILE="/dev/null", TMPDIR=str(base))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(cuda_dir),
                    "torch==2.13.0"], check=True, env=pip_env, timeout=3600)
    deps = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target", str(cuda_dir),
                           "--dry-run", "--report", "-", "torch==2.13.0"], capture_output=True, text=True,
                          env=pip_env, timeout=3600)
    nvidia = [item["metadata"]["name"] + "==" + item["metadata"]["version"]
              for item in json.loads(deps.stdout or "{}").get("install", [])
              if item["metadata"]["name"].startswith(("nvidia-", "triton", "cuda-"))]
    if nvidia:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(cuda_dir),
                        *nvidia], check=True, env=pip_env, timeout=3600)
    pyver = f"python{sys.version_info.major}.{sys.version_info.minor}"
    pth = base / "venv" / "lib" / pyver / "site-packages" / "course_deps.pth"
    pth.write_text(f"{cuda_dir}\n" + pth.read_text())  # the CUDA build first
    cuda = subprocess.run([python, "-c", "import torch; print(torch.version.cuda)"], capture_output=True,
                          text=True, env=env, check=True, timeout=600).stdout.strip()
    assert cuda and cuda != "None", "the build installed is not a CUDA build"
    sub, out = base / "submitted", base / "grades"
    write_notebook(variant(SOLUTION), sub / "alice" / "scoring.ipynb")
    proc = _grade(python, env, sub, out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = json.loads((out / "lesson03_scoring" / "grades.json").read_text())["results"][0]
    assert row["status"] == "ok" and row["total"] == POINTS.auto and row["max_total"] == POINTS.maximum, row["notebooks"][0]["notes"]
