"""The sandbox that runs learner code, and process hygiene around it.

What a sandbox may see and do is stated in :mod:`course_grader.policy` (read it first);
this module carries it out on the grader's side:

* **bubblewrap** (``bwrap``, the one execution mode): the command line built from the
  policy (:func:`bwrap_argv`), the probe that says whether it works here and why not
  (:func:`isolation_status`, which also requires the policy's seccomp filter), and the uid it
  runs as when the grader is root;
* a per-grader **fork server** (a Python that imported torch once, itself inside bwrap)
  that forks one sandbox per submission (the fork's own namespaces, mounts, capability drop
  and filter are ``sandbox_main._isolate`` / ``_drop_capabilities``), in a pids and a memory
  cgroup where the grader can make them (:class:`ForkServer`). It is the one way learner code
  runs: a fork server that cannot start is :class:`SandboxStartFailed` (with its reason), never
  a silent second mode. Its memory and address space are measured once it is ready, and each
  learner's bound is that plus the learner's allowance (``--memory-mb``): any torch build fits;
* wall-clock timeouts per cell and per call, enforced here (the sandbox is killed);
* the grader makes itself a child subreaper and kills every descendant after each
  submission (:func:`kill_descendants`).

Where bubblewrap, user namespaces or the seccomp filter are missing, :func:`isolation_status`
says why, and the grader refuses unless the teacher asked for ``isolation="none"``
(``course-grade --unsafe-no-sandbox``: plainly unsafe, recorded in every learner's notes).
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

from course_grader import policy, protocol

__all__ = ["SandboxConfig", "Sandbox", "SandboxDied", "SandboxTimeout", "SandboxStartFailed", "IsolationUnavailable",
           "isolation_status", "require_isolation", "set_child_subreaper", "descendants", "kill_descendants"]

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
        memory_bytes: the learner's memory allowance (``--memory-mb``), over what the fork
            server holds once torch is imported (measured at start-up, so a CUDA build fits):
            the memory cgroup of all the learner's processes where one can be had, and
            RLIMIT_AS of each process (the fork server's address space + this).
        file_size_bytes: RLIMIT_FSIZE (largest file the learner may write).
        cpu_seconds: RLIMIT_CPU for the whole sandbox process.
        max_processes: RLIMIT_NPROC for the unprivileged user (root mode only).
        threads: torch / OpenMP threads inside the sandbox.
        user: unprivileged user to run as when the grader is root.
        max_restarts: how many times a dead sandbox is restarted for the remaining cells.
        submission_timeout: wall seconds for grading one notebook; later tests fail.
        isolation: "bwrap" (default and only execution mode: operating-system isolation
            with bubblewrap; the grader refuses to run learner code when it is unavailable)
            or "none" (``--unsafe-no-sandbox``: plainly unsafe, a child process with the
            grader's own rights and the limits above; recorded in every learner's notes).
        tmp_bytes: size of each private tmpfs (``/tmp`` = ``HOME``; ``/var/tmp`` and
            ``/dev/shm`` get a quarter each).
        max_open_files: RLIMIT_NOFILE of the sandbox.
        unsafe_reason: why ``isolation == "none"`` (recorded instead of the
            ``--unsafe-no-sandbox`` note when the teacher did not pass that flag, e.g. a
            learner's self-check on a machine without bubblewrap).
        grader_memory_bytes: memory limit of each trusted grading process (``RLIMIT_DATA``):
            what a test computes on a learner's result cannot take the class run down.
    """

    cell_timeout: float = policy.CELL_TIMEOUT
    call_timeout: float = policy.CALL_TIMEOUT
    startup_timeout: float = policy.STARTUP_TIMEOUT
    memory_bytes: int = policy.LEARNER_MEMORY_BYTES
    file_size_bytes: int = policy.FILE_SIZE_BYTES
    cpu_seconds: int = policy.CPU_SECONDS
    max_processes: int = policy.MAX_PROCESSES
    threads: int = policy.THREADS
    user: str = policy.SANDBOX_USER
    max_restarts: int = policy.MAX_RESTARTS
    submission_timeout: float = policy.SUBMISSION_TIMEOUT
    isolation: str = "bwrap"
    tmp_bytes: int = policy.TMP_BYTES
    max_open_files: int = policy.MAX_OPEN_FILES
    grader_memory_bytes: int = policy.GRADER_MEMORY_BYTES
    unsafe_reason: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


class SandboxDied(Exception):
    """The sandbox process is gone; the message is meant for the learner."""

    grader_fatal = True


class SandboxTimeout(SandboxDied):
    """Learner code ran past its wall-clock limit (the sandbox was killed)."""


class SandboxStartFailed(SandboxDied):
    """The sandbox (or its fork server) could not start, before any learner code ran: a fault of
    the grading environment, never of a learner. The message says why."""


class IsolationUnavailable(RuntimeError):
    """The operating-system sandbox (bubblewrap) cannot run here; the grader refuses."""


# -- operating-system isolation (bubblewrap) ------------------------------------------------

