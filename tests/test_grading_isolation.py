"""Unit tests of the grader's isolation and hardening (issue 9): what one sandbox can see
and do, the trusted side's test namespace, bounded strings, and safe submission reading.
The class-level attacks, as root and as an ordinary user, are in test_grading_attacks.py."""

from __future__ import annotations

import builtins
import os
import sys
import time
from pathlib import Path

import pytest

from course_grader import protocol
from course_grader.rpc import Session
from course_grader.runner import SubmissionRefused, read_submission
from course_grader.sandbox import (BWRAP_ENV, IsolationUnavailable, Sandbox, SandboxConfig, descendants,
                                        isolation_status, require_isolation)

pytestmark = [pytest.mark.sandbox]

ROOT = Path(__file__).resolve().parents[1]
# A checkout under /tmp (a clone made there) has its library bound read-only into the sandbox's own
# /tmp, so that /tmp holds the path's first folder, and nothing else.
_UNDER_TMP = sorted({Path(p).relative_to("/tmp").parts[0] for p in (str(ROOT), sys.prefix)
                     if Path(p).is_relative_to("/tmp")})
SOLUTION = ROOT / "solutions" / "lesson03_scoring" / "scoring.ipynb"


# -- bounded strings ------------------------------------------------------------------------

def test_safe_text_escapes_surrogates_caps_and_refuses_non_strings():
    text = protocol.safe_text("a\ud800b\udfff")
    text.encode("utf-8")  # would raise on a lone surrogate
    assert text == "a\\ud800b\\udfff"
    capped = protocol.safe_text("x" * 5000, 100)
    assert capped.startswith("x" * 100) and "4900 more characters cut" in capped and len(capped) < 140
    assert protocol.safe_text(b"bytes") == "" and protocol.safe_text(None) == ""

    class Sneaky(str):
        def __str__(self):
            return "forged"
    assert protocol.safe_text(Sneaky("real")) == "real"
    assert protocol.safe_text("a\x00b") == "ab"


# -- reading a submission ---------------------------------------------------------------------

def _folder(tmp_path: Path) -> Path:
    sub = tmp_path / "submitted"
    (sub / "alice").mkdir(parents=True)
    (sub / "alice" / "scoring.ipynb").write_text('{"cells": []}')
    return sub


def test_read_submission_accepts_a_regular_file(tmp_path):
    sub = _folder(tmp_path)
    assert read_submission(sub / "alice" / "scoring.ipynb", "alice") == b'{"cells": []}'
    (sub / "bob.ipynb").write_text("{}")
    assert read_submission(sub / "bob.ipynb", "bob") == b"{}"


@pytest.mark.parametrize("kind", ["file-symlink", "folder-symlink", "fifo", "dev-zero", "too-big", "nested-link"])
def test_read_submission_refuses_links_special_files_and_huge_files(tmp_path, kind):
    sub = _folder(tmp_path)
    target = sub / "eve" / "scoring.ipynb"
    if kind == "folder-symlink":
        (sub / "eve").symlink_to(sub / "alice")
    elif kind == "nested-link":
        (sub / "eve").mkdir()
        (sub / "eve" / "lesson03_scoring").symlink_to(SOLUTION.parent)
        target = sub / "eve" / "lesson03_scoring" / "scoring.ipynb"
    else:
        (sub / "eve").mkdir()
        if kind == "file-symlink":
            target.symlink_to(SOLUTION)
        elif kind == "fifo":
            os.mkfifo(target)
        elif kind == "dev-zero":
            target.symlink_to("/dev/zero")
        else:
            target.write_bytes(b" " * 2048)
    start = time.monotonic()
    with pytest.raises(SubmissionRefused) as info:
        read_submission(target, "eve", max_bytes=1024)
    assert time.monotonic() - start < 5  # a FIFO never blocks the grader
    words = {"file-symlink": "symbolic link", "folder-symlink": "symbolic link", "nested-link": "symbolic link",
             "fifo": "not a regular file", "dev-zero": "symbolic link", "too-big": "accepted"}[kind]
    assert words in str(info.value)


# -- refusing without isolation ------------------------------------------------------------------

