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
_PR_SET_DUMPABLE = 4
#: Environment variable through which ``course-grade --jobs N`` gives each worker its own
#: unprivileged uid for its sandboxes (root mode).
SANDBOX_UID_ENV = "COURSE_GRADE_SANDBOX_UID"


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
        fork_server: start sandboxes as forks of a pre-imported "zygote" process (one per
            grader process; ~0.1 s instead of a torch import per sandbox). Each fork sets
            its limits and drops privileges before any learner code; no learner code ever
            runs in the zygote. False: a fresh ``python -I`` per sandbox.
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
    fork_server: bool = True

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


def make_undumpable() -> None:
    """Forbid ptrace / ``/proc/PID/mem`` access to this process by same-uid processes
    (useful when the grader does not run as root and sandboxes share its uid)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass


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
        live = {pid: st for pid, st in descendants(me, table).items()
                if pid not in exclude and (st != "Z" or table[pid][0] == me)}
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


class ForkServer:
    """The zygote: a sandbox interpreter with everything imported, forking one sandbox per
    request (see ``sandbox_main.zygote``). One per grader process and privilege mode."""

    def __init__(self, mode: str, uid: int | None, gid: int | None, threads: int, startup_timeout: float) -> None:
        import json
        import socket
        self.mode = mode
        self.sock, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        cfg = {"sock_fd": child.fileno(), "sys_path": [_project_root()], "threads": threads}
        kwargs: dict[str, Any] = {}
        if mode == "spawn":
            kwargs = {"user": uid, "group": gid, "extra_groups": []}
        self.proc = subprocess.Popen(
            [sys.executable, "-I", str(Path(__file__).with_name("sandbox_main.py")), "--zygote", json.dumps(cfg)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/",
            env=_scrubbed_env("/", threads), pass_fds=[child.fileno()], start_new_session=True, **kwargs)
        child.close()
        self.sock.settimeout(startup_timeout)
        hello = json.loads(self.sock.recv(1 << 16) or b"{}")
        if not hello.get("ready"):
            raise OSError("the sandbox fork server did not start")
        self.sock.settimeout(30)

    def _ask(self, req: dict, fds: list[int] | None = None) -> dict:
        import json
        import socket
        data = json.dumps(req).encode()
        if fds:
            socket.send_fds(self.sock, [data], fds)
        else:
            self.sock.send(data)
        reply = self.sock.recv(1 << 16)
        if not reply:
            raise OSError("the sandbox fork server is gone")
        return json.loads(reply)

    def fork(self, job: dict, fds: list[int]) -> int:
        return int(self._ask({"op": "fork", **job}, fds)["pid"])

    def wait(self, pid: int, timeout: float) -> int | None | str:
        return self._ask({"op": "wait", "pid": pid, "timeout": timeout})["code"]

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        self.sock.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


_FORK_SERVERS: dict[tuple, ForkServer] = {}


def fork_server(mode: str, uid: int | None, gid: int | None, threads: int, startup_timeout: float) -> ForkServer:
    """The (lazily started) fork server of this process for a privilege mode."""
    key = (os.getpid(), mode, uid, threads)
    server = _FORK_SERVERS.get(key)
    if server is None or not server.alive:
        server = ForkServer(mode, uid, gid, threads, startup_timeout)
        _FORK_SERVERS[key] = server
    return server


def fork_server_pids() -> set[int]:
    """Pids of this process's fork servers (long-lived; not learner processes)."""
    return {srv.proc.pid for key, srv in _FORK_SERVERS.items() if key[0] == os.getpid() and srv.alive}


def _scrubbed_env(home: str, threads: int) -> dict[str, str]:
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8",
            "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
            "OMP_WAIT_POLICY": "PASSIVE", "MPLBACKEND": "Agg", "MPLCONFIGDIR": home, "COURSE_GRADING": "1"}


