"""The sandbox policy, in one place: read this file first.

Everything a learner's code can see and do is decided here; ``sandbox.py`` (the grader's
side: bubblewrap, fork server, cgroups) and ``sandbox_main.py`` (the sandbox's side:
namespaces, mounts, capabilities, the seccomp filter) only carry it out.

One execution mode: bubblewrap (``bwrap``), started as an unprivileged uid where one can
read the Python installation. ``--unsafe-no-sandbox`` (``SandboxConfig(isolation="none")``)
runs learner code as a plain child process with the grader's own rights: no isolation at all,
recorded in every learner's notes.

Each learner's sandbox (a fork of the fork server, itself inside bubblewrap):

* **namespaces**: new user, network (loopback only), UTS, cgroup namespaces for the fork
  server (bubblewrap), and new mount, pid and IPC namespaces of its own per learner;
* **filesystem**: built from nothing. Read-only: :data:`READ_ONLY_SYSTEM`,
  :data:`READ_ONLY_ETC`, the Python installation and site-packages, and only the
  ``course_lib`` and ``course_grader`` package folders (never the checkout, the answer keys,
  the submissions or the output folder). An installation that lives under one of the
  private folders (a clone under ``/tmp``) is bound read-only inside the sandbox's own one.
  Writable, private to one learner and sized: :data:`PRIVATE_TMPFS`. ``/dev``: a tmpfs of
  this learner alone (:data:`DEV_BYTES`), read-only, holding :data:`DEV_NODES`. ``/proc``:
  an empty tmpfs (no process table);
* **privileges**: every capability dropped, ``no_new_privs``, and a seccomp filter built by
  libseccomp from the names in :data:`DENIED_SYSCALLS` (``EPERM``), :data:`ENOSYS_SYSCALLS`
  (``ENOSYS``, so the C library falls back to plain ``clone``) and ``clone`` with any flag of
  :data:`NAMESPACE_FLAGS`. Where the filter cannot be built (no libseccomp, an architecture it
  does not know, a name it cannot resolve) the grader refuses to run learner code and says why
  (:func:`seccomp_support`); which filter applied is recorded in every learner's result;
* **limits** (defaults of :class:`course_grader.sandbox.SandboxConfig`): ``RLIMIT_AS``
  3 GB per process, one memory cgroup over all of a learner's processes where one can be had
  (the learner's memory plus :data:`ZYGOTE_MEMORY_BYTES`; recorded), ``RLIMIT_FSIZE`` 64 MB,
  ``RLIMIT_CPU`` 600 s, ``RLIMIT_NPROC`` 256 (and a pids cgroup as root), ``RLIMIT_NOFILE``
  1024, no core dumps; wall time 30 s per cell, 10 s per call from a test, 600 s per notebook;
* **the trusted side** (the grader) accepts only ``torch.load(weights_only=True)`` payloads of
  at most 64 MB (after decompression), decodes at most :data:`course_grader.protocol.MAX_NODES`
  nodes and :data:`course_grader.protocol.MAX_TENSOR_BYTES` bytes of tensors per value, and runs
  under its own memory limit (``SandboxConfig.grader_memory_bytes``, ``RLIMIT_DATA``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import platform
from functools import lru_cache

__all__ = ["READ_ONLY_SYSTEM", "READ_ONLY_ETC", "PRIVATE_TMP", "PRIVATE_TMPFS", "DEV_NODES", "DEV_BYTES",
           "DENIED_SYSCALLS", "ENOSYS_SYSCALLS", "NAMESPACE_FLAGS", "ZYGOTE_MEMORY_BYTES", "private_tmpfs_sizes",
           "seccomp_support", "install_seccomp"]

#: System folders bound read-only (a symlink such as /lib -> usr/lib is recreated as a symlink).
READ_ONLY_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: The few files of /etc a dynamically linked program needs.
READ_ONLY_ETC = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/alternatives")
#: Mount points that get a fresh, size-limited tmpfs in every learner's sandbox.
PRIVATE_TMP = ("/tmp", "/var/tmp", "/dev/shm")


def private_tmpfs_sizes(tmp_bytes: int) -> dict[str, int]:
    """Bytes of each private tmpfs for ``SandboxConfig.tmp_bytes`` (``/tmp`` is also HOME)."""
    return {"/tmp": max(tmp_bytes, 2**20), "/var/tmp": max(tmp_bytes // 4, 2**20),
            "/dev/shm": max(tmp_bytes // 4, 2**20)}


#: The sizes with the default ``tmp_bytes`` (64 MB), for the reader.
PRIVATE_TMPFS = private_tmpfs_sizes(64 * 2**20)
#: Inodes of each private tmpfs.
TMPFS_INODES = 4096
#: Device nodes of a learner's own /dev (bound from the fork server's, which bubblewrap made).
DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")
#: Size of a learner's own /dev tmpfs (read-only once the nodes are in place).
DEV_BYTES = 65536
#: Wall seconds added to a learner's budget (``SandboxConfig.submission_timeout`` per notebook)
#: before the grading worker of that learner is killed (``cli.learner_budget``): starting the
#: sandbox and returning the row. Decoding what a learner's code returned counts against it too.
WATCHDOG_GRACE_SECONDS = 60.0
#: Memory of a fork server itself (torch imported), added to a learner's memory cgroup.
ZYGOTE_MEMORY_BYTES = 1024 * 2**20

#: System calls refused with EPERM: they reach past the sandbox's namespaces (kernel keyrings,
#: tracing, BPF, modules, mounts, new namespaces, other processes' memory, io_uring).
DENIED_SYSCALLS = (
    "ptrace", "process_vm_readv", "process_vm_writev", "add_key", "request_key", "keyctl", "bpf",
    "perf_event_open", "userfaultfd", "kexec_load", "kexec_file_load", "init_module", "finit_module",
    "delete_module", "mount", "umount2", "pivot_root", "open_tree", "move_mount", "fsopen", "fsmount",
    "fsconfig", "fspick", "mount_setattr", "unshare", "setns", "swapon", "swapoff", "reboot",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "acct", "quotactl", "lookup_dcookie",
    "name_to_handle_at", "open_by_handle_at",
)
#: System calls refused with ENOSYS (clone3's flags are in memory, where a filter cannot look;
#: the C library then falls back to clone, whose flags it can).
ENOSYS_SYSCALLS = ("clone3",)
#: ``clone`` flags refused (CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET).
NAMESPACE_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000)

# libseccomp constants (seccomp.h)
_SCMP_ACT_ALLOW = 0x7FFF0000
_SCMP_CMP_MASKED_EQ = 7


def _scmp_act_errno(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                ("datum_b", ctypes.c_uint64)]


@lru_cache(maxsize=1)
def _libseccomp() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError:
        return None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                           ctypes.POINTER(_ArgCmp)]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    return lib


def _version(lib: ctypes.CDLL) -> str:
    try:
        class _Ver(ctypes.Structure):
            _fields_ = [("major", ctypes.c_uint), ("minor", ctypes.c_uint), ("micro", ctypes.c_uint)]
        lib.seccomp_version.restype = ctypes.POINTER(_Ver)
        v = lib.seccomp_version().contents
        return f"{v.major}.{v.minor}.{v.micro}"
    except (AttributeError, ValueError):
        return "?"


def _build(lib: ctypes.CDLL) -> int:
    """A libseccomp filter context with the policy's rules (the caller releases it).

    Raises:
        RuntimeError: a name the library cannot resolve on this architecture, or a rule it refuses.
    """
    ctx = lib.seccomp_init(_SCMP_ACT_ALLOW)
    if not ctx:
        raise RuntimeError("seccomp_init failed")
    try:
        unknown = []
        for names, action in ((DENIED_SYSCALLS, _scmp_act_errno(errno.EPERM)),
                              (ENOSYS_SYSCALLS, _scmp_act_errno(errno.ENOSYS))):
            for name in names:
                nr = lib.seccomp_syscall_resolve_name(name.encode())
                if nr < 0:
                    unknown.append(name)
                    continue
                rc = lib.seccomp_rule_add_array(ctx, action, nr, 0, None)
                if rc < 0:
                    raise RuntimeError(f"seccomp rule for {name} refused ({rc})")
        if unknown:
            raise RuntimeError(f"libseccomp does not know {', '.join(unknown)} on {platform.machine()}")
        clone = lib.seccomp_syscall_resolve_name(b"clone")
        for flag in NAMESPACE_FLAGS:  # refuse clone when (flags & flag) == flag, for each namespace flag
            cmp = _ArgCmp(0, _SCMP_CMP_MASKED_EQ, flag, flag)
            rc = lib.seccomp_rule_add_array(ctx, _scmp_act_errno(errno.EPERM), clone, 1, ctypes.byref(cmp))
            if rc < 0:
                raise RuntimeError(f"seccomp rule for clone flags {flag:#x} refused ({rc})")
    except BaseException:
        lib.seccomp_release(ctx)
        raise
    return ctx


@lru_cache(maxsize=1)
def seccomp_support() -> tuple[bool, str]:
    """Can the policy's seccomp filter be built here? (ok, description or reason). Builds the
    filter without loading it."""
    lib = _libseccomp()
    if lib is None:
        return False, ("libseccomp is not installed (Debian/Ubuntu: `sudo apt-get install libseccomp2`; "
                       "Fedora: `sudo dnf install libseccomp`): the sandbox's system-call filter cannot be built")
    try:
        ctx = _build(lib)
    except RuntimeError as exc:
        return False, f"the sandbox's system-call filter cannot be built here: {exc}"
    lib.seccomp_release(ctx)
    return True, (f"seccomp filter by libseccomp {_version(lib)} on {platform.machine()}: "
                  f"{len(DENIED_SYSCALLS) + len(ENOSYS_SYSCALLS)} system calls and clone with namespace flags refused")


def install_seccomp() -> str:
    """Load the filter into this process (``no_new_privs`` must be set). Returns what applied.

    Raises:
        RuntimeError: the filter cannot be built or loaded (the sandbox must not go on).
    """
    lib = _libseccomp()
    if lib is None:
        raise RuntimeError(seccomp_support()[1])
    ctx = _build(lib)
    try:
        rc = lib.seccomp_load(ctx)
        if rc < 0:
            raise RuntimeError(f"seccomp_load failed ({rc})")
    finally:
        lib.seccomp_release(ctx)
    return seccomp_support()[1]