#: Environment variable naming the bwrap binary (default: ``bwrap`` on PATH).
BWRAP_ENV = "COURSE_GRADE_BWRAP"
_ISOLATION: dict[str, tuple[bool, str]] = {}
#: Mount points that get a fresh private tmpfs in every sandbox.
_PRIVATE_TMP = policy.PRIVATE_TMP
_HOW_TO_GET = ("install bubblewrap (Debian/Ubuntu: `sudo apt-get install bubblewrap`; Fedora: "
               "`sudo dnf install bubblewrap`) on a Linux kernel with unprivileged user namespaces "
               "(`sysctl kernel.unprivileged_userns_clone=1` where that setting exists; in Docker, run with "
               "`--security-opt seccomp=unconfined` or use the host); or pass --unsafe-no-sandbox to grade "
               "WITHOUT isolation (learner code can then read the solutions and your files)")


def bwrap_path() -> str | None:
    """The bubblewrap binary, or None."""
    name = os.environ.get(BWRAP_ENV) or "bwrap"
    return shutil.which(name)


def _readable_paths() -> list[str]:
    """Directories the sandbox may read: the Python installation, site-packages, course_lib.

    Never the checkout: if ``course_lib`` is installed editable, only its package
    directory is shown (``solutions/``, ``tests/``, the output folder stay invisible).
    """
    import site
    import sysconfig
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        try:
            paths.add(sysconfig.get_paths()[key])
        except KeyError:
            pass
    try:
        paths.update(site.getsitepackages())
    except AttributeError:
        pass
    exe = os.path.realpath(sys.executable)
    paths.add(os.path.dirname(os.path.dirname(exe)))  # the real interpreter's prefix
    paths.update(p for p in sys.path if p.endswith(("site-packages", "dist-packages")))
    paths.update(_package_dirs())  # the course_lib and course_grader packages only
    out = sorted({os.path.realpath(p) for p in paths if p and os.path.isdir(p)})
    # drop the ones inside another (one bind covers them), and system dirs bound anyway
    kept: list[str] = []
    for p in out:
        if p in ("/", "/usr") or any(p.startswith(k + "/") for k in kept):
            continue
        kept.append(p)
    return [p for p in kept if not p.startswith("/usr/")]


def bwrap_argv(*, zygote: bool, tmp_bytes: int = policy.TMP_BYTES) -> list[str]:
    """The bubblewrap command line (without the program) for a fork server or a sandbox.

    Args:
        zygote: for the fork server, which keeps capabilities inside its own user
            namespace so that each fork can enter new mount/pid/IPC namespaces (forks drop
            them all before any learner code). A one-off sandbox gets none.
        tmp_bytes: size of the tmpfs mounted at ``/tmp`` (one-off sandbox).
    """
    bwrap = bwrap_path()
    if bwrap is None:
        raise IsolationUnavailable("bubblewrap (bwrap) is not installed: " + _HOW_TO_GET)
    argv = [bwrap, "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", "--die-with-parent", "--new-session", "--hostname", "sandbox"]
    for top in policy.READ_ONLY_SYSTEM:
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    for etc in policy.READ_ONLY_ETC:
        if os.path.exists(etc):
            argv += ["--ro-bind", etc, etc]
    for sys_dir in policy.READ_ONLY_SYS:
        argv += ["--ro-bind-try", sys_dir, sys_dir]
    sizes = policy.private_tmpfs_sizes(tmp_bytes)
    argv += ["--dev", "/dev", "--proc", "/proc",
             "--size", str(sizes["/tmp"]), "--tmpfs", "/tmp", "--size", str(sizes["/var/tmp"]), "--tmpfs", "/var/tmp"]
    # after the private /tmp, /var/tmp and /dev: an installation that lives under one of them
    # (a clone under /tmp) is bound read-only inside the sandbox's own private one
    for path in _readable_paths():
        argv += ["--ro-bind", path, path]
    argv += ["--remount-ro", "/", "--chdir", "/tmp"]
    if zygote:
        argv += ["--cap-add", "ALL"]
    return argv


def private_binds() -> list[str]:
    """Installation folders that live under a private mount point (/tmp, /var/tmp,
    /dev/shm): each sandbox binds them again, read-only, inside its own fresh one."""
    return [p for p in _readable_paths() if any(p.startswith(t + "/") for t in _PRIVATE_TMP)]