def test_missing_bubblewrap_is_refused_loudly_unless_the_teacher_opts_out(tmp_path, monkeypatch, capsys):
    from course_grader import cli
    monkeypatch.setenv(BWRAP_ENV, str(tmp_path / "no-such-bwrap"))
    try:
        ok, why = isolation_status(refresh=True)
        assert not ok and "apt-get install bubblewrap" in why and "--unsafe-no-sandbox" in why
        with pytest.raises(IsolationUnavailable):
            require_isolation(SandboxConfig())
        require_isolation(SandboxConfig(isolation="none"))  # the explicit opt-out
        sub = tmp_path / "submitted"
        (sub / "alice").mkdir(parents=True)
        (sub / "alice" / "scoring.ipynb").write_bytes(SOLUTION.read_bytes())
        out = tmp_path / "grades"
        assert cli.main(["grade", "lesson03_scoring", str(sub), "--out", str(out), "--jobs", "1", "--quiet"]) == 2
        assert "bubblewrap" in capsys.readouterr().err
        assert not list(out.rglob("grades.csv"))
        assert cli.main(["grade", "lesson03_scoring", str(sub), "--out", str(out), "--jobs", "1", "--quiet",
                         "--unsafe-no-sandbox"]) == 0
        assert "WITHOUT a sandbox" in capsys.readouterr().err
        (book,) = list(out.rglob("grades.json"))
        assert "Graded WITHOUT operating-system isolation" in book.read_text()
    finally:
        monkeypatch.delenv(BWRAP_ENV)
        isolation_status(refresh=True)


# -- one sandbox -------------------------------------------------------------------------------

needs_bwrap = pytest.mark.skipif(not isolation_status()[0], reason="bubblewrap unavailable: "
                                 + isolation_status()[1][:200])


def _run(session: Session, source: str) -> str:
    run = session.exec_cell(1, source)
    assert run.status == "ok", (run.message, run.traceback)
    return run.stdout


@pytest.fixture
def session():
    s = Session(SandboxConfig(cell_timeout=30, call_timeout=20), trusted_imports="import torch")
    s.start()
    yield s
    s.close()


@needs_bwrap
def test_the_sandbox_sees_only_libraries_and_its_own_empty_tmp(session):
    out = _run(session, f"""
import os, sys
print("proc", os.listdir("/proc"))
print("tmp", sorted(os.listdir("/tmp")), sorted(os.listdir("/var/tmp")), sorted(os.listdir("/dev/shm")))
print("root", sorted(os.listdir({str(ROOT)!r})))
print("home", os.environ["HOME"], sorted(os.environ))
for d in ("/tmp", "/var/tmp", "/dev/shm"):
    open(d + "/left-behind", "w").write("x")
""")
    assert "proc []" in out
    assert f"tmp {_UNDER_TMP} [] []" in out
    seen = out.split("root ")[1].splitlines()[0]
    assert "solutions" not in seen and "tests" not in seen and "course_lib" in seen
    assert "home /tmp" in out
    session.close()
    again = Session(SandboxConfig(cell_timeout=30, call_timeout=20))
    again.start()
    try:
        assert f"tmp {_UNDER_TMP} [] []" in _run(again, 'import os; print("tmp", os.listdir("/tmp"), os.listdir("/var/tmp"), '
                                             'os.listdir("/dev/shm"))')
    finally:
        again.close()
    assert not Path("/tmp/left-behind").exists() and not Path("/var/tmp/left-behind").exists()


@needs_bwrap
def test_the_sandbox_has_no_privilege_and_its_limits(session):
    cfg = session.config
    out = _run(session, """
import ctypes, os, resource
libc = ctypes.CDLL(None, use_errno=True)
print("capbset_sys_admin", libc.prctl(23, 21, 0, 0, 0))   # PR_CAPBSET_READ, CAP_SYS_ADMIN
print("no_new_privs", libc.prctl(39, 0, 0, 0, 0))           # PR_GET_NO_NEW_PRIVS
print("mount", libc.mount(b"tmpfs", b"/mnt", b"tmpfs", 0, None))
print("unshare_ns", libc.unshare(0x00020000))
print("limits", [resource.getrlimit(r)[0] for r in (resource.RLIMIT_AS, resource.RLIMIT_FSIZE,
      resource.RLIMIT_NOFILE, resource.RLIMIT_NPROC, resource.RLIMIT_CORE)])
import socket
try:
    socket.create_connection(("127.0.0.1", 22), timeout=1); print("net open")
except OSError:
    print("net closed")
libc.syscall.restype = ctypes.c_long
print("keyctl", libc.syscall(250, 0, -4, 0, 0, 0), ctypes.get_errno())      # KEYCTL_GET_KEYRING_ID, user keyring
print("ptrace", libc.syscall(101, 0, 0, 0, 0), ctypes.get_errno())          # PTRACE_TRACEME
print("newuser", libc.unshare(0x10000000), libc.syscall(56, 0x10000000 | 17, 0, 0, 0, 0))
import threading, torch
box = []
t = threading.Thread(target=lambda: box.append(1)); t.start(); t.join()
torch.set_num_threads(2)
print("threads", box, float(torch.ones(1000, 1000).sum()))
if os.fork() == 0:
    os._exit(0)
print("fork", os.wait()[1])
""")
    assert "capbset_sys_admin 0" in out and "no_new_privs 1" in out
    assert "mount -1" in out and "unshare_ns -1" in out and "net closed" in out
    if os.uname().machine == "x86_64":  # the seccomp filter (system call numbers of x86_64 above)
        assert "keyctl -1 1" in out and "ptrace -1 1" in out and "newuser -1 -1" in out
    assert "threads [1] 1000000.0" in out and "fork 0" in out  # threads and fork still work
    # RLIMIT_AS: what the fork server holds with torch imported (measured) + the learner's allowance
    address_space = session.sandbox.address_space_bytes
    assert address_space > cfg.memory_bytes
    assert (f"limits [{address_space}, {cfg.file_size_bytes}, {cfg.max_open_files}, {cfg.max_processes}, 0]"
            in out)


