"""Trusted-side view of the learner's namespace: proxies that forward to the sandbox.

A test cell runs in the grader's own process, in a namespace where each name the
learner defined is either its plain value (a number, string, tensor, or a list / tuple /
dict of those, copied by value) or a :class:`RemoteObject`: calling it, reading an
attribute, indexing, ``len`` or iterating sends a request to the sandbox, and the result
comes back by value when it is plain data, otherwise as another :class:`RemoteObject`.

So a test like ``attn = DotProductAttention(0.0); out = attn(q, k, v, vl)`` builds the
module *in the sandbox* and gets ``out`` back as an ordinary tensor; the comparison
(``assert_tensor_close``) runs on real torch in the grader, out of the learner's reach.
"""

from __future__ import annotations

import ast
import builtins
import functools
import importlib
import time
from dataclasses import dataclass, field
from typing import Any

from course_grader import protocol
from course_grader.sandbox import (Sandbox, SandboxConfig, SandboxDied, SandboxTimeout, descendants,
                                   kill_descendants)

__all__ = ["LearnerError", "RemoteObject", "Session", "CellRun", "TRUSTED_MODULES"]

#: Modules a learner's ``import`` may bring into the test namespace (as the grader's own copy).
#: Only these exact names: the grader never imports or looks up a module name the learner chose.
TRUSTED_MODULES = ("torch", "torch.nn", "torch.nn.functional", "torch.testing", "numpy", "math", "random",
                   "itertools", "functools", "collections", "typing", "dataclasses", "course_lib", "scipy",
                   "statistics", "fractions", "operator")
#: Names always bound to the grader's own modules in the test namespace.
ALWAYS_TRUSTED = {"torch": "torch", "np": "numpy", "numpy": "numpy", "math": "math",
                  "nn": "torch.nn", "F": "torch.nn.functional"}


_MODULE_CACHE: dict[str, Any] = {}


def trusted_module(name: str) -> Any:
    """The grader's own module for one of the fixed :data:`TRUSTED_MODULES` names, else None."""
    for fixed in TRUSTED_MODULES:
        if name == fixed:
            if fixed not in _MODULE_CACHE:
                try:
                    _MODULE_CACHE[fixed] = importlib.import_module(fixed)
                except ImportError:
                    _MODULE_CACHE[fixed] = None
            return _MODULE_CACHE[fixed]
    return None


def grader_builtins() -> dict[str, Any]:
    """A fresh copy of the grader's builtins for one test cell (whatever the learner defined,
    ``range``, ``len``, ``bool``, ``isinstance`` ... in a test are Python's own)."""
    return dict(vars(builtins))


class LearnerError(Exception):
    """The learner's code raised an exception when a test called it."""

    def __init__(self, label: str, exc_type: str, message: str, traceback: str = "") -> None:
        label, exc_type = protocol.safe_text(label, 200), protocol.safe_text(exc_type, 100)
        message, traceback = protocol.safe_text(message, 2000), protocol.safe_text(traceback, 4000)
        self.label, self.exc_type, self.message, self.learner_traceback = label, exc_type, message, traceback
        self.learner_message = f"{exc_type}: {message}" if message else exc_type
        super().__init__(f"{label} raised {self.learner_message}")


_BUILTIN_ERRORS = {cls.__name__: cls for cls in (TypeError, ValueError, KeyError, IndexError, AttributeError,
                                                 StopIteration, NotImplementedError, RuntimeError, ZeroDivisionError)}
_MIXED: dict[str, type] = {}


def learner_error(label: str, exc_type: str, message: str, traceback: str = "") -> LearnerError:
    """A :class:`LearnerError` that is also an instance of the matching builtin exception
    (so ``len()``, ``list()``, ``hasattr`` and ``for`` loops over proxies behave normally)."""
    base = _BUILTIN_ERRORS.get(exc_type)
    if base is None:
        return LearnerError(label, exc_type, message, traceback)
    if exc_type not in _MIXED:
        _MIXED[exc_type] = type(f"Learner{exc_type}", (LearnerError, base), {})
    return _MIXED[exc_type](label, exc_type, message, traceback)


@dataclass
class CellRun:
    """What happened when one learner cell ran in the sandbox."""

    index: int
    status: str  # "ok" | "error" | "died" | "timeout" | "skipped"
    message: str = ""
    traceback: str = ""
    stdout: str = ""
    stderr: str = ""
    notes: list[str] = field(default_factory=list)