class Sandbox:
    """One sandbox process. Not thread-safe; one request at a time.

    Args:
        config: limits and policy.
    """

    def __init__(self, config: SandboxConfig) -> None:
        self.config = config
        self.proc: subprocess.Popen | None = None
        self.pid: int | None = None
        self.server: ForkServer | None = None
        self.req_fd: int | None = None
        self.resp_fd: int | None = None
        self.tmpdir: str | None = None
        self.dead_reason: str | None = None
        self.exit_code: int | None = None
        self._reaped = False
        self._buf = b""
        self.uid: int | None = None
        self.privilege_mode = "none"

    @staticmethod
    def prepare(config: SandboxConfig) -> None:
        """Start this process's fork server now (so it is not counted as a sandbox process)."""
        if config.fork_server:
            mode, uid, gid = Sandbox._mode(config)
            try:
                fork_server(mode, uid, gid, config.threads, config.startup_timeout)
            except OSError:
                pass

    @staticmethod
    def _mode(cfg: SandboxConfig) -> tuple[str, int | None, int | None]:
        if os.geteuid() != 0 or cfg.drop_privileges == "never":
            return "none", None, None
        uid, gid = _user_ids(cfg.user)
        slot_uid = os.environ.get(SANDBOX_UID_ENV, "")
        if slot_uid.isdigit():  # parallel workers: one uid each, so sandboxes cannot ptrace each other
            uid = gid = int(slot_uid)
        if cfg.drop_privileges == "spawn" or (cfg.drop_privileges == "auto" and _can_spawn_as(cfg.user)):
            return "spawn", uid, gid
        return "late", uid, gid

    # lifecycle ------------------------------------------------------------------------
    def start(self) -> None:
        import json
        cfg = self.config
        self.tmpdir = tempfile.mkdtemp(prefix="course-grade-")
        mode, run_uid, run_gid = self._mode(cfg)
        if run_uid is not None and run_gid is not None:
            os.chown(self.tmpdir, run_uid, run_gid)
        os.chmod(self.tmpdir, 0o700)
        self.privilege_mode = mode
        home = os.path.join(self.tmpdir, "home")
        os.mkdir(home)
        if run_uid is not None and run_gid is not None:
            os.chown(home, run_uid, run_gid)
        job: dict[str, Any] = {
            "memory_bytes": cfg.memory_bytes, "file_size_bytes": cfg.file_size_bytes,
            "cpu_seconds": cfg.cpu_seconds, "threads": cfg.threads, "sys_path": [_project_root()],
            "drop": mode, "uid": run_uid, "gid": run_gid,
            "max_processes": cfg.max_processes if run_uid is not None else None,
            "cwd": home, "env": _scrubbed_env(home, cfg.threads),
        }
        log_path = os.path.join(self.tmpdir, "sandbox.log")
        log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        if run_uid is not None and run_gid is not None:
            os.fchown(log_fd, run_uid, run_gid)
        try:
            server = None
            if cfg.fork_server:
                try:
                    server = fork_server(mode, run_uid, run_gid, cfg.threads, cfg.startup_timeout)
                except OSError:
                    server = None  # fall back to a fresh interpreter
            if server is not None:
                req_r, req_w = os.pipe()
                resp_r, resp_w = os.pipe()
                try:
                    self.pid = server.fork(job, [req_r, resp_w, log_fd])
                    self.server = server
                finally:
                    os.close(req_r)
                    os.close(resp_w)
                self.req_fd, self.resp_fd = req_w, resp_r
            else:
                kwargs: dict[str, Any] = {}
                if mode == "spawn":
                    kwargs = {"user": run_uid, "group": run_gid, "extra_groups": []}
                script = str(Path(__file__).with_name("sandbox_main.py"))
                self.proc = subprocess.Popen(
                    [sys.executable, "-I", script, json.dumps(job)],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log_fd, cwd=home, env=job["env"],
                    start_new_session=True, close_fds=True, **kwargs)
                self.pid = self.proc.pid
                assert self.proc.stdin is not None and self.proc.stdout is not None
                self.req_fd, self.resp_fd = self.proc.stdin.fileno(), self.proc.stdout.fileno()
        finally:
            os.close(log_fd)
        hello = self._receive(time.monotonic() + cfg.startup_timeout, "starting the sandbox")
        if not isinstance(hello, dict) or not hello.get("ready"):
            self.kill()
            raise SandboxDied("the sandbox did not start correctly")
        self.uid = hello.get("uid")

    @property
    def alive(self) -> bool:
        if self.pid is None or self.dead_reason is not None:
            return False
        if self.proc is not None:
            return self.proc.poll() is None
        return True

    def _exit_code(self, timeout: float) -> int | None:
        """Exit code if the process has ended within ``timeout`` seconds (reaps it)."""
        if self._reaped:
            return self.exit_code
        if self.proc is not None:
            try:
                self.exit_code = self.proc.wait(timeout=timeout)
                self._reaped = True
            except subprocess.TimeoutExpired:
                return None
            return self.exit_code
        if self.server is not None and self.pid is not None:
            try:
                code = self.server.wait(self.pid, timeout)
            except (OSError, ValueError):
                code = "gone"
            if code is None:
                return None
            self._reaped = True
            self.exit_code = code if isinstance(code, int) else None
        return self.exit_code

    def kill(self) -> None:
        """Kill the sandbox's process group (descendants are swept by the caller)."""
        if self.pid is None:
            return
        for target in (lambda: os.killpg(self.pid, signal.SIGKILL), lambda: os.kill(self.pid, signal.SIGKILL)):
            try:
                if not self._reaped:
                    target()
            except (ProcessLookupError, PermissionError):
                pass
        self._exit_code(10)
        if self.proc is not None:
            for stream in (self.proc.stdin, self.proc.stdout):
                try:
                    if stream:
                        stream.close()
                except OSError:
                    pass
        else:
            for fd in (self.req_fd, self.resp_fd):
                if fd is not None:
                    try:
                        os.close(fd)
                    except OSError:
                        pass
        self.req_fd = self.resp_fd = None

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
        if not self.alive or self.req_fd is None:
            raise SandboxDied(self.dead_reason or "the sandbox is not running")
        try:
            protocol.write_message(self.req_fd, message)
        except (BrokenPipeError, OSError):
            self._died(what)
        return self._receive(time.monotonic() + timeout, what, timeout)

    def _died(self, what: str) -> None:
        code = self._exit_code(2)
        self.kill()
        if code is None:
            code = self.exit_code
        tail = self.log_tail()
        hint = ""
        if "MemoryError" in tail or "std::bad_alloc" in tail:
            hint = " (out of memory?)"
        elif "Fatal Python error" in tail:
            hint = " (" + tail[tail.rfind("Fatal Python error"):].splitlines()[0][:120] + ")"
        status = describe_exit(code) if code is not None else "exit status unknown"
        self.dead_reason = (f"the sandbox process died ({status}){hint} while running your code: "
                            f"{what}")
        raise SandboxDied(self.dead_reason)

    def _receive(self, deadline: float, what: str, timeout: float | None = None) -> Any:
        fd = self.resp_fd
        assert fd is not None

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
