"""Wire format between the trusted grader and the sandbox: one framing, one encoder.

**Framing** (every request and reply on a sandbox's pipes): an 8-byte big-endian length, then
the payload: a 4-byte big-endian length, that many bytes of **JSON** (the control message:
``{"op": "exec", ...}``, ``{"ok": true, "value": ...}``), then, only when the message carries
values JSON cannot hold, one ``torch.save`` archive of a flat list of those **leaves**
(tensors, bytes, complex numbers, dtypes, devices, sizes, integers beyond 64 bits). The JSON
names a leaf as ``{"__t": "leaf", "i": n}``. A message without such values (most control
messages: a cell to run, its printed output) never touches ``torch.save``.

The trusted side parses JSON with the C parser (linear, bounded by :data:`MAX_MESSAGE_BYTES`)
and loads the leaves with ``torch.load(..., weights_only=True)``, which can only rebuild plain
containers, numbers, strings and plain tensors: a sandbox cannot make the grader unpickle an
object of its choosing; the list is then checked to hold leaves only (no containers, so no
shared references to expand). On top of that, :func:`decode` walks each value and rejects
anything outside a small vocabulary (tensor subclasses, non-CPU tensors, untagged dicts),
with a node and tensor-byte budget.

**Values** travel as a tree of plain data in which special things are tagged dicts; one
encoder (:func:`encode`) builds it on both sides:

* ``{"__t": "dict", "items": [[k, v], ...], "ordered": bool}`` — a dict.
* ``{"__t": "tuple", "v": [...]}`` — a tuple (on the wire only: JSON has no tuples).
* ``{"__t": "ndarray", "v": tensor}`` — a NumPy array (sent as a tensor).
* ``{"__t": "handle", "id": int, "type": str, "mro": [...], "repr": str, "callable": bool}``
  — an object that stays in the sandbox (sandbox -> grader only).
* ``{"__t": "ref", "id": int}`` — a handle sent back to the sandbox.
* ``{"__t": "slice", "v": [start, stop, step]}`` and ``{"__t": "ellipsis"}``.
* ``{"__t": "module", "name": str}`` — a module object in the learner's namespace.

This module is imported by both sides and must stay free of grader state.
"""

from __future__ import annotations

import io
import json
import os
import struct
from typing import Any, Callable

from course_grader import policy  # noqa: E402 - the caps are policy's

__all__ = ["MAX_MESSAGE_BYTES", "ProtocolError", "encode", "pack", "unpack", "write_message",
           "read_exact", "decode", "safe_text"]

#: Largest message accepted from the sandbox (a result bigger than this is refused).
MAX_MESSAGE_BYTES = policy.MAX_MESSAGE_BYTES
_HEADER = struct.Struct(">Q")
_JSON_HEADER = struct.Struct(">I")
_SCALARS: tuple = ()
#: torch, imported on first use: the grading parent and the checking process frame nothing and
#: decode nothing, and importing torch costs them ~1.5 s of CPU (the sandbox and workers have it).
torch: Any = None


def _need_torch() -> None:
    global torch, _SCALARS
    import torch as _torch
    _SCALARS = (type(None), bool, int, float, complex, str, bytes, _torch.dtype, _torch.device, _torch.Size)
    torch = _torch
#: Maximum nesting depth of a value sent by value.
MAX_DEPTH = policy.MAX_DEPTH
#: Most nodes (containers, scalars, tensors) one decoded value may have. A pickle can share
#: one list many times, so a few hundred bytes could otherwise expand to billions of nodes.
MAX_NODES = policy.MAX_NODES
#: Most bytes of tensor data one decoded value may describe (``numel * element_size``; a
#: tensor with zero strides describes more than it stores, and would be materialised later).
MAX_TENSOR_BYTES = policy.MAX_TENSOR_BYTES


def safe_text(value: Any, limit: int = 2000) -> str:
    """A string from the untrusted side made safe to store: a real ``str`` (never a subclass
    with tricks), at most ``limit`` characters (a note says how much was cut), lone
    surrogates and other unencodable characters escaped, NUL bytes removed.

    Args:
        value: anything; non-strings give "".
        limit: maximum number of characters kept.
    """
    if type(value) is not str:
        if not isinstance(value, str):
            return ""
        value = str.__str__(value)
    cut = len(value) - limit
    text = value[:limit]
    text = text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "")
    if cut > 0:
        text += f" [... {cut} more characters cut]"
    return text