class RemoteObject:
    """Proxy of an object that lives in the sandbox."""

    __slots__ = ("_ro_session", "_ro_gen", "_ro_id", "_ro_type", "_ro_mro", "_ro_label", "_ro_callable",
                 "_ro_class_mro")

    def __init__(self, session: "Session", desc: dict, label: str) -> None:
        set_ = object.__setattr__
        set_(self, "_ro_session", session)
        set_(self, "_ro_gen", session.generation)
        set_(self, "_ro_id", desc["id"])
        mro, class_mro = desc.get("mro"), desc.get("class_mro")
        set_(self, "_ro_type", protocol.safe_text(desc.get("type", "?"), 200))
        set_(self, "_ro_mro", [protocol.safe_text(m, 200) for m in (mro if type(mro) is list else [])[:50]])
        set_(self, "_ro_class_mro", [protocol.safe_text(m, 200)
                                     for m in (class_mro if type(class_mro) is list else [])[:50]])
        set_(self, "_ro_label", protocol.safe_text(label, 200))
        set_(self, "_ro_callable", bool(desc.get("callable")))

    def _ro_op(self, op: str, what: str, **fields: Any) -> Any:
        return self._ro_session.object_op(self, op, what, **fields)

    def _remote_mro(self) -> list[str]:
        return list(self._ro_mro)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        label = self._ro_label
        return self._ro_op("call", f"call to {label}", args=list(args), kwargs=dict(kwargs))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_ro_") or (name.startswith("__") and name.endswith("__")):
            raise AttributeError(name)
        return self._ro_session.object_op(self, "getattr", f"{self._ro_label}.{name}", name=name,
                                          label=f"{self._ro_label}.{name}")

    def __setattr__(self, name: str, value: Any) -> None:
        self._ro_op("setattr", f"setting {self._ro_label}.{name}", name=name, value=value)

    def __getitem__(self, key: Any) -> Any:
        return self._ro_op("getitem", f"{self._ro_label}[...]", key=key)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._ro_op("setitem", f"{self._ro_label}[...] = ...", key=key, value=value)

    def __len__(self) -> int:
        n = self._ro_op("len", f"len({self._ro_label})")
        if type(n) is not int or n < 0:
            raise TypeError(f"len({self._ro_label}) did not return a non-negative int")
        return n

    def __iter__(self) -> Any:
        items = self._ro_op("iter", f"iterating over {self._ro_label}")
        if type(items) is not list:
            raise TypeError(f"iterating over {self._ro_label} failed")
        return iter(items)

    def __bool__(self) -> bool:
        value = self._ro_op("bool", f"bool({self._ro_label})")
        if type(value) is not bool:
            raise TypeError(f"bool({self._ro_label}) did not return a bool")
        return value

    def __contains__(self, item: Any) -> bool:
        return bool(self._ro_op("contains", f"... in {self._ro_label}", value=item) is True)

    def __repr__(self) -> str:
        return f"<learner object {self._ro_label} of type {self._ro_type}>"

    __str__ = __repr__


def _encode_outgoing(value: Any, session: "Session") -> Any:
    """Encode trusted values for the sandbox (:func:`protocol.encode`): plain data by value, the
    learner's own objects as references, anything else refused."""
    def fallback(obj: Any) -> Any:
        import torch
        if type(obj) is RemoteObject:
            if obj._ro_gen != session.generation:
                raise SandboxDied("the sandbox was restarted; this learner object no longer exists")
            return {"__t": "ref", "id": obj._ro_id}
        if isinstance(obj, torch.Tensor) and obj.layout == torch.strided and not obj.is_quantized:
            return protocol.encode(obj.as_subclass(torch.Tensor), fallback)  # a subclass the grader made
        if isinstance(obj, dict) and type(obj) is not dict:
            return protocol.encode(dict(obj), fallback)
        raise TypeError(f"cannot send a {type(obj).__name__} to the learner's code (only tensors, numbers, strings "
                        "and containers of those, nested at most "
                        f"{protocol.MAX_DEPTH} deep, or the learner's own objects)")
    return protocol.encode(value, fallback)