@needs_bwrap
def test_killing_a_sandbox_kills_everything_it_started():
    sb = Sandbox(SandboxConfig())
    sb.start()
    try:
        reply = sb.request({"op": "exec", "cell": 1, "source": """
import os, time
for _ in range(3):
    if os.fork() == 0:
        os.setsid()
        time.sleep(300)
        os._exit(0)
"""}, 30, "forking")
        assert reply["error"] is None
        assert sb.host_pid is not None
        inside = descendants(sb.host_pid)
        assert len(inside) >= 3
        sb.kill()
        time.sleep(0.5)
        alive = [p for p in [sb.host_pid, *inside] if Path(f"/proc/{p}").exists()
                 and Path(f"/proc/{p}/stat").read_text().split(")")[-1].split()[0] != "Z"]
        assert alive == []
    finally:
        sb.close()


# -- the trusted side ------------------------------------------------------------------------

@needs_bwrap
def test_test_namespace_uses_the_graders_builtins_and_modules(session):
    _run(session, """
import types, numpy as my_np
def range(*a):
    return []
def len(*a):
    return 0
def isinstance(*a):
    return True
evil = types.ModuleType("course_grader.__main__")
fake = types.ModuleType("torch.utils.bottleneck.__main__")
answer = 41
""")
    ns = session.namespace()
    for name in ("range", "len", "isinstance", "evil", "fake"):
        assert name not in ns
    assert ns["__builtins__"]["range"] is builtins.range
    assert ns["__builtins__"] is not vars(builtins)  # a fresh copy per test cell
    import numpy
    assert ns["my_np"] is numpy and ns["answer"] == 41
    exec("total = sum(1 for _ in range(3)); assert len([1, 2]) == 2 and not isinstance(1, str)", ns)
    assert ns["total"] == 3


@needs_bwrap
def test_restarts_count_against_the_submission_budget():
    s = Session(SandboxConfig(cell_timeout=30, call_timeout=20, submission_timeout=4))
    s.start()
    s.deadline = time.monotonic() + 4
    try:
        start = time.monotonic()
        first = s.exec_cell(1, "while True:\n    pass")
        assert first.status == "timeout"
        second = s.exec_cell(2, "x = 1")  # no restart: the budget is spent
        assert second.status in ("skipped", "timeout")
        assert time.monotonic() - start < 15
    finally:
        s.close()


@needs_bwrap
def test_reference_imports_are_seen_however_made(session):
    assert session.loaded_reference() == []
    _run(session, "from course_grader.checks import assert_shape\nimport course_grader.checks as ck")
    assert session.loaded_reference() == []  # the checks toolkit is not the reference
    _run(session, "import sys, importlib\n_m = importlib.import_module('course_lib.masking')\n"
                  "del sys.modules['course_lib.masking']")
    assert "course_lib.masking" in session.loaded_reference()


@needs_bwrap
def test_ipython_syntax_is_transformed_inside_the_sandbox(session):
    assert "x is 3" in _run(session, "%%time\nx = 3\nprint('x is', x)")
    assert "y is 1" in _run(session, "!echo hello\n%matplotlib inline\ny = 1\nprint('y is', y)")


@needs_bwrap
def test_a_fork_bomb_is_capped():
    """RLIMIT_NPROC caps an ordinary account's sandbox; root's processes are exempt from it,
    so as root a pids cgroup per fork server does (where the kernel offers one)."""
    from course_grader import sandbox as sandbox_mod
    cfg = SandboxConfig(cell_timeout=60, call_timeout=20, max_processes=16)
    if os.geteuid() == 0 and sandbox_mod._pids_cgroup(1) is None:
        pytest.skip("running as root without a writable pids cgroup: nothing can cap the process count")
    sandbox_mod._remove_cgroups()
    s = Session(cfg)
    s.start()
    try:
        out = _run(s, """
import os, time
started = 0
for _ in range(200):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    started += 1
print("started", started)
""")
        started = int(out.split("started ")[1].split()[0])
        assert started < sandbox_mod._max_tasks(cfg), out
    finally:
        s.close()
