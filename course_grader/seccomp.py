"""The seccomp filter's mechanism: builds the rules of :mod:`course_grader.policy` with libseccomp.

What is refused is policy (:data:`course_grader.policy.DENIED_SYSCALLS`,
:data:`~course_grader.policy.ENOSYS_SYSCALLS`, :data:`~course_grader.policy.NAMESPACE_FLAGS`);
this module only turns those names into a filter through libseccomp (``ctypes``), says whether
that can be done here (:func:`seccomp_support`) and loads it (:func:`install_seccomp`, in a
sandbox, after ``no_new_privs``). The rules are read when the filter is built, never copied.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import platform
from functools import lru_cache

__all__ = ["seccomp_support", "install_seccomp"]

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
    from course_grader import policy
    ctx = lib.seccomp_init(_SCMP_ACT_ALLOW)
    if not ctx:
        raise RuntimeError("seccomp_init failed")
    try:
        unknown = []
        for names, action in ((policy.DENIED_SYSCALLS, _scmp_act_errno(errno.EPERM)),
                              (policy.ENOSYS_SYSCALLS, _scmp_act_errno(errno.ENOSYS))):
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
        for flag in policy.NAMESPACE_FLAGS:  # refuse clone when (flags & flag) == flag, for each flag
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
    from course_grader import policy
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
                  f"{len(policy.DENIED_SYSCALLS) + len(policy.ENOSYS_SYSCALLS)} system calls and clone with "
                  "namespace flags refused")


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