class Session:
    """A sandbox plus the learner cells that ran in it, with restart-once recovery.

    Args:
        config: sandbox limits.
        trusted_imports: import statements (instructor code) executed in every test
            namespace after the learner's names, so ``torch`` or ``assert_tensor_close``
            always mean the grader's own objects.
    """

    #: What runs the learner's cells: a bubblewrap sandbox (or, ``--unsafe-no-sandbox``, a
    #: child process). Inside a sandbox, the self-check sets a process forked there
    #: (:class:`course_grader.sandbox_main.ForkedLearner`).
    sandbox_class: type[Sandbox] = Sandbox

    def __init__(self, config: SandboxConfig, trusted_imports: str = "") -> None:
        self.config = config
        self.trusted_imports = trusted_imports
        self.sandbox: Sandbox | None = None
        self.generation = 0
        self.restarts_left = config.max_restarts
        self.good_cells: list[tuple[int, str]] = []
        self.notes: list[str] = []
        self.death: str | None = None
        self.died_ever = False
        self.timed_out_ever = False
        self.baseline: frozenset[int] = frozenset()
        #: time.monotonic() after which no request is sent (the submission's budget,
        #: restarts included); None: no budget
        self.deadline: float | None = None

    # lifecycle ------------------------------------------------------------------------
    def start(self) -> None:
        self.sandbox_class.prepare(self.config)  # the fork server is long-lived: not part of this submission
        self.baseline = frozenset(descendants())
        self._spawn()

    def _spawn(self) -> None:
        self.generation += 1
        self.sandbox = self.sandbox_class(self.config)
        try:
            self.sandbox.start()
        except SandboxDied as exc:
            self.death = str(exc)
            self.died_ever = True
            raise
        self.death = None

    def close(self) -> None:
        if self.sandbox is not None:
            self.sandbox.close()
        kill_descendants(self.baseline)

    def _mark_dead(self, exc: SandboxDied) -> None:
        self.death = str(exc)
        self.died_ever = True
        self.timed_out_ever |= isinstance(exc, SandboxTimeout)
        if self.sandbox is not None:
            self.sandbox.close()
        kill_descendants(self.baseline)

    def ensure_alive(self) -> None:
        """Restart a dead sandbox (once) and replay the learner cells that succeeded."""
        if self.sandbox is not None and self.sandbox.alive and self.death is None:
            return
        reason = self.death or "the sandbox is not running"
        if self.restarts_left <= 0:
            raise SandboxDied(reason)
        self.restarts_left -= 1
        self.notes.append(f"The sandbox was restarted after: {reason}. Your cells that had run without "
                          "error were run again; the cell that stopped it was skipped.")
        try:
            self._spawn()
            for index, source in self.good_cells:
                reply = self._request({"op": "exec", "cell": index, "source": source, "ipython": True},
                                      self.config.cell_timeout, f"re-running cell {index}")
                del reply
        except SandboxDied as exc:
            self._mark_dead(exc)
            self.restarts_left = 0
            raise SandboxDied(self.death) from None

    def _request(self, message: dict, timeout: float, what: str) -> Any:
        assert self.sandbox is not None
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                exc = SandboxTimeout(f"the grading time budget of {self.config.submission_timeout:g} s for your "
                                     f"notebook was used up (restarts included) before {what}")
                self._mark_dead(exc)
                self.restarts_left = 0
                raise exc
            timeout = min(timeout, left)
        try:
            return self.sandbox.request(message, timeout, what)
        except SandboxDied as exc:
            self._mark_dead(exc)
            raise

    # learner cells --------------------------------------------------------------------
    def exec_cell(self, index: int, source: str) -> CellRun:
        """Run one learner cell (already plain Python) in the sandbox."""
        try:
            self.ensure_alive()
        except SandboxDied as exc:
            return CellRun(index, "skipped", f"not run: {exc}")
        try:
            reply = self._request({"op": "exec", "cell": index, "source": source, "ipython": True},
                                  self.config.cell_timeout, f"cell {index}")
        except SandboxDied as exc:
            return CellRun(index, "timeout" if isinstance(exc, SandboxTimeout) else "died", str(exc))
        if type(reply) is not dict:
            return CellRun(index, "error", "invalid reply from the sandbox")
        self.good_cells.append((index, source))
        err = reply.get("error") or None
        notes = reply.get("notes")
        out = CellRun(index, "ok", stdout=protocol.safe_text(reply.get("stdout", ""), 4000),
                      stderr=protocol.safe_text(reply.get("stderr", ""), 4000),
                      notes=[protocol.safe_text(n, 200) for n in (notes if type(notes) is list else [])[:20]])
        if type(err) is dict:
            out.status = "error"
            out.message = (f"{protocol.safe_text(err.get('type', 'Error'), 100)}: "
                           f"{protocol.safe_text(err.get('message', ''), 2000)}")
            out.traceback = protocol.safe_text(err.get("traceback", ""), 4000)
        return out

    def loaded_reference(self) -> list[str]:
        """Reference modules of course_lib the learner's process loaded (for a note)."""
        if self.sandbox is None or not self.sandbox.alive or self.death is not None:
            return []
        try:
            reply = self._request({"op": "loaded"}, self.config.call_timeout, "listing your imports")
        except SandboxDied:
            return []
        if type(reply) is not dict or reply.get("ok") is not True or type(reply.get("value")) is not list:
            return []
        names = [protocol.safe_text(n, 100) for n in reply["value"][:50] if type(n) is str]
        return [n for n in names if n.replace(".", "_").isidentifier()]

    # test namespace -------------------------------------------------------------------
    def _make(self, label: str) -> Any:
        def make(desc: dict) -> Any:
            tag = desc.get("__t")
            if tag == "handle" and type(desc.get("id")) is int:
                name = desc.get("name") or ""
                return RemoteObject(self, desc, label if label else (name or "learner object"))
            if tag == "module":
                return _ModuleName(str(desc.get("name", "")))
            raise protocol.ProtocolError(f"unexpected {tag}")
        return make

    def _decode_reply(self, reply: Any, label: str, what: str) -> Any:
        if not isinstance(reply, dict) or "ok" not in reply:
            raise SandboxDied(f"invalid reply from the sandbox ({what})")
        if reply["ok"] is True:
            try:
                return protocol.decode(reply.get("value"), self._make(label))
            except protocol.ProtocolError as exc:
                raise LearnerError(label, "TransferError", str(exc)) from None
        err = reply.get("error")
        if not isinstance(err, dict):
            raise SandboxDied(f"invalid reply from the sandbox ({what})")
        raise learner_error(label, str(err.get("type", "Error"))[:100], str(err.get("message", ""))[:2000],
                            str(err.get("traceback", ""))[:4000])

    def object_op(self, obj: RemoteObject, op: str, what: str, label: str | None = None, **fields: Any) -> Any:
        if obj._ro_gen != self.generation or self.death is not None:
            raise SandboxDied(self.death or "the sandbox was restarted; this learner object no longer exists")
        message: dict[str, Any] = {"op": op, "target": obj._ro_id}
        for key, value in fields.items():
            message[key] = value if key == "name" else _encode_outgoing(value, self)
        reply = self._request(message, self.config.call_timeout, what)
        if op == "call":
            return self._decode_call(reply, obj, f"{obj._ro_label}(...)", what)
        try:
            return self._decode_reply(reply, label or obj._ro_label, what)
        except LearnerError as exc:
            if op == "getattr" and exc.exc_type == "AttributeError":
                raise AttributeError(f"{obj._ro_label} has no attribute {fields.get('name')!r}") from None
            raise

    def _decode_call(self, reply: Any, obj: RemoteObject, result_label: str, what: str) -> Any:
        try:
            return self._decode_reply(reply, result_label, what)
        except LearnerError as exc:
            raise learner_error(obj._ro_label, exc.exc_type, exc.message, exc.learner_traceback) from None

    def namespace(self) -> dict[str, Any]:
        """Build a fresh test namespace: learner names as values/proxies + trusted imports."""
        ns: dict[str, Any] = {"__name__": "__grader__", "__builtins__": grader_builtins()}
        builtin_names = set(vars(builtins))
        self.ensure_alive()
        reply = self._request({"op": "globals"}, self.config.call_timeout, "reading your variables")
        if not isinstance(reply, dict) or reply.get("ok") is not True:
            raise SandboxDied("invalid reply from the sandbox (reading your variables)")
        raw = reply.get("value")
        if not isinstance(raw, dict) or raw.get("__t") != "dict" or type(raw.get("items")) is not list:
            raise SandboxDied("invalid reply from the sandbox (reading your variables)")
        for pair in raw["items"]:
            if type(pair) not in (list, tuple) or len(pair) != 2 or type(pair[0]) is not str:
                continue
            name = pair[0]
            if not name.isidentifier() or len(name) > 200 or name in builtin_names or name.startswith("__"):
                continue  # a learner's `range`, `len`, `bool` ... never reaches a test cell
            try:
                value = protocol.decode(pair[1], self._make(name))
            except protocol.ProtocolError:
                continue
            if isinstance(value, _ModuleName):
                module = trusted_module(value.name)
                if module is not None:
                    ns[name] = module
                continue
            ns[name] = value
        for alias, module_name in ALWAYS_TRUSTED.items():
            module = trusted_module(module_name)
            if module is not None:
                ns[alias] = module
        if self.trusted_imports:
            for code in _compiled_imports(self.trusted_imports):
                try:
                    exec(code, ns)
                except Exception:  # noqa: BLE001 - an optional import the grader lacks
                    pass
        return ns


@functools.lru_cache(maxsize=32)
def _compiled_imports(source: str) -> tuple[Any, ...]:
    """The answer key's import statements (instructor code), compiled once per grading process,
    one code object per statement (an import the grader lacks skips only itself)."""
    return tuple(compile(ast.Module(body=[stmt], type_ignores=[]), "<trusted imports>", "exec")
                 for stmt in ast.parse(source).body)


class _ModuleName:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name