class ProtocolError(Exception):
    """The other side sent something that is not a valid message."""


#: Scalars JSON carries exactly (a bool is an int; ints are checked for range separately).
_JSON_SCALARS = (type(None), bool, int, float, str)
_INT64 = 1 << 63


def encode(value: Any, fallback: Callable[[Any], Any], depth: int = 0) -> Any:
    """The one encoder of the value vocabulary (both sides): a Python value to a wire tree.

    Plain data (None, bools, numbers, strings, bytes, dtypes, devices, sizes), dense tensors,
    NumPy arrays and scalars, slices, ``...``, lists, tuples and dicts with plain keys are sent
    by value; anything else, and anything nested deeper than :data:`MAX_DEPTH`, goes to
    ``fallback(value)``, which returns its wire form or raises ``TypeError``: the sandbox
    answers with a handle (the object stays there), the grader with a reference to a learner
    object it holds or a refusal.
    """
    if torch is None:
        _need_torch()
    tp = type(value)
    if tp in _SCALARS:
        return value
    if depth > MAX_DEPTH:
        return fallback(value)
    if isinstance(value, torch.Tensor):
        if value.layout != torch.strided or value.is_quantized or (tp is not torch.Tensor
                                                                       and tp is not torch.nn.Parameter):
            return fallback(value)
        return value.detach().cpu().clone().as_subclass(torch.Tensor)
    np = _numpy()
    if np is not None:
        if tp is np.ndarray and value.dtype != object:
            try:
                return {"__t": "ndarray", "v": torch.from_numpy(np.ascontiguousarray(value)).clone()}
            except TypeError:  # a dtype torch has no tensor for
                return fallback(value)
        if isinstance(value, np.generic) and tp.__module__ == "numpy":
            return value.item()
    if tp is list or tp is tuple:
        items = [encode(v, fallback, depth + 1) for v in value]
        return items if tp is list else tuple(items)
    if tp is dict or (tp.__name__ == "OrderedDict" and tp.__module__ == "collections"):
        if all(type(k) in _KEY_TYPES for k in value):
            return {"__t": "dict", "ordered": tp is not dict,
                    "items": [[k, encode(v, fallback, depth + 1)] for k, v in value.items()]}
        return fallback(value)
    if tp is slice:
        return {"__t": "slice", "v": [encode(v, fallback, depth + 1) for v in (value.start, value.stop, value.step)]}
    if value is Ellipsis:
        return {"__t": "ellipsis"}
    if tp.__name__ == "module" and tp.__module__ == "builtins" and type(getattr(value, "__name__", None)) is str:
        return {"__t": "module", "name": value.__name__}
    return fallback(value)


#: Dict keys sent by value (others: the dict goes to the fallback).
_KEY_TYPES = (str, int, float, bool, type(None))


def _numpy() -> Any:
    import sys
    return sys.modules.get("numpy")


def _to_json(obj: Any, leaves: list, depth: int = 0) -> Any:
    """A wire tree to JSON-ready data: tuples tagged, non-JSON scalars and tensors moved to ``leaves``."""
    tp = type(obj)
    if tp is str or tp is bool or tp is float or obj is None:
        return obj
    if tp is int and -_INT64 <= obj < _INT64:
        return obj
    if tp is list:
        return [_to_json(v, leaves, depth + 1) for v in obj]
    if tp is tuple:
        return {"__t": "tuple", "v": [_to_json(v, leaves, depth + 1) for v in obj]}
    if tp is dict:
        if "__t" in obj and type(obj["__t"]) is str and obj["__t"] in ("leaf", "tuple"):
            raise TypeError("a control message may not use the wire's own tags")
        return {str(k): _to_json(v, leaves, depth + 1) for k, v in obj.items()}
    if tp in _SCALARS or isinstance(obj, torch.Tensor):
        leaves.append(obj)
        return {"__t": "leaf", "i": len(leaves) - 1}
    raise TypeError(f"cannot send a {tp.__name__} on the wire; encode it first")


