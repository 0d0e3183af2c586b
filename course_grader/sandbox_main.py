"""The program that runs inside the sandbox subprocess (untrusted side).

Started by :class:`course_grader.sandbox.ForkServer` as ``python -I sandbox_main.py --zygote
CONFIG_JSON`` (the fork server: imports the libraries learners use once, then forks one sandbox
per request; the one way learner code runs). Each fork enters its own namespaces, drops every
privilege, applies the limits of :mod:`course_grader.policy`, then serves requests from the
grader on the pipes it was given:
``exec`` (run a learner cell), ``globals`` (describe the learner's names), and operations
on objects (``call``, ``getattr``, ``getitem``, ``len``, ``iter`` ...).

Nothing here is trusted by the grader: learner code can rewrite any of it. The grader
only accepts replies through :mod:`course_grader.protocol` (``weights_only`` loads
and a strict validation), so the worst a learner can do is answer with wrong data — which
is what wrong code does anyway.
"""

from __future__ import annotations

import builtins
import io
import json
import linecache
import os
import resource
import signal
import sys
import traceback
from typing import Any

# The caps below are course_grader.policy's (set from it by _preload, once the package is on
# sys.path; a script started as ``python -I`` cannot import it before).
MAX_CAPTURE = 64 * 1024
MAX_ITER_ITEMS = 100_000
#: Modules of course_lib that are not the reference answers (none since the course_lib.grading shim went).
_NOT_REFERENCE: tuple[str, ...] = ()


