"""The sandbox subprocess that runs learner code, and process hygiene around it.

Layered defences (see docs/GRADING.md):

* a fresh interpreter (``python -I``) in a private temporary directory, with a scrubbed
  environment and ``start_new_session=True``;
* resource limits: address space, file size, CPU time, no core dumps; wall-clock
  timeouts per cell and per call, enforced by the grader (it kills the sandbox);
* when the grader runs as root, the sandbox runs as an unprivileged user (``nobody``)
  and owns only its temporary directory. If that user can execute the interpreter it is
  started directly with ``subprocess``' ``user=``/``group=``/``extra_groups=[]``;
  otherwise (an interpreter under ``/root``) the sandbox imports its libraries first and
  then switches user before any learner code runs;
* the grader makes itself a child subreaper, so processes that the learner double-forks
  and detaches are re-parented to it, and :func:`kill_descendants` kills every one of
  them (walking ``/proc``) before any result is written.
"""

from __future__ import annotations

import ctypes
import os
import pwd
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from course_lib.grading import protocol

__all__ = ["SandboxConfig", "Sandbox", "SandboxDied", "SandboxTimeout", "set_child_subreaper",
           "descendants", "kill_descendants"]

_PR_SET_CHILD_SUBREAPER = 36


@dataclass
class SandboxConfig:
    """Limits and policy of one sandbox.

    Attributes:
        cell_timeout: wall seconds for one learner cell.
        call_timeout: wall seconds for one call from a test into learner code.
        startup_timeout: wall seconds for the sandbox to start (imports torch).
        memory_bytes: RLIMIT_AS of the sandbox (torch imports within ~1 GB).
        file_size_bytes: RLIMIT_FSIZE (largest file the learner may write).
        cpu_seconds: RLIMIT_CPU for the whole sandbox process.
        max_processes: RLIMIT_NPROC for the unprivileged user (root mode only).
        threads: torch / OpenMP threads inside the sandbox.
        user: unprivileged user to run as when the grader is root.
        drop_privileges: "auto" (spawn as ``user`` if it can run the interpreter, else
            switch user inside the sandbox after imports), "spawn", "late" or "never".
        max_restarts: how many times a dead sandbox is restarted for the remaining cells.
        submission_timeout: wall seconds for grading one notebook; later tests fail.
    """

    cell_timeout: float = 30.0
    call_timeout: float = 10.0
    startup_timeout: float = 90.0
    memory_bytes: int = 3 * 2**30
    file_size_bytes: int = 64 * 2**20
    cpu_seconds: int = 600
    max_processes: int = 256
    threads: int = 1
    user: str = "nobody"
    drop_privileges: str = "auto"
    max_restarts: int = 1
    submission_timeout: float = 600.0

    def to_dict(self) -> dict:
        return asdict(self)


class SandboxDied(Exception):
    """The sandbox process is gone; the message is meant for the learner."""

    grader_fatal = True


class SandboxTimeout(SandboxDied):
    """Learner code ran past its wall-clock limit (the sandbox was killed)."""


# -- process hygiene --------------------------------------------------------------------