def pack(obj: Any) -> bytes:
    """Frame a message (control data whose values went through :func:`encode`): JSON, plus one
    ``torch.save`` archive of the values JSON cannot carry, if there are any."""
    if torch is None:
        _need_torch()
    leaves: list = []
    control = json.dumps(_to_json(obj, leaves), ensure_ascii=True, separators=(",", ":")).encode("ascii")
    values = b""
    if leaves:
        buf = io.BytesIO()
        torch.save(leaves, buf)
        values = buf.getvalue()
    payload = _JSON_HEADER.pack(len(control)) + control + values
    return _HEADER.pack(len(payload)) + payload


def _check_archive(payload: bytes) -> None:
    """A ``torch.save`` payload is a zip archive whose records ``torch.save`` always stores
    uncompressed. Refuse compressed records and check the sizes the records declare *after*
    decompression, so nothing inflates past :data:`MAX_MESSAGE_BYTES` inside ``torch.load``."""
    import zipfile
    try:
        with zipfile.ZipFile(io.BytesIO(payload)) as zf:
            infos = zf.infolist()
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, RecursionError) as exc:
        raise ProtocolError(f"a malformed result message ({type(exc).__name__})") from None
    total = 0
    for info in infos:
        if info.compress_type != zipfile.ZIP_STORED or info.file_size != info.compress_size:
            raise ProtocolError("refused a compressed record in a result message")
        total += info.file_size
    if total > MAX_MESSAGE_BYTES or len(infos) > 100_000:
        raise ProtocolError(f"a result message unpacks to more than {MAX_MESSAGE_BYTES} bytes; "
                            "return smaller results")


_TRANSFER = ("the learner's result could not be transferred safely ({}); only tensors, numbers, strings, "
             "booleans, None and lists/tuples/dicts of those are sent by value")


def _load_leaves(values: bytes) -> list:
    """The values archive: ``torch.load(weights_only=True)`` after :func:`_check_archive`, and
    then a flat list of leaves only (a container here could share references and expand)."""
    _check_archive(values)
    if torch is None:
        _need_torch()
    try:
        leaves = torch.load(io.BytesIO(values), weights_only=True, map_location="cpu")
    except Exception as exc:  # noqa: BLE001 - any failure means a bad message
        raise ProtocolError(_TRANSFER.format(type(exc).__name__)) from None
    if type(leaves) is not list or len(leaves) > MAX_NODES:
        raise ProtocolError(_TRANSFER.format("the values are not a list of leaves"))
    for leaf in leaves:
        if type(leaf) not in _SCALARS and not isinstance(leaf, torch.Tensor):
            raise ProtocolError(_TRANSFER.format(f"a {type(leaf).__name__} among the values"))
    return leaves


def unpack(payload: bytes) -> Any:
    """A payload (after the 8-byte length) back to the message: the values archive loaded by
    :func:`_load_leaves`, then the JSON parsed with the leaves and tuples put back in place.
    Raises :class:`ProtocolError` for anything malformed."""
    if len(payload) < _JSON_HEADER.size:
        raise ProtocolError("a malformed message (too short)")
    (size,) = _JSON_HEADER.unpack_from(payload)
    if size > len(payload) - _JSON_HEADER.size:
        raise ProtocolError("a malformed message (its JSON part is cut)")
    control, values = payload[_JSON_HEADER.size:_JSON_HEADER.size + size], payload[_JSON_HEADER.size + size:]
    leaves = _load_leaves(values) if values else []

    def hook(obj: dict) -> Any:
        tag = obj.get("__t")
        if tag == "leaf":
            index = obj.get("i")
            if len(obj) != 2 or type(index) is not int or not 0 <= index < len(leaves):
                raise ProtocolError("a malformed message (a leaf that is not among the values)")
            return leaves[index]
        if tag == "tuple":
            items = obj.get("v")
            if len(obj) != 2 or type(items) is not list:
                raise ProtocolError("a malformed message (a malformed tuple)")
            return tuple(items)
        return obj

    try:
        return json.loads(control.decode("utf-8"), object_hook=hook)
    except ProtocolError:
        raise
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise ProtocolError(f"a malformed message ({type(exc).__name__})") from None


def write_message(fd: int, obj: Any) -> None:
    """Write one framed message to a file descriptor."""
    data = pack(obj)
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def read_exact(read: Callable[[int], bytes], n: int) -> bytes:
    """Read exactly ``n`` bytes with ``read`` (raises EOFError on a short read)."""
    chunks = []
    while n:
        chunk = read(n)
        if not chunk:
            raise EOFError("connection closed")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def header_size() -> int:
    return _HEADER.size


