"""Wire format between the trusted grader and the sandbox.

Messages are length-prefixed ``torch.save`` payloads. The trusted side always loads them
with ``torch.load(..., weights_only=True)``, which can only rebuild plain containers,
numbers, strings and plain tensors: a sandbox cannot make the grader unpickle an object
of its choosing. On top of that, :func:`decode` walks the loaded tree and rejects
anything outside a small vocabulary (tensor subclasses, non-CPU tensors, untagged dicts).

Values travel as a tree of plain Python data in which special things are tagged dicts:

* ``{"__t": "dict", "items": [[k, v], ...], "ordered": bool}`` — a dict.
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
import os
import struct
from typing import Any, Callable

import torch

from course_grader import policy  # noqa: E402 - the caps are policy's

__all__ = ["MAX_MESSAGE_BYTES", "ProtocolError", "pack", "unpack", "write_message",
           "read_exact", "decode", "safe_text"]

#: Largest message accepted from the sandbox (a result bigger than this is refused).
MAX_MESSAGE_BYTES = policy.MAX_MESSAGE_BYTES
_HEADER = struct.Struct(">Q")
_SCALARS = (type(None), bool, int, float, complex, str, bytes, torch.dtype, torch.device, torch.Size)
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


def pack(obj: Any) -> bytes:
    """Serialise ``obj`` (already encoded into plain data) to a framed message."""
    buf = io.BytesIO()
    torch.save(obj, buf)
    payload = buf.getvalue()
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


def unpack(payload: bytes) -> Any:
    """Load a payload with ``weights_only=True`` (no arbitrary unpickling), after checking
    the archive's records (:func:`_check_archive`)."""
    _check_archive(payload)
    try:
        return torch.load(io.BytesIO(payload), weights_only=True, map_location="cpu")
    except Exception as exc:  # noqa: BLE001 - any failure means a bad message
        raise ProtocolError(f"the learner's result could not be transferred safely "
                            f"({type(exc).__name__}); only tensors, numbers, strings, booleans, None "
                            "and lists/tuples/dicts of those are sent by value") from None


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