class _Capped(io.TextIOBase):
    """A text sink that keeps the first MAX_CAPTURE characters and drops the rest."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        if self.size < MAX_CAPTURE:
            self.parts.append(str(s)[: MAX_CAPTURE - self.size])
            self.size += len(self.parts[-1])
        return len(s)

    def getvalue(self) -> str:
        return "".join(self.parts)


class _FakeIPython:
    """Stands in for ``get_ipython()``: magics and shell commands do nothing.

    ``%%time`` / ``%%capture`` cells still run their body. Input transformers appended
    here are ignored (there is no IPython kernel in the sandbox).
    """

    def __init__(self, namespace: dict) -> None:
        self.user_ns = namespace
        self.input_transformers_cleanup: list = []
        self.input_transformers_post: list = []
        self.ast_transformers: list = []
        self.notes: list[str] = []

    def run_line_magic(self, name: str, line: str = "", *args: Any, **kwargs: Any) -> None:
        self.notes.append(f"%{name} ignored")

    def run_cell_magic(self, name: str, line: str, cell: str) -> None:
        if name in ("time", "capture", "timeit"):
            exec(compile(cell, "<cell magic>", "exec"), self.user_ns)
        else:
            self.notes.append(f"%%{name} ignored")

    def system(self, cmd: str) -> None:
        self.notes.append("shell command ignored")

    def getoutput(self, cmd: str) -> list:
        self.notes.append("shell command ignored")
        return []

    def __getattr__(self, name: str) -> Any:
        return lambda *a, **k: None


def _apply_limits(cfg: dict) -> None:
    """The policy's rlimits; ``memory_bytes`` is RLIMIT_AS as the grader derived it (the fork
    server's measured address space + the learner's allowance)."""
    from course_grader import policy

    def setlim(res: int, value: int | None, hard_extra: int = 0) -> None:
        if value is None:
            return
        try:
            resource.setrlimit(res, (value, value + hard_extra))
        except (ValueError, OSError):
            pass
    setlim(resource.RLIMIT_CORE, policy.CORE_BYTES)
    setlim(resource.RLIMIT_AS, cfg.get("memory_bytes"))
    setlim(resource.RLIMIT_FSIZE, cfg.get("file_size_bytes"))
    setlim(resource.RLIMIT_CPU, cfg.get("cpu_seconds"), policy.CPU_HARD_EXTRA_SECONDS)
    setlim(resource.RLIMIT_NPROC, cfg.get("max_processes"))
    setlim(resource.RLIMIT_NOFILE, cfg.get("max_open_files"))


_libc: Any = None


def _c() -> Any:
    global _libc
    if _libc is None:
        import ctypes
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def _check(ret: int, what: str) -> None:
    if ret != 0:
        import ctypes
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


_CLONE_NEWNS, _CLONE_NEWPID, _CLONE_NEWIPC = 0x00020000, 0x20000000, 0x08000000
_MS_REC, _MS_PRIVATE, _MS_NOSUID, _MS_NODEV = 16384, 1 << 18, 2, 4
_MS_RDONLY, _MS_REMOUNT, _MS_BIND = 1, 32, 4096


def _isolate(job: dict) -> None:
    """In a fork of the zygote (inside bwrap): new mount, pid and IPC namespaces, and a fresh,
    size-limited tmpfs for /tmp (also HOME), /var/tmp and /dev/shm; /proc is hidden (the
    sandbox has no business with processes, and the zygote's would be visible there).
    The next process forked is the init of the new pid namespace."""
    from course_grader import policy
    libc = _c()
    _check(libc.unshare(_CLONE_NEWNS | _CLONE_NEWPID | _CLONE_NEWIPC), "unshare")
    _check(libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None), "mount --make-rprivate /")
    size = int(job.get("tmp_bytes") or policy.TMP_BYTES)
    # installation folders under /tmp or /var/tmp (a clone under /tmp): held open now, bound
    # again read-only inside this sandbox's fresh tmpfs below (remounted nosuid and nodev: bubblewrap
    # locks both on its binds, and a remount that drops a locked flag is refused with EPERM)
    binds = [(p, os.open(p, os.O_PATH | os.O_DIRECTORY)) for p in job.get("private_binds") or []]
    # a /dev of this sandbox alone (the fork server's is shared by every sandbox it forks):
    # the device nodes a program needs, bound from the fork server's /dev, read-only
    nodes = [(n, os.open(f"/dev/{n}", os.O_PATH)) for n in policy.DEV_NODES if os.path.exists(f"/dev/{n}")]
    dev_opts = f"size={policy.DEV_BYTES},nr_inodes={policy.DEV_INODES}".encode()
    _check(libc.mount(b"tmpfs", b"/dev", b"tmpfs", _MS_NOSUID, dev_opts + b",mode=0755"), "mount /dev")
    for name, fd in nodes:
        open(f"/dev/{name}", "w").close()
        _check(libc.mount(f"/proc/self/fd/{fd}".encode(), f"/dev/{name}".encode(), None, _MS_BIND, None),
               f"bind /dev/{name}")
        os.close(fd)
    for link, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"/dev/{link}")
    os.mkdir("/dev/shm")
    for target, nbytes in policy.private_tmpfs_sizes(size).items():
        opts = f"size={nbytes},nr_inodes={policy.TMPFS_INODES},mode=0700".encode()
        _check(libc.mount(b"tmpfs", target.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, opts), f"mount tmpfs {target}")
    _check(libc.mount(b"none", b"/dev", None, _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID, dev_opts), "make /dev read-only")
    for path, fd in binds:
        os.makedirs(path, exist_ok=True)
        _check(libc.mount(f"/proc/self/fd/{fd}".encode(), path.encode(), None, _MS_BIND | _MS_REC, None),
               f"bind {path}")
        _check(libc.mount(b"none", path.encode(), None, _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV, None),
               f"read-only {path}")
        os.close(fd)
    proc_opts = f"size={policy.PROC_BYTES},nr_inodes={policy.PROC_INODES},mode=0555".encode()
    _check(libc.mount(b"tmpfs", b"/proc", b"tmpfs", _MS_NOSUID | _MS_NODEV, proc_opts), "hide /proc")


def _seccomp() -> str:
    """Install the policy's seccomp filter (course_grader.policy; needs no_new_privs). A filter
    that cannot be installed ends the sandbox before any learner code runs."""
    for path in reversed(_SYS_PATH):
        if path not in sys.path:
            sys.path.insert(0, path)
    from course_grader import seccomp
    try:
        return seccomp.install_seccomp()
    except Exception as exc:  # noqa: BLE001 - loudly: no learner code without the filter
        sys.stderr.write(f"course-sandbox: {exc}\n")
        os._exit(96)


_SYS_PATH: list[str] = []


def _drop_capabilities() -> None:
    """Drop every capability (bounding, ambient, effective, permitted, inheritable) and set
    no_new_privs: learner code runs without any privilege, even inside its user namespace."""
    import ctypes
    libc = _c()
    for cap in range(64):
        libc.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP (EINVAL past the last capability)
    libc.prctl(47, 4, 0, 0, 0)  # PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL

    class _Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class _Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    header, data = _Header(0x20080522, 0), (_Data * 2)()  # _LINUX_CAPABILITY_VERSION_3
    _check(libc.capset(ctypes.byref(header), data), "capset")
    _check(libc.prctl(38, 1, 0, 0, 0), "PR_SET_NO_NEW_PRIVS")
    _seccomp()


class Server:
    def __init__(self, req_fd: int, resp_fd: int) -> None:
        from course_grader import protocol
        self.protocol = protocol
        self.req = os.fdopen(req_fd, "rb", buffering=0)
        self.resp_fd = resp_fd
        self.ns: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
        self.ipython = _FakeIPython(self.ns)
        self.ns["get_ipython"] = lambda: self.ipython
        self.ns["display"] = lambda *objs, **kw: print(*objs)
        self.objects: dict[int, Any] = {}
        self.ids: dict[int, int] = {}
        self.next_id = 1
        self.hidden = set(self.ns)

    # -- encoding -----------------------------------------------------------------
    def handle(self, obj: Any) -> dict:
        key = id(obj)
        hid = self.ids.get(key)
        if hid is None or self.objects.get(hid) is not obj:
            hid = self.next_id
            self.next_id += 1
            self.objects[hid] = obj
            self.ids[key] = hid
        tp = type(obj)
        desc = {"__t": "handle", "id": hid, "type": f"{tp.__module__}.{tp.__qualname__}",
                "mro": [f"{c.__module__}.{c.__qualname__}" for c in tp.__mro__],
                "callable": callable(obj), "name": str(getattr(obj, "__name__", ""))[:100]}
        if isinstance(obj, type):
            desc["class_mro"] = [f"{c.__module__}.{c.__qualname__}" for c in obj.__mro__]
        return desc

    def encode(self, value: Any) -> Any:
        """The wire form of a value (:func:`course_grader.protocol.encode`, the grader's own encoder);
        what is not plain data stays here and goes as a handle."""
        return self.protocol.encode(value, self.handle)

    def decode(self, value: Any) -> Any:
        def make(desc: dict) -> Any:
            if desc.get("__t") != "ref" or desc.get("id") not in self.objects:
                raise self.protocol.ProtocolError("unknown object reference")
            return self.objects[desc["id"]]
        return self.protocol.decode(value, make)

    # -- serving ------------------------------------------------------------------
    def read(self) -> Any:
        header = self.protocol.read_exact(self.req.read, self.protocol.header_size())
        size = self.protocol.parse_header(header)
        return self.protocol.unpack(self.protocol.read_exact(self.req.read, size))

    def send(self, obj: Any) -> None:
        try:
            self.protocol.write_message(self.resp_fd, obj)
        except Exception as exc:  # noqa: BLE001 - e.g. an unpicklable leftover
            self.protocol.write_message(self.resp_fd, {"ok": False, "error": {
                "type": type(exc).__name__, "message": f"the result could not be sent: {exc}", "traceback": ""}})

    def error(self, exc: BaseException) -> dict:
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.startswith("<cell")]
        tb = "".join(traceback.format_list(frames))
        try:
            message = str(exc)
        except Exception:  # noqa: BLE001
            message = "<unprintable>"
        return {"type": type(exc).__name__, "message": message[:2000], "traceback": tb[-4000:]}

    def run(self) -> None:
        while True:
            try:
                req = self.read()
            except EOFError:
                return
            op = req.get("op") if isinstance(req, dict) else None
            if op == "exec":
                self.send(self.op_exec(req))
                continue
            out, err = _Capped(), _Capped()
            old = sys.stdout, sys.stderr
            sys.stdout, sys.stderr = out, err
            try:
                value = getattr(self, f"op_{op}")(req)
                reply = {"ok": True, "value": self.encode(value)}
            except BaseException as exc:  # noqa: BLE001 - everything goes back to the grader
                reply = {"ok": False, "error": self.error(exc)}
            finally:
                sys.stdout, sys.stderr = old
            self.send(reply)

    def op_exec(self, req: dict) -> dict:
        name = f"<cell {int(req['cell']) + 1}>"  # numbered from 1, as JupyterLab shows cells
        source = req["source"]
        out, err = _Capped(), _Capped()
        old = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = out, err
        error = None
        try:
            if req.get("ipython") and ("%" in source or "!" in source or "?" in source):
                # IPython syntax (magics, !shell) to Python, here: learner source is never
                # transformed in the grader (where a slow transform would stall everyone)
                try:
                    from IPython.core.inputtransformer2 import TransformerManager
                    source = TransformerManager().transform_cell(source)
                except Exception:  # noqa: BLE001 - compile() reports the SyntaxError
                    pass
            linecache.cache[name] = (len(source), None, source.splitlines(True), name)
            exec(compile(source, name, "exec"), self.ns)
        except BaseException as exc:  # noqa: BLE001 - like "allow errors": keep going
            error = self.error(exc)
        finally:
            sys.stdout, sys.stderr = old
        notes, self.ipython.notes = self.ipython.notes, []
        return {"ok": True, "error": error, "stdout": out.getvalue(), "stderr": err.getvalue(), "notes": notes}

    def op_loaded(self, req: dict) -> Any:
        """Reference modules of course_lib this process loaded (the learner's imports)."""
        names = {n for n in list(sys.modules) if isinstance(n, str) and _is_reference(n)}
        return sorted(names | _IMPORTED)[:50]

    def op_globals(self, req: dict) -> Any:
        skip = {"In", "Out", "exit", "quit", "_", "__", "___"}
        names = {}
        for key, value in list(self.ns.items()):
            if key in self.hidden or key in skip or key.startswith("__") or not isinstance(key, str):
                continue
            if key.startswith("_i") or key.startswith("_oh"):
                continue
            names[key] = value
        return names

    def obj(self, req: dict) -> Any:
        oid = req.get("target")
        if oid not in self.objects:
            raise LookupError("unknown object (the sandbox was restarted?)")
        return self.objects[oid]

    def op_call(self, req: dict) -> Any:
        args = self.decode(req.get("args", []))
        kwargs = self.decode(req.get("kwargs", {"__t": "dict", "items": []}))
        return self.obj(req)(*args, **kwargs)

    def op_getattr(self, req: dict) -> Any:
        return getattr(self.obj(req), req["name"])

    def op_setattr(self, req: dict) -> Any:
        setattr(self.obj(req), req["name"], self.decode(req["value"]))
        return None

    def op_getitem(self, req: dict) -> Any:
        return self.obj(req)[self.decode(req["key"])]

    def op_setitem(self, req: dict) -> Any:
        self.obj(req)[self.decode(req["key"])] = self.decode(req["value"])
        return None

    def op_len(self, req: dict) -> Any:
        return len(self.obj(req))

    def op_bool(self, req: dict) -> Any:
        return bool(self.obj(req))

    def op_contains(self, req: dict) -> Any:
        return self.decode(req["value"]) in self.obj(req)

    def op_iter(self, req: dict) -> Any:
        items = []
        for i, item in enumerate(iter(self.obj(req))):
            if i >= MAX_ITER_ITEMS:
                raise OverflowError(f"iteration produced more than {MAX_ITER_ITEMS} items")
            items.append(item)
        return items

    def op_selfcheck(self, req: dict) -> Any:
        """The learner's self-check, entirely in this sandbox (``course_grader.selfcheck``): the
        checked notebook's cells run in a learner process forked from here
        (:func:`_forked_learner_class`), its test cells here, against proxies. This process never runs
        the notebook's cells, so a notebook that monkeypatches ``torch`` or the toolkit patches
        only its own process; it cannot reach this one (undumpable: no ptrace, no
        ``process_vm_writev``; the learner process holds none of this one's channels)."""
        from course_grader import rpc, selfcheck
        _c().prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0
        learner_class = _forked_learner_class()
        learner_class.close_in_child = (self.req.fileno(), self.resp_fd)
        rpc.Session.sandbox_class = learner_class
        notebook, release = req.get("notebook"), req.get("release")
        if type(notebook) is not bytes or (release is not None and type(release) is not bytes):
            raise TypeError("selfcheck: bytes expected")
        return selfcheck.check_inside(notebook, str(req.get("name")), release, req.get("release_name"),
                                      req.get("assignment"), req.get("config"), req.get("learner"))

    def op_repr(self, req: dict) -> Any:
        return repr(self.obj(req))[:2000]

    def op_str(self, req: dict) -> Any:
        return str(self.obj(req))[:2000]


def _forked_learner_class() -> Any:
    from course_grader.sandbox import Sandbox, SandboxConfig

    class _ForkedLearner(Sandbox):
        """A learner process forked inside the sandbox by the self-check (op_selfcheck): the same
        requests as a sandbox, on a pair of pipes; killed and reaped by its parent."""

        close_in_child: tuple[int, ...] = ()

        def __init__(self, config: SandboxConfig) -> None:
            super().__init__(config)
            self.memory_bound = "the self-check's sandbox"

        @staticmethod
        def prepare(config: SandboxConfig) -> Any:
            """No fork server: :meth:`start` forks this (already sandboxed) process itself."""
            return None

        def start(self) -> None:
            import time
            req_r, req_w = os.pipe()
            resp_r, resp_w = os.pipe()
            pid = os.fork()
            if pid == 0:
                try:
                    for fd in (req_w, resp_r, *_ForkedLearner.close_in_child):
                        os.close(fd)
                    import random

                    import numpy as np
                    import torch
                    random.seed()
                    np.random.seed(int.from_bytes(os.urandom(4), "little"))
                    torch.manual_seed(int.from_bytes(os.urandom(8), "little") >> 1)
                    _serve({}, req_r, resp_w)
                except BaseException:  # noqa: BLE001
                    traceback.print_exc()
                os._exit(98)
            os.close(req_r)
            os.close(resp_w)
            self.pid, self.req_fd, self.resp_fd = pid, req_w, resp_r
            hello = self._receive(time.monotonic() + self.config.startup_timeout, "starting your notebook's process")
            if not isinstance(hello, dict) or not hello.get("ready"):
                self.kill()
                raise RuntimeError("the learner process did not start")

        def kill(self) -> None:
            """SIGKILL the forked learner, then reap it. (Sandbox.kill signals through a fork
            server, which this process has none of: without this, closing waited out the full
            ten seconds of ``_exit_code`` on a learner blocked reading its next request.)"""
            if self.pid is not None and not self._reaped:
                try:
                    os.kill(self.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            super().kill()

        def _exit_code(self, timeout: float) -> int | None:
            import time
            deadline = time.monotonic() + timeout
            while not self._reaped and self.pid is not None:
                try:
                    done, status = os.waitpid(self.pid, os.WNOHANG)
                except ChildProcessError:
                    self._reaped = True
                    break
                if done:
                    self._reaped, self.exit_code = True, os.waitstatus_to_exitcode(status)
                elif time.monotonic() >= deadline:
                    return None
                else:
                    time.sleep(0.01)
            return self.exit_code

    return _ForkedLearner


def _set_name(name: bytes) -> None:
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(15, name, 0, 0, 0)  # PR_SET_NAME (shown in /proc/PID/comm)
    except (OSError, AttributeError):
        pass


def _preload(cfg: dict) -> None:
    global MAX_CAPTURE, MAX_ITER_ITEMS, _NOT_REFERENCE
    for path in reversed(cfg.get("sys_path", [])):
        if path not in sys.path:
            sys.path.insert(0, path)
    from course_grader import policy
    MAX_CAPTURE, MAX_ITER_ITEMS, _NOT_REFERENCE = policy.MAX_CAPTURE, policy.MAX_ITER_ITEMS, policy.NOT_REFERENCE
    threads = str(cfg.get("threads", 1))
    os.environ.setdefault("OMP_NUM_THREADS", threads)
    for mod in policy.SANDBOX_PRELOAD:
        try:
            __import__(mod)
        except Exception:  # noqa: BLE001 - a missing optional module is fine
            pass
    import torch
    torch.set_num_threads(int(threads))


_IMPORTED: set[str] = set()
_FORGOTTEN = False  # done once in the fork server; its forks inherit the result


def _is_reference(name: str) -> bool:
    """A course_lib module with reference answers (loading the real package loads them all)."""
    return name.startswith("course_lib.")


def _forget_reference() -> None:
    """Unload course_lib's reference modules (the zygote imported them) so that using one
    means loading it again, which :meth:`Server.op_loaded` then reports, whatever the way
    (``import``, ``importlib.import_module``, ``__import__``, ``sys.modules``).

    ``course_lib`` itself becomes a stand-in package: reading an attribute
    (``cl.masked_softmax``) loads the real package first. The checks toolkit tests use is
    ``course_grader.checks``, which needs no course_lib.
    """
    import gc
    import importlib
    import types
    global _FORGOTTEN
    real = sys.modules.get("course_lib")
    if real is None or _FORGOTTEN:
        return
    _FORGOTTEN = True
    for name in [n for n in sys.modules if n == "course_lib" or _is_reference(n)]:
        del sys.modules[name]

    class _CourseLib(types.ModuleType):
        def __getattr__(self, attr: str) -> Any:
            if attr.startswith("__"):
                raise AttributeError(attr)
            if sys.modules.get("course_lib") is self:
                del sys.modules["course_lib"]
                try:
                    full = importlib.import_module("course_lib")
                finally:
                    sys.modules.setdefault("course_lib", self)
            else:
                full = sys.modules["course_lib"]
            return getattr(full, attr)

    stub = _CourseLib("course_lib", real.__doc__)
    for attr in ("__file__", "__path__", "__spec__", "__loader__", "__package__"):
        setattr(stub, attr, getattr(real, attr, None))
    sys.modules["course_lib"] = stub
    del real
    gc.collect()

    class _Watch:
        """First on sys.meta_path: notes every reference module looked for (it finds nothing)."""

        @staticmethod
        def find_spec(name: str, path: Any = None, target: Any = None) -> None:
            if isinstance(name, str) and _is_reference(name):
                _IMPORTED.add(name[:100])
            return None

    sys.meta_path.insert(0, _Watch)


def _serve(cfg: dict, req_fd: int, resp_fd: int) -> None:
    try:
        _forget_reference()
    except Exception:  # noqa: BLE001 - the note is best effort, grading goes on
        traceback.print_exc()
    server = Server(req_fd, resp_fd)
    server.send({"ready": True, "pid": os.getpid(), "uid": os.getuid()})
    server.run()
    os._exit(0)


def _child(job: dict, fds: list[int]) -> None:
    """In a fresh fork of the zygote: become one sandbox (never returns)."""
    try:
        _set_name(b"course-sandbox")
        req_fd, resp_fd, log_fd = fds
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        os.close(log_fd)
        os.chdir(job["cwd"])
        os.environ.clear()
        os.environ.update(job["env"])
        if job.get("drop") == "bwrap":
            _drop_capabilities()
        _apply_limits(job)
        import random

        import numpy as np
        import torch
        random.seed()
        np.random.seed(int.from_bytes(os.urandom(4), "little"))
        torch.manual_seed(int.from_bytes(os.urandom(8), "little") >> 1)
        _serve(job, req_fd, resp_fd)
    except BaseException:  # noqa: BLE001
        traceback.print_exc()
    os._exit(98)


def _oom_first() -> None:
    """Make this process (and so the sandbox it forks, and all the learner starts) the first the
    OOM killer takes when the memory cgroup is full (``policy.SANDBOX_OOM_SCORE_ADJ``): memory a
    learner holds outside any mapping (``memfd`` pages) counts for no process, and the fork
    server, not the learner, would otherwise be the largest. Raising one's own score needs no
    privilege; /proc is still the fork server's here."""
    from course_grader import policy
    try:
        with open("/proc/self/oom_score_adj", "w") as fh:
            fh.write(str(policy.SANDBOX_OOM_SCORE_ADJ))
    except OSError:
        pass


def _fork_isolated(sock: Any, job: dict, fds: list[int]) -> tuple[int, str]:
    """Fork a sandbox in namespaces of its own (see :func:`_isolate`); returns (pid, error).

    An intermediate process enters the new namespaces and forks the sandbox, which becomes
    the init of its pid namespace (killing it kills everything the learner started), then
    exits: the sandbox is re-parented to this zygote (a child subreaper), which reaps it.
    """
    import select
    r, w = os.pipe()
    first = os.fork()
    if first == 0:
        try:
            sock.close()
            os.close(r)
            _oom_first()
            _isolate(job)
            pid = os.fork()
            if pid == 0:
                os.close(w)
                _child(job, fds)
            os.write(w, str(pid).encode())
            os._exit(0)
        except BaseException as exc:  # noqa: BLE001
            try:
                os.write(w, ("E" + f"{type(exc).__name__}: {exc}")[:400].encode("utf-8", "replace"))
            finally:
                os._exit(99)
    os.close(w)
    data = b""
    ready, _, _ = select.select([r], [], [], 30)
    if ready:
        data = os.read(r, 512)
    os.close(r)
    try:
        os.waitpid(first, 0)
    except ChildProcessError:
        pass
    text = data.decode("utf-8", "replace")
    if text.isdigit():
        return int(text), ""
    return -1, text[1:] if text.startswith("E") else "no answer"


def _vm_bytes() -> int:
    """This process's address space now (``VmSize`` of /proc/self/status), 0 if unknown."""
    try:
        with open("/proc/self/status", "rb") as fh:
            for line in fh.read(1 << 16).decode("ascii", "replace").splitlines():
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def zygote() -> None:
    """Fork server: imports everything once, then forks one sandbox per request.

    No learner code ever runs in this process: requests come only from the grader on a
    private socket, and each sandbox is a fork that sets its limits and drops its
    privileges before it reads any learner code.
    """
    import socket
    cfg = json.loads(sys.argv[2])
    _set_name(b"course-zygote")
    if cfg.get("isolated"):
        _c().prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: sandboxes are re-parented to us
    if os.geteuid() != 0:
        _c().prctl(4, 0, 0, 0, 0)  # not ptrace-able by its same-uid forks
    sock = socket.socket(fileno=cfg["sock_fd"])
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    _preload(cfg)
    _forget_reference()  # once here (a full gc.collect() costs ~0.1 s): every fork starts clean
    import gc
    gc.freeze()  # what the zygote holds is never collected again: cheaper gc in each sandbox
    # the address space every sandbox starts with (it is a fork of this process): the grader
    # sets each sandbox's RLIMIT_AS to this + the learner's allowance, so any torch build fits
    sock.send(json.dumps({"ready": True, "pid": os.getpid(), "vm_bytes": _vm_bytes()}).encode())
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, 1 << 16, 3)
        except OSError:
            os._exit(0)
        if not msg:
            os._exit(0)
        req = json.loads(msg)
        if req.get("op") == "fork":
            error = ""
            if len(fds) != 3:
                pid, error = -1, "bad request"
            elif req.get("isolate"):
                pid, error = _fork_isolated(sock, req, fds)
            else:
                pid = os.fork()
                if pid == 0:
                    sock.close()
                    _oom_first()
                    _child(req, fds)
            for fd in fds:
                os.close(fd)
            sock.send(json.dumps({"pid": pid, "error": error}).encode())
        elif req.get("op") == "wait":
            import time
            deadline = time.monotonic() + float(req.get("timeout", 0))
            code: int | str | None = None
            while True:
                try:
                    done, status = os.waitpid(int(req["pid"]), os.WNOHANG)
                except ChildProcessError:
                    code = "gone"
                    break
                if done:
                    code = os.waitstatus_to_exitcode(status)
                    break
                if time.monotonic() >= deadline:
                    break
                time.sleep(0.01)
            sock.send(json.dumps({"code": code}).encode())


if __name__ == "__main__":
    if sys.argv[1:2] != ["--zygote"]:
        sys.exit("sandbox_main.py runs only as the grader's fork server (--zygote CONFIG_JSON)")
    zygote()