def parse_header(header: bytes) -> int:
    (size,) = _HEADER.unpack(header)
    if size > MAX_MESSAGE_BYTES:
        raise ProtocolError(f"a message of {size} bytes exceeds the limit of {MAX_MESSAGE_BYTES} bytes; "
                            "return smaller results")
    return size


class _Budget:
    """Nodes and tensor bytes left for one :func:`decode` call."""

    __slots__ = ("nodes", "tensor_bytes")

    def __init__(self) -> None:
        self.nodes = MAX_NODES
        self.tensor_bytes = MAX_TENSOR_BYTES

    def take(self, nodes: int = 1, tensor_bytes: int = 0) -> None:
        self.nodes -= nodes
        self.tensor_bytes -= tensor_bytes
        if self.nodes < 0:
            raise ProtocolError(f"refused a value of more than {MAX_NODES} parts; return smaller results")
        if self.tensor_bytes < 0:
            raise ProtocolError(f"refused tensors of more than {MAX_TENSOR_BYTES} bytes in one value; "
                                "return smaller results")


def decode(obj: Any, make_handle: Callable[[dict], Any] | None, depth: int = 0,
           budget: "_Budget | None" = None) -> Any:
    """Validate and decode a tree received from the other side.

    Every node visited counts against one budget (:data:`MAX_NODES`, :data:`MAX_TENSOR_BYTES`),
    shared references included: a value the other side built to expand is refused, not expanded.

    Args:
        obj: the result of :func:`unpack`.
        make_handle: builds a local proxy from a handle description; None refuses handles.

    Returns:
        Plain Python data with tensors; handles replaced by ``make_handle(...)``.

    Raises:
        ProtocolError: anything outside the wire vocabulary (e.g. a tensor subclass).
    """
    if torch is None:
        _need_torch()
    if depth > MAX_DEPTH + 5:
        raise ProtocolError("value nested too deeply")
    if budget is None:
        budget = _Budget()
    budget.take()
    tp = type(obj)
    if tp in _SCALARS:
        if tp is torch.Size:
            budget.take(len(obj))
        elif tp in (str, bytes):
            budget.take(len(obj) // 4096)
        return obj
    if isinstance(obj, torch.Tensor):
        if tp is torch.nn.Parameter:
            obj = obj.detach()
        elif tp is not torch.Tensor:
            raise ProtocolError(f"refused a tensor subclass ({tp.__name__}); return a plain torch.Tensor")
        if obj.layout != torch.strided or obj.device.type != "cpu" or obj.is_quantized:
            raise ProtocolError("refused a tensor that is not a dense CPU tensor")
        budget.take(tensor_bytes=obj.numel() * obj.element_size())
        return obj.detach()
    if tp is list:
        return [decode(v, make_handle, depth + 1, budget) for v in obj]
    if tp is tuple:
        return tuple(decode(v, make_handle, depth + 1, budget) for v in obj)
    if tp is dict:
        tag = obj.get("__t")
        if tag == "dict":
            items = obj.get("items")
            if type(items) is not list:
                raise ProtocolError("malformed dict")
            out: dict = {}
            if obj.get("ordered"):
                from collections import OrderedDict
                out = OrderedDict()
            for pair in items:
                if type(pair) not in (list, tuple) or len(pair) != 2:
                    raise ProtocolError("malformed dict item")
                key = decode(pair[0], None, depth + 1, budget)
                if type(key) not in (str, int, float, bool, tuple, type(None)):
                    raise ProtocolError("unsupported dict key")
                out[key] = decode(pair[1], make_handle, depth + 1, budget)
            return out
        if tag == "ndarray":
            t = decode(obj.get("v"), None, depth + 1, budget)
            if not isinstance(t, torch.Tensor):
                raise ProtocolError("malformed array")
            return t.numpy()
        if tag == "slice":
            parts = obj.get("v")
            if type(parts) not in (list, tuple) or len(parts) != 3:
                raise ProtocolError("malformed slice")
            return slice(*(decode(p, None, depth + 1, budget) for p in parts))
        if tag == "ellipsis":
            return Ellipsis
        if tag in ("handle", "ref", "module"):
            if make_handle is None:
                raise ProtocolError(f"unexpected {tag}")
            return make_handle(obj)
        raise ProtocolError(f"unknown tag {tag!r}")
    raise ProtocolError(f"refused a value of type {tp.__name__}")