def isolation_status(refresh: bool = False) -> tuple[bool, str]:
    """Can sandboxes run under bubblewrap here? Returns (ok, reason or description)."""
    key = f"{os.geteuid()}:{sys.executable}"
    if key in _ISOLATION and not refresh:
        return _ISOLATION[key]
    status: tuple[bool, str]
    if not sys.platform.startswith("linux"):
        status = (False, f"operating-system isolation needs Linux (this is {sys.platform}): " + _HOW_TO_GET)
    elif bwrap_path() is None:
        status = (False, "bubblewrap (bwrap) is not installed: " + _HOW_TO_GET)
    elif not policy.seccomp_support()[0]:
        status = (False, policy.seccomp_support()[1])
    elif any(p in _PRIVATE_TMP for p in _readable_paths()):
        status = (False, "the Python installation or course_lib is " + ", ".join(p for p in _readable_paths()
                                                                                 if p in _PRIVATE_TMP)
                  + " itself, which every sandbox must replace by its own empty folder: install them in a "
                  "folder below it (e.g. /tmp/course) or elsewhere")
    else:
        probe = ("import os; m = open('/proc/self/uid_map').read().split(); "
                 "assert m != ['0', '0', '4294967295'], 'no user namespace'; "
                 "print('isolated', sorted(os.listdir('/tmp')))")
        try:
            res = subprocess.run([*bwrap_argv(zygote=True), sys.executable, "-I", "-S", "-c", probe],
                                 capture_output=True, text=True, timeout=policy.PROBE_TIMEOUT, cwd="/",
                                 env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
            # an empty private /tmp, but for the installation's own folders bound inside it
            inside = sorted({p.split("/")[2] for p in private_binds() if p.startswith("/tmp/")})
            if res.returncode == 0 and f"isolated {inside!r}" in res.stdout:
                status = (True, f"bubblewrap ({bwrap_path()})")
            else:
                why = (res.stderr or res.stdout).strip().splitlines()[-1:] or ["no output"]
                status = (False, f"bubblewrap cannot start a sandbox here ({why[0][:300]}): " + _HOW_TO_GET)
        except (OSError, subprocess.SubprocessError) as exc:
            status = (False, f"bubblewrap cannot start a sandbox here ({exc}): " + _HOW_TO_GET)
    _ISOLATION[key] = status
    return status


_BWRAP_AS: dict[tuple[int, int, str], bool] = {}


def _bwrap_works_as(uid: int, gid: int) -> bool:
    """(As root) can bubblewrap start this Python as ``uid``? False e.g. when the interpreter
    lives under /root (mode 0700). Probed once per process."""
    key = (uid, gid, sys.executable)
    if key not in _BWRAP_AS:
        probe = "import os; print('isolated', os.getuid() != 0)"
        try:
            res = subprocess.run([*bwrap_argv(zygote=True), sys.executable, "-I", "-S", "-c", probe],
                                 capture_output=True, text=True, timeout=policy.PROBE_TIMEOUT, cwd="/", user=uid, group=gid,
                                 extra_groups=[], env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
            _BWRAP_AS[key] = res.returncode == 0 and "isolated True" in res.stdout
        except (OSError, subprocess.SubprocessError, IsolationUnavailable):
            _BWRAP_AS[key] = False
    return _BWRAP_AS[key]


def require_isolation(config: "SandboxConfig") -> None:
    """Raise :class:`IsolationUnavailable` unless ``config`` may run learner code here."""
    if config.isolation == "none":
        return
    if config.isolation != "bwrap":
        raise ValueError(f"unknown isolation {config.isolation!r} (use 'bwrap' or 'none')")
    ok, why = isolation_status()
    if not ok:
        raise IsolationUnavailable("refusing to run learner code without a sandbox: " + why)


def unsafe_note(config: "SandboxConfig") -> str:
    """The note recorded when learner code ran without the sandbox: the real reason."""
    if config.unsafe_reason:
        return ("Ran WITHOUT the operating-system sandbox: " + config.unsafe_reason
                + ". The code ran with your own rights (for a self-check of your own notebook this is what "
                "Jupyter does too).")
    return UNSAFE_NOTE


#: Note added to every learner's results when the teacher graded without isolation.
UNSAFE_NOTE = ("Graded WITHOUT operating-system isolation (--unsafe-no-sandbox): learner code could read "
               "and change files of the grading account. Regrade with bubblewrap installed.")


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



def _user_ids(name: str) -> tuple[int, int]:
    entry = pwd.getpwnam(name)
    return entry.pw_uid, entry.pw_gid


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


def _host_descendants_of(pid: int) -> dict[int, str]:
    try:
        return descendants(pid)
    except OSError:
        return {}


def _ns_pid_map(pids: list[int]) -> dict[int, int]:
    """{pid in the fork server's pid namespace: host pid} for the given host pids
    (from the ``NSpid`` line of ``/proc/PID/status``)."""
    out: dict[int, int] = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status", "rb") as fh:
                for line in fh.read(8192).decode("ascii", "replace").splitlines():
                    if line.startswith("NSpid:"):
                        parts = line.split()[1:]
                        if len(parts) >= 3:  # host, bwrap (the zygote's) namespace, the sandbox's own
                            out[int(parts[1])] = pid
                        break
        except (OSError, ValueError):
            continue
    return out


_CGROUPS: list[str] = []


def _new_cgroup(controller: str, settings: dict[str, str]) -> str | None:
    """As root: a new cgroup of ``controller`` (v1 hierarchy, or v2 when it is enabled
    there) with ``settings`` written, for one fork server and its sandboxes. None where
    unavailable (not root, no writable hierarchy)."""
    if os.geteuid() != 0:
        return None
    candidates = [f"/sys/fs/cgroup/{controller}"]
    try:
        with open("/sys/fs/cgroup/cgroup.subtree_control") as fh:
            if controller in fh.read().split():
                candidates.append("/sys/fs/cgroup")
    except OSError:
        pass
    for base in candidates:
        if not os.path.isdir(base) or not os.access(base, os.W_OK):
            continue
        for stale in Path(base).glob("course-grade-*"):  # left by graders that are gone
            pid = stale.name.split("-")[2] if stale.name.count("-") >= 3 else ""
            if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
                try:
                    os.rmdir(stale)
                except OSError:
                    pass
        path = os.path.join(base, f"course-grade-{os.getpid()}-{len(_CGROUPS)}")
        v2 = base == "/sys/fs/cgroup"
        try:
            os.mkdir(path, 0o755)
            for key, value in settings.items():
                if v2:
                    key = {"memory.limit_in_bytes": "memory.max", "memory.memsw.limit_in_bytes": "memory.swap.max"
                           }.get(key, key)
                    value = "0" if key == "memory.swap.max" else value
                target = os.path.join(path, key)
                if os.path.exists(target):
                    with open(target, "w") as fh:
                        fh.write(value)
        except OSError:
            try:
                os.rmdir(path)
            except OSError:
                pass
            continue
        _CGROUPS.append(path)
        return path
    return None


def _pids_cgroup(limit: int) -> str | None:
    """A ``pids`` cgroup allowing ``limit`` tasks. Root's processes are exempt from
    ``RLIMIT_NPROC``, so this is what stops a fork bomb there."""
    return _new_cgroup("pids", {"pids.max": str(limit)})


def _memory_cgroup() -> str | None:
    """A ``memory`` cgroup (no limit yet) for one fork server and its one live sandbox; the
    limit is set by :func:`_limit_memory_cgroup` once the fork server has started."""
    return _new_cgroup("memory", {})


def _cgroup_file(path: str, v1: str, v2: str) -> str:
    return os.path.join(path, v1 if os.path.exists(os.path.join(path, v1)) else v2)


def _memory_charged(path: str) -> int:
    """Bytes charged to a memory cgroup now (v1 ``memory.usage_in_bytes``, v2 ``memory.current``)."""
    with open(_cgroup_file(path, "memory.usage_in_bytes", "memory.current")) as fh:
        return int(fh.read().strip())


def _limit_memory_cgroup(path: str, nbytes: int) -> None:
    """Bound every process of the cgroup together to ``nbytes``, swap included (none beyond it)."""
    v1 = os.path.exists(os.path.join(path, "memory.limit_in_bytes"))
    if v1:  # the memory limit first: memsw may never be below it
        with open(os.path.join(path, "memory.limit_in_bytes"), "w") as fh:
            fh.write(str(nbytes))
        if os.path.exists(os.path.join(path, "memory.memsw.limit_in_bytes")):
            with open(os.path.join(path, "memory.memsw.limit_in_bytes"), "w") as fh:
                fh.write(str(nbytes))
    else:
        with open(os.path.join(path, "memory.max"), "w") as fh:
            fh.write(str(nbytes))
        if os.path.exists(os.path.join(path, "memory.swap.max")):
            with open(os.path.join(path, "memory.swap.max"), "w") as fh:
                fh.write("0")


def _remove_cgroups() -> None:
    """Remove this process's cgroups (a moment after their last task died)."""
    for path in _CGROUPS:
        for _ in range(50):
            try:
                os.rmdir(path)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.02)


def _printable(text: str, limit: int) -> str:
    """The last ``limit`` characters of ``text`` on one line, without control characters."""
    clean = "".join(ch if ch.isprintable() else " " for ch in text.strip().replace("\n", " | "))
    return " ".join(clean.split())[-limit:]


class ForkServer:
    """The zygote: a sandbox interpreter with everything imported, forking one sandbox per
    request (see ``sandbox_main.zygote``). One per grader process and privilege mode.

    In ``"bwrap"`` mode the zygote itself runs inside bubblewrap, and each sandbox it forks
    enters new mount, pid and IPC namespaces of its own (so it cannot see or signal the
    zygote or an earlier sandbox) before dropping every capability.

    Memory: once the zygote has imported everything, its address space (``vm_bytes``) and, in a
    memory cgroup, its charge (``base_bytes``) are measured; a learner's bounds are those plus
    the learner's allowance ``memory_bytes``. So the bound is the learner's own, whatever torch
    build the fork server imported (a CUDA build reserves ~3 GB of address space at import).

    Raises:
        SandboxStartFailed: the fork server did not start (the message says why: its last words
            on stderr and its exit status).
    """

    def __init__(self, mode: str, uid: int | None, gid: int | None, threads: int, startup_timeout: float,
                 tmp_bytes: int = policy.TMP_BYTES, max_tasks: int | None = None, memory_bytes: int = 0) -> None:
        import json
        import socket
        self.mode = mode
        self.memory_bytes = memory_bytes
        self.sock, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        cfg = {"sock_fd": child.fileno(), "sys_path": _sandbox_sys_path(mode), "threads": threads,
               "isolated": mode == "bwrap"}
        kwargs: dict[str, Any] = {}
        if mode == "bwrap" and uid is not None:
            kwargs = {"user": uid, "group": gid, "extra_groups": []}
        prefix = bwrap_argv(zygote=True, tmp_bytes=tmp_bytes) if mode == "bwrap" else []
        # root's processes ignore RLIMIT_NPROC: a pids cgroup caps them (an unprivileged uid
        # is capped by the rlimit itself)
        self.cgroup = _pids_cgroup(max_tasks) if (mode == "bwrap" and max_tasks and uid is None) else None
        # one memory bound over all of the learner's processes, where a memory cgroup can be had;
        # its limit is set once the zygote is measured (the zygote runs trusted code only)
        self.memory_cgroup = _memory_cgroup() if memory_bytes else None
        groups = [os.path.join(g, "cgroup.procs") for g in (self.cgroup, self.memory_cgroup) if g is not None]
        if uid is not None:  # the child enters after it became uid (preexec_fn runs after setuid)
            for procs in groups:
                os.chown(procs, uid, gid if gid is not None else -1)
        if groups:
            def enter_cgroup() -> None:  # in the child, before exec: bwrap and all it starts
                for procs in groups:
                    with open(procs, "w") as fh:
                        fh.write(str(os.getpid()))
            kwargs["preexec_fn"] = enter_cgroup
        # the zygote's own stderr (trusted code only: each sandbox points its fds 1 and 2 at its
        # own pipe before any learner code), kept to say why it did not start
        self.errors = tempfile.TemporaryFile(prefix="course-grade-zygote-")
        self.proc = subprocess.Popen(
            [*prefix, sys.executable, "-I", str(Path(__file__).with_name("sandbox_main.py")), "--zygote",
             json.dumps(cfg)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.errors, cwd="/",
            env=_scrubbed_env("/tmp" if mode == "bwrap" else "/", threads), pass_fds=[child.fileno()],
            start_new_session=True, **kwargs)
        child.close()
        self.sock.settimeout(startup_timeout)
        try:
            hello = json.loads(self.sock.recv(1 << 16) or b"{}")
        except (OSError, ValueError):
            hello = {}
        if not isinstance(hello, dict) or not hello.get("ready"):
            self.proc.kill()
            code = self.proc.wait()
            why = _printable(self.stderr_tail(), 600) or "no message"
            self.close()
            raise SandboxStartFailed(f"the sandbox could not start: its fork server did not start ({describe_exit(code)}): "
                                     f"{why}. Fix: {_REPAIR}")
        self.sock.settimeout(policy.FORK_SERVER_REPLY_TIMEOUT)
        #: host pids of bwrap and the zygote: long-lived, never learner processes
        self.pids = {self.proc.pid, *_host_descendants_of(self.proc.pid)}
        #: address space of the zygote with everything imported (each sandbox starts as its fork)
        self.vm_bytes = int(hello.get("vm_bytes") or 0)
        #: RLIMIT_AS of each sandbox process: the zygote's address space + the learner's allowance
        self.address_space_bytes = self.vm_bytes + memory_bytes
        self.base_bytes = 0
        self.memory_limit = 0
        if self.memory_cgroup is not None:
            try:
                self.base_bytes = _memory_charged(self.memory_cgroup)
                self.memory_limit = self.base_bytes + memory_bytes
                _limit_memory_cgroup(self.memory_cgroup, self.memory_limit)
            except (OSError, ValueError) as exc:
                self.proc.kill()
                self.proc.wait()
                self.close()
                raise SandboxStartFailed(f"the memory cgroup of the sandbox could not be limited ({exc})") from None
        mb = 2**20
        self.memory_bound = (
            f"memory cgroup: {memory_bytes // mb} MB for all of your processes together (the limit is "
            f"{self.memory_limit // mb} MB: the sandbox's {self.base_bytes // mb} MB with torch imported, plus "
            f"{memory_bytes // mb} MB), and RLIMIT_AS {self.address_space_bytes // mb} MB per process "
            f"({self.vm_bytes // mb} MB of address space at start + {memory_bytes // mb} MB)"
            if self.memory_limit else
            f"RLIMIT_AS {self.address_space_bytes // mb} MB per process ({self.vm_bytes // mb} MB of address space "
            f"at start + {memory_bytes // mb} MB; no memory cgroup available here: not root, or no writable "
            "memory controller)")

    def stderr_tail(self, limit: int = 2000) -> str:
        """The end of the zygote's stderr."""
        try:
            size = os.fstat(self.errors.fileno()).st_size
            return os.pread(self.errors.fileno(), limit, max(0, size - limit)).decode("utf-8", "replace")
        except (OSError, ValueError):
            return ""

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
        out = json.loads(reply)
        if not isinstance(out, dict):
            raise OSError("the sandbox fork server answered garbage")
        return out

    def fork(self, job: dict, fds: list[int]) -> int:
        reply = self._ask({"op": "fork", **job}, fds)
        pid = reply.get("pid")
        if type(pid) is not int or pid <= 0:
            raise OSError(f"the sandbox fork server could not start a sandbox: {reply.get('error', '?')}")
        return pid

    def wait(self, pid: int, timeout: float) -> int | None | str:
        return self._ask({"op": "wait", "pid": pid, "timeout": timeout})["code"]

    def host_pid(self, pid: int) -> int | None:
        """Host pid of a sandbox given its pid in the zygote's namespace."""
        if self.mode != "bwrap":
            return pid
        table = _host_descendants_of(self.proc.pid)
        return _ns_pid_map([p for p in table if p not in self.pids]).get(pid)

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
        self.errors.close()
        for group in (self.cgroup, self.memory_cgroup):
            if group is not None:
                for _ in range(50):
                    try:
                        os.rmdir(group)
                        break
                    except FileNotFoundError:
                        break
                    except OSError:
                        time.sleep(0.02)


_FORK_SERVERS: dict[tuple, ForkServer] = {}


def fork_server(mode: str, uid: int | None, gid: int | None, threads: int, startup_timeout: float,
                tmp_bytes: int = policy.TMP_BYTES, max_tasks: int | None = None, memory_bytes: int = 0) -> ForkServer:
    """The (lazily started) fork server of this process for a privilege mode.

    Raises:
        SandboxStartFailed: it cannot start (the reason is in the message).
    """
    if not _FORK_SERVERS:
        import atexit
        atexit.register(_close_fork_servers)
    key = (os.getpid(), mode, uid, threads, tmp_bytes, max_tasks, memory_bytes)
    server = _FORK_SERVERS.get(key)
    if server is None or not server.alive:
        if server is not None:
            server.close()
        server = ForkServer(mode, uid, gid, threads, startup_timeout, tmp_bytes, max_tasks, memory_bytes)
        _FORK_SERVERS[key] = server
    return server


def _close_fork_servers() -> None:
    """At exit: end this process's fork servers (a closed socket ends the zygote, bubblewrap then
    exits and is reaped here, so their CPU time is accounted to this process; killed after 5 s)."""
    for key, server in list(_FORK_SERVERS.items()):
        if key[0] == os.getpid():
            try:
                server.close()
            except OSError:
                pass
    _remove_cgroups()


def fork_server_pids() -> set[int]:
    """Host pids of this process's fork servers (bwrap and the zygote: long-lived, not learner
    processes)."""
    out: set[int] = set()
    for key, srv in _FORK_SERVERS.items():
        if key[0] == os.getpid() and srv.alive:
            out |= srv.pids
    return out


def _package_dirs() -> list[str]:
    """The directories of the two packages a sandbox imports: ``course_lib`` (the toolkit and
    the library learners may use) and ``course_grader`` (the sandbox's own side). Found without
    importing course_lib, which would import torch (1.5 s) into a process that never uses it."""
    import importlib.util

    spec = importlib.util.find_spec("course_lib")
    if spec is None or spec.origin is None:
        raise ImportError("course_lib is not installed: the sandbox needs it (bash scripts/setup.sh)")
    return [str(Path(spec.origin).resolve().parent), str(Path(__file__).resolve().parent)]


def _sandbox_sys_path(mode: str) -> list[str]:
    """Extra ``sys.path`` of the sandbox: the directories holding ``course_lib`` and
    ``course_grader`` (in bwrap mode only the packages themselves are visible there, not the
    rest of the checkout)."""
    return list(dict.fromkeys(str(Path(d).parent) for d in _package_dirs()))


def _scrubbed_env(home: str, threads: int) -> dict[str, str]:
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8",
            "USER": "learner", "LOGNAME": "learner",
            "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
            "OMP_WAIT_POLICY": "PASSIVE", "MPLBACKEND": "Agg", "MPLCONFIGDIR": home, "COURSE_GRADING": "1"}


def _max_tasks(cfg: SandboxConfig) -> int:
    """Tasks (processes and threads) allowed to a fork server and its one live sandbox."""
    return cfg.max_processes + policy.TASKS_SLACK + policy.TASKS_PER_THREAD * max(cfg.threads, 1)


def _log_pipe() -> tuple[int, int]:
    """A pipe for a sandbox's stdout and stderr: (the grader's non-blocking read end, the
    sandbox's write end). Nothing of a sandbox lands on the grader's disk: a file there could be
    grown past every limit (``fallocate(FALLOC_FL_KEEP_SIZE)`` is bounded by neither
    ``RLIMIT_FSIZE`` nor the filter), a pipe holds at most its kernel buffer, and the grader keeps
    only the last :data:`policy.LOG_TAIL_BYTES` of what it drains."""
    r, w = os.pipe()
    os.set_blocking(r, False)
    return r, w


#: What the sandbox was doing when it died, for which no learner code had run yet.
STARTING = "starting the sandbox"


class Sandbox:
    """One sandbox process (a fork of this process's fork server). Not thread-safe; one request
    at a time, and one live sandbox at a time per fork server (the fork server of a process
    serves one submission at a time).

    Args:
        config: limits and policy.
    """

    def __init__(self, config: SandboxConfig) -> None:
        self.config = config
        self.pid: int | None = None
        self.host_pid: int | None = None
        self.server: ForkServer | None = None
        self.req_fd: int | None = None
        self.resp_fd: int | None = None
        self.tmpdir: str | None = None
        self.log_fd: int | None = None
        self._log = b""
        self.dead_reason: str | None = None
        self.exit_code: int | None = None
        self.started = False
        self._reaped = False
        self._buf = b""
        self.uid: int | None = None
        self.privilege_mode = "none"
        self.memory_bound = ""

    @staticmethod
    def prepare(config: SandboxConfig) -> ForkServer:
        """Start this process's fork server now (so it is not counted as a sandbox process).

        Raises:
            IsolationUnavailable: bubblewrap is needed (``config.isolation == "bwrap"``) and
                cannot run here.
            SandboxStartFailed: the fork server cannot start (the message says why).
        """
        require_isolation(config)
        mode, uid, gid = Sandbox._mode(config)
        return fork_server(mode, uid, gid, config.threads, config.startup_timeout, config.tmp_bytes,
                           _max_tasks(config), config.memory_bytes)

    @staticmethod
    def _mode(cfg: SandboxConfig) -> tuple[str, int | None, int | None]:
        """One execution mode: ``"bwrap"`` (as root: bubblewrap started as an unprivileged uid,
        the worker's own or ``cfg.user``, when that uid can read the Python installation; else
        as root, which holds no capability outside its user namespace either), or ``"none"``
        (``--unsafe-no-sandbox``: a plain child process with the grader's own rights)."""
        if cfg.isolation != "bwrap":
            return "none", None, None
        if os.geteuid() != 0:
            return "bwrap", None, None
        uid, gid = _user_ids(cfg.user)
        slot_uid = os.environ.get(SANDBOX_UID_ENV, "")
        if slot_uid.isdigit():
            uid = gid = int(slot_uid)
        if _bwrap_works_as(uid, gid):
            return "bwrap", uid, gid
        return "bwrap", None, None

    # lifecycle ------------------------------------------------------------------------
    def start(self) -> None:
        """Fork one sandbox from this process's fork server and wait until it is ready.

        Raises:
            IsolationUnavailable: bubblewrap is needed and cannot run here.
            SandboxStartFailed: the fork server or the sandbox could not start (no learner code
                ran); the message says why.
        """
        cfg = self.config
        require_isolation(cfg)
        mode, run_uid, run_gid = self._mode(cfg)
        self.privilege_mode = mode
        if mode == "bwrap":
            home = "/tmp"  # a private tmpfs of this sandbox alone
        else:
            self.tmpdir = tempfile.mkdtemp(prefix="course-grade-")  # --unsafe-no-sandbox: our own rights
            os.chmod(self.tmpdir, 0o700)
            home = os.path.join(self.tmpdir, "home")
            os.mkdir(home)
        server = self.prepare(cfg)  # one execution mode: no fork server, no sandbox (SandboxStartFailed)
        self.memory_bound = server.memory_bound
        job: dict[str, Any] = {
            "memory_bytes": server.address_space_bytes, "file_size_bytes": cfg.file_size_bytes,
            "cpu_seconds": cfg.cpu_seconds, "threads": cfg.threads, "sys_path": _sandbox_sys_path(mode),
            "drop": mode, "uid": run_uid, "gid": run_gid,
            "max_processes": cfg.max_processes if mode == "bwrap" else None,
            "max_open_files": cfg.max_open_files, "tmp_bytes": cfg.tmp_bytes,
            "isolate": mode == "bwrap",
            "private_binds": private_binds(),
            "cwd": home, "env": _scrubbed_env(home, cfg.threads),
        }
        # stdout and stderr: a pipe only the grader reads (never a file or a path the sandbox
        # could grow, replace with a FIFO or a symlink)
        self.log_fd, log_w = _log_pipe()
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        try:
            self.pid = server.fork(job, [req_r, resp_w, log_w])
            self.server = server
            self.host_pid = server.host_pid(self.pid)
        except OSError as exc:
            os.close(req_w)
            os.close(resp_r)
            self.dead_reason = f"the sandbox could not start (fork server failure: {_printable(str(exc), 400)})"
            raise SandboxStartFailed(self.dead_reason) from None
        finally:
            for fd in (req_r, resp_w, log_w):
                os.close(fd)
        self.req_fd, self.resp_fd = req_w, resp_r
        hello = self._receive(time.monotonic() + cfg.startup_timeout, STARTING)
        if not isinstance(hello, dict) or not hello.get("ready"):
            self.kill()
            self.dead_reason = "the sandbox did not start correctly (it answered something else than ready)"
            raise SandboxStartFailed(self.dead_reason)
        self.started = True
        self.uid = hello.get("uid") if type(hello.get("uid")) is int else None

    @property
    def address_space_bytes(self) -> int:
        """RLIMIT_AS of this sandbox's processes (0 before it started)."""
        return self.server.address_space_bytes if self.server is not None else 0

    @property
    def alive(self) -> bool:
        return self.pid is not None and self.dead_reason is None

    def _exit_code(self, timeout: float) -> int | None:
        """Exit code if the process has ended within ``timeout`` seconds (reaps it)."""
        if self._reaped:
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
        """Kill the sandbox and every process in it (descendants are also swept by the caller)."""
        if self.pid is None:
            return
        if not self._reaped and self.server is not None:
            if self.server.mode == "bwrap":
                # the sandbox is the init of its own pid namespace: killing it kills them all
                host = self.host_pid or self.server.host_pid(self.pid)
                if host is not None and host in _host_descendants_of(self.server.proc.pid):
                    try:
                        os.kill(host, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
            else:
                for target in (lambda: os.killpg(self.pid, signal.SIGKILL), lambda: os.kill(self.pid, signal.SIGKILL)):
                    try:
                        target()
                    except (ProcessLookupError, PermissionError):
                        pass
        self._exit_code(10)
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
        if self.log_fd is not None:
            os.close(self.log_fd)
            self.log_fd = None

    def _drain_log(self) -> None:
        """Read what the sandbox wrote to stdout / stderr so far, keeping the last
        :data:`policy.LOG_TAIL_BYTES` (its writes never block on a full pipe for long)."""
        if self.log_fd is None:
            return
        for _ in range(64):  # at most 64 pipe-fulls per call: a writer cannot keep us here
            try:
                chunk = os.read(self.log_fd, 1 << 16)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            if not chunk:
                return
            self._log = (self._log + chunk)[-policy.LOG_TAIL_BYTES:]

    def log_tail(self, limit: int = 400) -> str:
        """The end of the sandbox's stdout and stderr."""
        self._drain_log()
        return self._log[-limit:].decode("utf-8", "backslashreplace")

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
        tail = self.log_tail(policy.LOG_TAIL_BYTES)
        status = describe_exit(code) if code is not None else "exit status unknown"
        if not self.started:
            # no learner code ran: the grading environment's fault, said as such
            self.dead_reason = start_failure(status, tail, self.address_space_bytes)
            raise SandboxStartFailed(self.dead_reason)
        hint = ""
        if "MemoryError" in tail or "std::bad_alloc" in tail:
            hint = " (out of memory?)"
        elif "Fatal Python error" in tail:
            hint = " (" + _printable(tail[tail.rfind("Fatal Python error"):].splitlines()[0], 120) + ")"
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
                    if not self.started:
                        self.dead_reason = (f"the sandbox did not start within {self.config.startup_timeout:g} s "
                                            "(no learner code ran): the machine is overloaded, or importing torch "
                                            "takes longer here; fix the load, or grade with fewer --jobs")
                        raise SandboxStartFailed(self.dead_reason)
                    limit = f"{timeout:g} s" if timeout is not None else "the time limit"
                    self.dead_reason = (f"your code did not finish within {limit} ({what}); "
                                        "the sandbox was stopped")
                    raise SandboxTimeout(self.dead_reason)
                watch = [fd] if self.log_fd is None else [fd, self.log_fd]
                ready, _, _ = select.select(watch, [], [], min(remaining, 1.0))
                if self.log_fd is not None and self.log_fd in ready:
                    self._drain_log()
                if fd not in ready:
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
            if not self.started:
                raise SandboxStartFailed(f"the sandbox did not start correctly: {self.dead_reason}") from None
            raise SandboxDied(self.dead_reason) from None


def start_failure(status: str, tail: str, address_space_bytes: int = 0) -> str:
    """Why a sandbox died before any learner code ran, with the fix (one message)."""
    last = _printable(tail, 300) or "no message"
    if any(s in tail for s in ("MemoryError", "std::bad_alloc", "Cannot allocate memory", "failed to map segment",
                               "out of memory")):
        limit = f" (RLIMIT_AS {address_space_bytes // 2**20} MB)" if address_space_bytes else ""
        return (f"the sandbox could not start ({status}): it ran out of memory{limit} while importing the "
                f"libraries learners use, before any learner code ran ({last}). Fix: give the sandbox more memory "
                "(--memory-mb), or install the CPU build of torch (a CUDA build reserves ~3 GB more): "
                "bash scripts/install_torch.sh .venv/bin/python")
    if status.startswith("exit code 96"):
        return (f"the sandbox could not start ({status}): its system-call filter could not be installed ({last}). "
                "Fix: install libseccomp (Debian/Ubuntu: sudo apt-get install libseccomp2)")
    return f"the sandbox could not start ({status}) before any learner code ran: {last}. Fix: {_REPAIR}"


_REPAIR = ("run `course-grade --check` on the answer key's notebook to see the same failure, and repair the Python "
           "environment (bash scripts/setup.sh)")