def set_child_subreaper() -> bool:
    """Make this process adopt orphaned descendants (Linux ``PR_SET_CHILD_SUBREAPER``)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _process_table() -> dict[int, tuple[int, str]]:
    table: dict[int, tuple[int, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                data = fh.read().decode("utf-8", "replace")
        except OSError:
            continue
        rest = data[data.rfind(")") + 2:].split()
        if len(rest) >= 2:
            table[int(entry)] = (int(rest[1]), rest[0])
    return table


def descendants(root: int | None = None, table: dict[int, tuple[int, str]] | None = None) -> dict[int, str]:
    """All descendants of ``root`` (default: this process) as {pid: state}."""
    root = os.getpid() if root is None else root
    table = _process_table() if table is None else table
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    out: dict[int, str] = {}
    stack = list(children.get(root, []))
    while stack:
        pid = stack.pop()
        if pid in out:
            continue
        out[pid] = table[pid][1]
        stack.extend(children.get(pid, []))
    return out


def kill_descendants(exclude: frozenset[int] | set[int] = frozenset(), rounds: int = 200) -> int:
    """SIGKILL every descendant of this process not in ``exclude``; reap the zombies.

    Repeats until none is left (a process may fork while we look). Returns how many
    processes were killed.
    """
    me = os.getpid()
    killed: set[int] = set()
    for _ in range(rounds):
        table = _process_table()
        live = {pid: st for pid, st in descendants(me, table).items() if pid not in exclude}
        if not live:
            return len(killed)
        for pid, state in live.items():
            if state != "Z":
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.add(pid)
                except ProcessLookupError:
                    pass
        for pid in live:
            if table.get(pid, (0, ""))[0] == me:
                try:
                    os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    pass
        time.sleep(0.005)
    return len(killed)


# -- the sandbox ---------------------------------------------------------------------------

_SPAWN_PROBE: dict[tuple[str, str], bool] = {}


def _user_ids(name: str) -> tuple[int, int]:
    entry = pwd.getpwnam(name)
    return entry.pw_uid, entry.pw_gid


def _can_spawn_as(user: str) -> bool:
    """Can ``user`` start this interpreter (e.g. not if it lives under /root)?"""
    key = (sys.executable, user)
    if key not in _SPAWN_PROBE:
        uid, gid = _user_ids(user)
        try:
            res = subprocess.run([sys.executable, "-I", "-c", "import torch"], user=uid, group=gid,
                                 extra_groups=[], cwd="/", capture_output=True, timeout=60,
                                 env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"})
            _SPAWN_PROBE[key] = res.returncode == 0
        except (OSError, subprocess.SubprocessError):
            _SPAWN_PROBE[key] = False
    return _SPAWN_PROBE[key]


def _project_root() -> str:
    return str(Path(__file__).resolve().parents[2])


def describe_exit(returncode: int | None) -> str:
    """Human wording of a process exit status."""
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        extra = {"SIGKILL": "killed", "SIGSEGV": "segmentation fault", "SIGXCPU": "CPU time limit exceeded",
                 "SIGXFSZ": "file size limit exceeded", "SIGABRT": "aborted"}.get(name)
        return f"exit code {returncode}, {name}" + (f": {extra}" if extra else "")
    return f"exit code {returncode}"


class Sandbox:
    """One sandbox subprocess. Not thread-safe; one request at a time.

    Args:
        config: limits and policy.
    """

    def __init__(self, config: SandboxConfig) -> None:
        self.config = config
        self.proc: subprocess.Popen | None = None
        self.tmpdir: str | None = None
        self.dead_reason: str | None = None
        self._buf = b""
        self.uid: int | None = None
        self.privilege_mode = "none"

    # lifecycle ------------------------------------------------------------------------
    def start(self) -> None:
        cfg = self.config
        self.tmpdir = tempfile.mkdtemp(prefix="course-grade-")
        run_uid = run_gid = None
        mode = "none"
        if os.geteuid() == 0 and cfg.drop_privileges != "never":
            run_uid, run_gid = _user_ids(cfg.user)
            if cfg.drop_privileges == "spawn" or (cfg.drop_privileges == "auto" and _can_spawn_as(cfg.user)):
                mode = "spawn"
            else:
                mode = "late"
            os.chown(self.tmpdir, run_uid, run_gid)
        os.chmod(self.tmpdir, 0o700)
        self.privilege_mode = mode
        home = os.path.join(self.tmpdir, "home")
        os.mkdir(home)
        if run_uid is not None:
            os.chown(home, run_uid, run_gid)
        sandbox_cfg = {
            "memory_bytes": cfg.memory_bytes, "file_size_bytes": cfg.file_size_bytes,
            "cpu_seconds": cfg.cpu_seconds, "threads": cfg.threads, "sys_path": [_project_root()],
            "drop": mode, "uid": run_uid, "gid": run_gid,
            "max_processes": cfg.max_processes if run_uid is not None else None,
        }
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8",
               "OMP_NUM_THREADS": str(cfg.threads), "MKL_NUM_THREADS": str(cfg.threads),
               "OMP_WAIT_POLICY": "PASSIVE", "MPLBACKEND": "Agg", "MPLCONFIGDIR": home}
        log = open(os.path.join(self.tmpdir, "sandbox.log"), "wb")
        if run_uid is not None:
            os.fchown(log.fileno(), run_uid, run_gid)
        kwargs: dict[str, Any] = {}
        if mode == "spawn":
            kwargs = {"user": run_uid, "group": run_gid, "extra_groups": []}
        script = str(Path(__file__).with_name("sandbox_main.py"))
        import json
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", script, json.dumps(sandbox_cfg)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, cwd=home, env=env,
                start_new_session=True, close_fds=True, **kwargs)
        finally:
            log.close()
        hello = self._receive(time.monotonic() + cfg.startup_timeout, "starting the sandbox")
        if not isinstance(hello, dict) or not hello.get("ready"):
            self.kill()
            raise SandboxDied("the sandbox did not start correctly")
        self.uid = hello.get("uid")

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.dead_reason is None and self.proc.poll() is None

    def kill(self) -> None:
        """Kill the sandbox's process group (descendants are swept by the caller)."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.kill()
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream:
                    stream.close()
            except OSError:
                pass

    def close(self) -> None:
        """Kill the sandbox and remove its temporary directory."""
        self.kill()
        if self.tmpdir:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
            self.tmpdir = None

    def log_tail(self, limit: int = 400) -> str:
        if not self.tmpdir:
            return ""
        try:
            with open(os.path.join(self.tmpdir, "sandbox.log"), "rb") as fh:
                fh.seek(0, os.SEEK_END)
                size = fh.tell()
                fh.seek(max(0, size - limit))
                return fh.read().decode("utf-8", "replace")
        except OSError:
            return ""

    # requests -------------------------------------------------------------------------
    def request(self, message: dict, timeout: float, what: str) -> Any:
        """Send a request and wait for the reply (raw, before :func:`protocol.decode`).

        Raises:
            SandboxTimeout: no reply within ``timeout`` seconds (the sandbox is killed).
            SandboxDied: the sandbox exited or answered garbage (it is killed).
        """
        if not self.alive:
            raise SandboxDied(self.dead_reason or "the sandbox is not running")
        assert self.proc is not None and self.proc.stdin is not None
        try:
            protocol.write_message(self.proc.stdin.fileno(), message)
        except (BrokenPipeError, OSError):
            self._died(what)
        return self._receive(time.monotonic() + timeout, what, timeout)

    def _died(self, what: str) -> None:
        assert self.proc is not None
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass
        code = self.proc.poll()
        self.kill()
        tail = self.log_tail()
        hint = ""
        if "MemoryError" in tail or "std::bad_alloc" in tail:
            hint = " (out of memory?)"
        elif "Fatal Python error" in tail:
            hint = " (" + tail[tail.rfind("Fatal Python error"):].splitlines()[0][:120] + ")"
        self.dead_reason = (f"the sandbox process died ({describe_exit(code)}){hint} while running your code: "
                            f"{what}")
        raise SandboxDied(self.dead_reason)

    def _receive(self, deadline: float, what: str, timeout: float | None = None) -> Any:
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()

        def read_exact(n: int) -> bytes:
            while len(self._buf) < n:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self.kill()
                    limit = f"{timeout:g} s" if timeout is not None else "the time limit"
                    self.dead_reason = (f"your code did not finish within {limit} ({what}); "
                                        "the sandbox was stopped")
                    raise SandboxTimeout(self.dead_reason)
                ready, _, _ = select.select([fd], [], [], min(remaining, 1.0))
                if not ready:
                    continue
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    self._died(what)
                self._buf += chunk
            data, self._buf = self._buf[:n], self._buf[n:]
            return data

        try:
            size = protocol.parse_header(read_exact(protocol.header_size()))
            payload = read_exact(size)
            return protocol.unpack(payload)
        except protocol.ProtocolError as exc:
            self.kill()
            self.dead_reason = f"{exc} ({what})"
            raise SandboxDied(self.dead_reason) from None
