"""A small toolkit for writing test cells of graded notebooks (``from course_grader.checks import ...``).

It belongs to the grader: the grader seeds it for each test cell (:func:`begin_test`), and
the sandbox imports it from here without loading ``course_lib`` (the library learners read).

The same test-cell code runs in two places:

* in the learner's Jupyter kernel (public tests, for self-checking), where names such as
  ``masked_softmax`` are the learner's own objects;
* in the trusted grader (``course-grade``), where those names are proxies to a sandbox
  and every value that comes back is a plain tensor or number.

So a check must only *call* the learner's objects and compare what they return; it must
not rely on ``isinstance(obj, nn.Module)`` (use :func:`assert_isinstance`) or mutate the
learner's tensors in place (use ``load_state_dict`` to copy weights).

Fresh inputs: :func:`fresh_rng` seeds a ``torch.Generator`` from ``os.urandom`` (or, when
the grader replays with ``--seed``, from that seed and the test's ``grade_id``), so a
learner cannot hard-code answers for fixed inputs.

Every failure raises ``AssertionError`` whose message says what was checked and how it
failed, e.g. ``masked_softmax: max abs error 0.31 at index (1, 0, 2) (expected 0.5, got 0.19;
atol 1e-05, rtol 0.0001; 4 of 30 values out of tolerance)``; the shape is named only when it
differs from the expected one.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import traceback
from decimal import Decimal
from typing import Any, Callable, Iterable, Sequence

import torch

from course_grader.i18n import N_

__all__ = [
    "CheckFailed", "fresh_rng", "fresh_seed", "rand_int", "randn", "assert_tensor_close", "assert_shape",
    "assert_equal", "assert_number", "assert_choice", "assert_isinstance", "call", "call_method",
    "as_number", "as_shape",
]

class CheckFailed(AssertionError):
    """A failed check. In Jupyter, its traceback shows only the learner's frames.

    IPython always shows the frame an exception was raised in, which for a check is this
    module's; ``_render_traceback_`` (IPython's hook) leaves out every frame of this module
    and shows the learner's code that raised (for :func:`call`), the test cell's line and
    the message.
    """

    def _render_traceback_(self) -> list[str]:
        lines: list[str] = []
        cause = self.__cause__
        if cause is not None and cause.__traceback__ is not None:
            theirs = [f for f in traceback.extract_tb(cause.__traceback__) if _shown(f.filename)]
            if theirs:
                lines.append("Traceback of your code (most recent call last):")
                lines.extend(item.rstrip("\n") for item in traceback.format_list(theirs))
                lines.append(f"{type(cause).__name__}: {cause}" if str(cause) else type(cause).__name__)
                lines.append("")
        here = [f for f in traceback.extract_tb(self.__traceback__) if _shown(f.filename)] \
            if self.__traceback__ is not None else []
        if here:
            lines.append("Check that failed:")
            lines.extend(item.rstrip("\n") for item in traceback.format_list(here))
        lines.append(f"AssertionError: {self}")
        return lines


def _shown(filename: str) -> bool:
    """Frames worth showing a learner: not this module's, not IPython's machinery."""
    return filename != __file__ and not any(part in filename for part in ("/IPython/", "/ipykernel/"))


# Set by the grader for exact replay (``course-grade --seed``); None = os.urandom.
_seed_base: bytes | None = None
_seed_counter = 0


def begin_test(seed_base: bytes | None, grade_id: str) -> None:
    """The grader's hook (runner and fairness harness): make :func:`fresh_rng` reproducible for one test cell (or not)."""
    global _seed_base, _seed_counter
    _seed_base = None if seed_base is None else seed_base + b"|" + grade_id.encode()
    _seed_counter = 0


def fresh_seed() -> int:
    """A 63-bit seed: random (``os.urandom``) unless the grader replays a fixed seed."""
    global _seed_counter
    if _seed_base is None:
        return int.from_bytes(os.urandom(8), "little") >> 1
    _seed_counter += 1
    digest = hashlib.sha256(_seed_base + b"#" + str(_seed_counter).encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def seeded_draws() -> int:
    """How many seeds :func:`fresh_seed` has drawn from the grader's stream since the test began
    (the fairness harness: a test that drew none, and nothing from torch's global generator, gives
    the same verdict under every ``--seed``)."""
    return _seed_counter


def fresh_rng(seed: int | None = None) -> torch.Generator:
    """A CPU ``torch.Generator`` seeded with ``seed`` or :func:`fresh_seed`.

    Args:
        seed: fixed seed (for examples in public tests); None draws a fresh one.

    Returns:
        A generator to pass as ``generator=`` to ``torch.randn`` / ``torch.randint``.
    """
    gen = torch.Generator()
    gen.manual_seed(fresh_seed() if seed is None else seed)
    return gen


def rand_int(rng: torch.Generator, low: int, high: int) -> int:
    """A random integer in ``[low, high]`` (both ends included)."""
    if high < low:
        raise ValueError(f"rand_int needs low <= high, got {low} > {high}")
    return int(torch.randint(low, high + 1, (1,), generator=rng).item())


def randn(rng: torch.Generator, *shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Standard normal tensor of the given shape drawn from ``rng``."""
    return torch.randn(*shape, generator=rng, dtype=dtype)


def _to_tensor(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value
    try:
        import numpy as np
        if isinstance(value, np.ndarray) and value.dtype != object:
            return torch.from_numpy(value)
    except ImportError:  # pragma: no cover - numpy is a dependency
        pass
    return value


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return N_("a tensor of shape {shape}").format(shape=tuple(value.shape))
    return f"{type(value).__name__} {_short_repr(value)}"


def _short_repr(value: Any, limit: int = 80) -> str:
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a broken __repr__ must not hide the real failure
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def assert_shape(actual: Any, shape: Sequence[int], *, name: str) -> None:
    """Check that ``actual`` is a tensor of exactly ``shape``."""
    __tracebackhide__ = True
    actual = _to_tensor(actual)
    if not isinstance(actual, torch.Tensor):
        raise CheckFailed(N_("{name}: expected a tensor of shape {shape}, got {got}").format(
            name=name, shape=tuple(shape), got=_describe(actual)))
    if tuple(actual.shape) != tuple(shape):
        raise CheckFailed(N_("{name}: expected shape {shape}, got {got}").format(
            name=name, shape=tuple(shape), got=tuple(actual.shape)))


def assert_tensor_close(actual: Any, expected: Any, *, name: str, atol: float = 1e-5,
                        rtol: float = 1e-4, check_dtype: bool = False) -> None:
    """Compare a learner's tensor with a reference: type, shape, dtype, NaN/inf, values.

    Passes when ``|actual - expected| <= atol + rtol * |expected|`` everywhere, with NaN
    and infinities required at the same places.

    Args:
        actual: the learner's result (tensor or NumPy array).
        expected: the reference result.
        name: what is being checked, e.g. ``"masked_softmax weights"``.
        atol: absolute tolerance.
        rtol: relative tolerance.
        check_dtype: also require the same dtype (otherwise both are compared in float64).

    Raises:
        AssertionError: with the shape, dtype, NaN position or largest error and its index.
    """
    __tracebackhide__ = True
    actual, expected = _to_tensor(actual), _to_tensor(expected)
    if not isinstance(expected, torch.Tensor):
        expected = torch.as_tensor(expected)
    if not isinstance(actual, torch.Tensor):
        raise CheckFailed(N_("{name}: expected a tensor of shape {shape}, got {got}").format(
            name=name, shape=tuple(expected.shape), got=_describe(actual)))
    if tuple(actual.shape) != tuple(expected.shape):
        raise CheckFailed(N_("{name}: expected shape {shape}, got {got}").format(
            name=name, shape=tuple(expected.shape), got=tuple(actual.shape)))
    if check_dtype and actual.dtype != expected.dtype:
        raise CheckFailed(N_("{name}: expected dtype {expected}, got {got}").format(
            name=name, expected=expected.dtype, got=actual.dtype))
    if actual.is_complex() or expected.is_complex():
        raise CheckFailed(N_("{name}: complex tensors are not supported by this check").format(name=name))
    a = actual.detach().to("cpu", torch.float64)
    e = expected.detach().to("cpu", torch.float64)
    if a.numel() == 0:
        return
    nan_a, nan_e = torch.isnan(a), torch.isnan(e)
    if not torch.equal(nan_a, nan_e):
        idx = _first_index(nan_a != nan_e)
        where = (N_("{name}: value at index {index} is NaN (expected {expected}, got {got})") if bool(nan_a[idx])
                 else N_("{name}: value at index {index} is not NaN (expected {expected}, got {got})"))
        raise CheckFailed(where.format(name=name, index=_fmt_idx(idx), expected=_fmt(e[idx]), got=_fmt(a[idx])))
    inf_a = torch.isinf(a)
    inf_mismatch = (inf_a != torch.isinf(e)) | (inf_a & (a != e))
    if bool(inf_mismatch.any()):
        idx = _first_index(inf_mismatch)
        raise CheckFailed(N_("{name}: infinite value mismatch at index {index} (expected {expected}, got {got})").format(
            name=name, index=_fmt_idx(idx), expected=_fmt(e[idx]), got=_fmt(a[idx])))
    finite = ~(nan_a | inf_a)
    err = torch.where(finite, (a - e).abs(), torch.zeros_like(a))
    bound = atol + rtol * torch.where(finite, e.abs(), torch.zeros_like(a))
    bad = err > bound
    if bool(bad.any()):
        idx = _first_max(torch.where(bad, err, torch.full_like(err, -1.0)))
        raise CheckFailed(N_(
            "{name}: max abs error {error} at index {index} (expected {expected}, got {got}; atol {atol}, "
            "rtol {rtol}; {bad} of {total} values out of tolerance)").format(
                name=name, error=_number_text(float(err[idx]), digits=3), index=_fmt_idx(idx), expected=_fmt(e[idx]),
                got=_fmt(a[idx]), atol=f"{atol:g}", rtol=f"{rtol:g}", bad=int(bad.sum()), total=a.numel()))


def _unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    out = []
    for size in reversed(shape):
        out.append(flat % size)
        flat //= size
    return tuple(reversed(out))


def _first_index(mask: torch.Tensor) -> tuple[int, ...]:
    flat = int(torch.nonzero(mask.reshape(-1))[0])
    return _unravel(flat, tuple(mask.shape))


def _first_max(err: torch.Tensor) -> tuple[int, ...]:
    return _unravel(int(torch.argmax(err.reshape(-1))), tuple(err.shape))


def _fmt_idx(idx: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(i) for i in idx) + ("," if len(idx) == 1 else "") + ")"


def _fmt(x: torch.Tensor) -> str:
    v = x.item()
    return _number_text(v, digits=6) if isinstance(v, float) else str(v)


def _number_text(value: float, digits: int | None = None) -> str:
    """A number as a learner reads it: in full, never in exponent notation for an everyday
    size (``1048576``, not ``1.04858e+06``). An integral value prints as an integer; any
    other as the shortest text that reads back as the same float (``digits``: that many
    significant digits instead, for values computed from tensors)."""
    if not math.isfinite(value):
        return str(value)
    if value == int(value) and abs(value) < 1e18:
        return str(int(value))
    text = repr(float(value)) if digits is None else f"{value:.{digits}g}"
    if "e" in text and 1e-6 <= abs(value) < 1e18:
        text = format(Decimal(text), "f")
    return text


def assert_equal(actual: Any, expected: Any, *, name: str, show_expected: bool = False) -> None:
    """Exact equality of plain values (numbers, strings, tuples, shapes).

    Only plain Python values are accepted, so an object with an always-true ``__eq__``
    does not pass. Tensors are compared with ``torch.equal`` (same shape and values).

    The failure message shows what the learner gave, never the expected value unless
    ``show_expected`` (a hidden short answer must not reach every wrong learner's feedback;
    public checks whose expected value is in the released notebook anyway may show it).
    """
    __tracebackhide__ = True
    if isinstance(expected, torch.Size):
        expected = tuple(expected)
    if isinstance(actual, torch.Size):
        actual = tuple(actual)
    def wrong(got: str) -> CheckFailed:
        if show_expected:
            return CheckFailed(N_("{name}: expected {expected}, got {got}, which is not the right value").format(
                name=name, expected=_short_repr(expected), got=got))
        return CheckFailed(N_("{name}: got {got}, which is not the right value").format(name=name, got=got))

    if isinstance(expected, torch.Tensor):
        actual = _to_tensor(actual)
        if not isinstance(actual, torch.Tensor) or actual.shape != expected.shape or not torch.equal(actual, expected):
            raise wrong(_short_repr(actual))
        return
    if not _is_plain_value(actual):
        raise wrong(_describe(actual))
    if type(actual) is bool and type(expected) is not bool or actual != expected:
        raise wrong(_short_repr(actual))


def _is_plain_value(value: Any) -> bool:
    if type(value) in (type(None), bool, int, float, complex, str, bytes):
        return True
    if type(value) in (tuple, list):
        return all(_is_plain_value(v) for v in value)
    if type(value) is dict:
        return all(_is_plain_value(k) and _is_plain_value(v) for k, v in value.items())
    return False


def _numpy_scalar_value(value: Any) -> Any:
    """A NumPy scalar (``np.float64(0.5)``, ``np.int64(3)``) as its Python value, as the grader's
    transport does with every value that leaves the sandbox; anything else unchanged."""
    if type(value).__module__ == "numpy":
        try:
            import numpy as np
        except ImportError:  # pragma: no cover - numpy is a dependency
            return value
        if isinstance(value, np.generic):
            return value.item()
    return value


def as_number(answer: Any, *, name: str) -> float:
    """The one rule for a numeric answer, used by every public and hidden check.

    Accepted: an ``int`` or ``float``; a NumPy scalar (``np.float64``, ``np.int64``, ...); a
    one-element tensor; a string holding a number (``"64"``). Refused with a message: ``None``
    (not answered), ``bool`` and anything else.

    Args:
        answer: the learner's answer.
        name: the question, e.g. ``"ANSWER_VARIANCE"``.

    Returns:
        The answer as a float.
    """
    __tracebackhide__ = True
    if answer is None:
        raise CheckFailed(N_("{name}: not answered (still None)").format(name=name))
    answer = _numpy_scalar_value(answer)
    if type(answer) in (int, float):
        try:
            return float(answer)
        except OverflowError:   # an int of hundreds of digits: no float holds it
            raise CheckFailed(N_("{name}: expected a number of ordinary size, got an integer of {bits} bits").format(
                name=name, bits=answer.bit_length())) from None
    if type(answer) is str:
        try:
            return float(answer.strip())
        except ValueError:
            raise CheckFailed(N_("{name}: expected a number, got the string {got}").format(
                name=name, got=_short_repr(answer))) from None
    if type(answer) is torch.Tensor and answer.numel() == 1 and not answer.dtype.is_complex \
            and answer.dtype != torch.bool:
        return float(answer.item())
    raise CheckFailed(N_("{name}: expected a number, got {got}").format(name=name, got=_describe(answer)))


def as_shape(answer: Any, *, name: str) -> tuple[int, ...]:
    """The one rule for a shape answer, used by every public and hidden check.

    Accepted: a ``tuple``, ``list`` or ``torch.Size`` of integers (Python ints or NumPy
    integer scalars). Refused with a message: ``None`` (not answered), ``bool`` entries and
    anything else.

    Args:
        answer: the learner's answer, e.g. ``(4, 9, 11)`` or ``weights.shape``.
        name: the question, e.g. ``"ANSWER_WEIGHTS_SHAPE"``.

    Returns:
        The shape as a tuple of ints.
    """
    __tracebackhide__ = True
    if answer is None:
        raise CheckFailed(N_("{name}: not answered (still None)").format(name=name))
    if type(answer) in (tuple, list, torch.Size):
        dims = [_numpy_scalar_value(n) for n in answer]
        if all(type(n) is int for n in dims):
            return tuple(dims)
    raise CheckFailed(N_("{name}: expected a tuple of ints, got {got}").format(name=name, got=_describe(answer)))


def assert_number(answer: Any, expected: float, *, name: str, rel_tol: float = 1e-6,
                  abs_tol: float = 1e-9) -> None:
    """Check a numeric short answer (whatever :func:`as_number` accepts).

    Args:
        answer: the learner's answer; ``None`` (not answered) fails with a clear message.
        expected: the right value.
        name: the question, e.g. ``"ANSWER_VARIANCE"``.
        rel_tol: relative tolerance.
        abs_tol: absolute tolerance.
    """
    __tracebackhide__ = True
    value = as_number(answer, name=name)
    if not math.isclose(value, expected, rel_tol=rel_tol, abs_tol=abs_tol):
        raise CheckFailed(N_("{name}: {value} is not the right value").format(name=name, value=_number_text(value)))


def _normalise_choice(value: str) -> str:
    text = value.strip().lower()
    for ch in ")].:":
        if text.endswith(ch):
            text = text[:-1].strip()
    if text.startswith("(") or text.startswith("["):
        text = text[1:].strip()
    return text


def assert_choice(answer: Any, correct: str | Iterable[str], *, name: str,
                  choices: Iterable[str] | None = None) -> None:
    """Check a multiple-choice answer given as a letter or a word, e.g. ``"b"``.

    Case, surrounding spaces and a trailing ``)`` or ``.`` are ignored.

    Args:
        answer: the learner's answer (a string).
        correct: the correct choice, or several accepted spellings.
        name: the question, e.g. ``"ANSWER_MASK"``.
        choices: all valid choices; an answer outside them gets a message listing them.
    """
    __tracebackhide__ = True
    if answer is None:
        raise CheckFailed(N_("{name}: not answered (still None)").format(name=name))
    if type(answer) is not str:
        raise CheckFailed(N_("{name}: expected one of the choices as a string, got {got}").format(
            name=name, got=_describe(answer)))
    accepted = {_normalise_choice(c) for c in ([correct] if isinstance(correct, str) else correct)}
    given = _normalise_choice(answer)
    if choices is not None:
        valid = [_normalise_choice(c) for c in choices]
        if given not in valid:
            raise CheckFailed(N_("{name}: {answer} is not one of the choices {choices}").format(
                name=name, answer=repr(answer), choices=", ".join(valid)))
    if given not in accepted:
        raise CheckFailed(N_("{name}: {answer} is not the right choice").format(name=name, answer=repr(answer)))


def assert_isinstance(obj: Any, cls: type | str, *, name: str) -> None:
    """``isinstance`` that also works on the grader's proxies of learner objects.

    Args:
        obj: the object to check.
        cls: a class, or its qualified name such as ``"torch.nn.Module"``.
    """
    __tracebackhide__ = True
    qualname = cls if isinstance(cls, str) else f"{cls.__module__}.{cls.__qualname__}"
    mro = getattr(type(obj), "_remote_mro", None)
    if callable(mro):
        names = mro(obj)
    else:
        names = [f"{c.__module__}.{c.__qualname__}" for c in type(obj).__mro__]
    aliases = {qualname, qualname.replace("torch.nn.modules.module.", "torch.nn.")}
    if not any(n in aliases or n.replace("torch.nn.modules.module.", "torch.nn.") in aliases for n in names):
        raise CheckFailed(N_("{name}: expected an instance of {expected}, got {got}").format(
            name=name, expected=qualname, got=names[0] if names else "?"))


def _is_fatal(exc: BaseException) -> bool:
    return bool(getattr(exc, "grader_fatal", False))


# Set by the grader while it compares a learner's outputs with a typical mistake's (issue 30):
# what each call() of one test cell returned, in order (course_grader.runner).
_recorded: list | None = None
#: At most this many outputs are kept per test cell, each of at most this many numbers.
MAX_RECORDED, MAX_RECORDED_NUMEL = 200, 200_000


def record_calls(on: bool) -> list | None:
    """The grader's hook: start recording what :func:`call` returns (``on``), or stop and get
    the outputs recorded since the start (a list; None when recording was off)."""
    global _recorded
    out = _recorded
    _recorded = [] if on else None
    return out


def _snapshot(value: Any, depth: int = 0) -> Any:
    """What :func:`call` returned, as plain data to compare: a tensor as float64 on the CPU, a
    number as a float, a tuple or list of those; anything else as its type's name."""
    if type(value) is torch.Tensor and not value.is_complex() and value.numel() <= MAX_RECORDED_NUMEL:
        return value.detach().to("cpu", torch.float64).clone()
    if type(value) in (int, float, bool):
        return float(value)
    if type(value) in (tuple, list) and depth < 2 and len(value) <= 16:
        return tuple(_snapshot(v, depth + 1) for v in value)
    return type(value).__name__


def _value(x: Any) -> bool:
    return type(x) in (torch.Tensor, float) or (type(x) is tuple and any(_value(v) for v in x))


def has_values(recording: list) -> bool:
    """A recording (:func:`record_calls`) holds at least one value to compare (a tensor, a
    number, a tuple of those), not only the names of types such as a learner's module."""
    return any(_value(x) for x in recording)


def same_outputs(a: list, b: list, *, rtol: float = 1e-4, atol: float = 1e-5) -> bool:
    """Two recordings (:func:`record_calls`) of the same test cell on the same inputs hold the
    same outputs, within the tolerance of :func:`assert_tensor_close`, and at least one of them
    a value (a tensor, a number, a tuple of those), not only the names of types."""
    def same(x: Any, y: Any) -> bool:
        if type(x) is torch.Tensor or type(y) is torch.Tensor:
            return (type(x) is type(y) is torch.Tensor and x.shape == y.shape
                    and bool(torch.allclose(x, y, rtol=rtol, atol=atol, equal_nan=True)))
        if type(x) is tuple and type(y) is tuple:
            return len(x) == len(y) and all(same(p, q) for p, q in zip(x, y))
        if type(x) is float and type(y) is float:
            return math.isclose(x, y, rel_tol=rtol, abs_tol=atol) or (math.isnan(x) and math.isnan(y))
        return x == y

    return len(a) == len(b) > 0 and has_values(a) and all(same(x, y) for x, y in zip(a, b))


def call(fn: Callable[..., Any], *args: Any, name: str | None = None, **kwargs: Any) -> Any:
    """Call the learner's ``fn(*args, **kwargs)``; if it raises, fail with a clear message.

    Args:
        fn: the learner's function, class or module.
        name: how to name it in the message (default: ``fn.__name__``).

    Returns:
        Whatever ``fn`` returns.
    """
    __tracebackhide__ = True  # IPython and pytest: show the learner's frames, not this one
    label = name or getattr(fn, "__name__", None) or N_("your function")
    try:
        result = fn(*args, **kwargs)
        if _recorded is not None and len(_recorded) < MAX_RECORDED:
            _recorded.append(_snapshot(result))
        return result
    except Exception as exc:  # noqa: BLE001 - reported to the learner
        if _is_fatal(exc):
            raise
        detail = getattr(exc, "learner_message", None) or (f"{type(exc).__name__}: {exc}" if str(exc)
                                                           else type(exc).__name__)
        failure = CheckFailed(_state_dict_message(label, detail)
                              or N_("calling {label} raised {detail}").format(label=label, detail=detail))
        remote = getattr(exc, "learner_traceback", None)
        failure.learner_traceback = remote or ""  # type: ignore[attr-defined]
        if remote is not None:  # in the grader: the sandbox sent the learner's frames; ours are not shown
            raise failure from None
        raise failure from exc  # in the learner's kernel: their own traceback, above this message


_STATE_DICT = re.compile(r"Error\(s\) in loading state_dict for [^:\n]*:")
_KEYS = re.compile(r"(Missing|Unexpected) key\(s\) in state_dict: ([^\n]*)")
_SIZE = re.compile(r"size mismatch for ([^:\n]+): copying a param with shape (torch\.Size\(\[[^\]]*\]\)) from "
                   r"checkpoint, the shape in current model is (torch\.Size\(\[[^\]]*\]\))")


def _shape_text(size: str) -> str:
    return "(" + size[len("torch.Size(["):-2] + ("," if size.count(",") == 0 and size != "torch.Size([])" else "") + ")"


def _state_dict_message(label: str, detail: str) -> str | None:
    """PyTorch's ``load_state_dict`` error, said from the learner's side.

    The grader loads the REFERENCE's weights into the learner's module, so PyTorch's "Missing
    key(s) in state_dict" lists parameters the learner's module has and the reference does
    not (an extra bias, a layer too many), and "Unexpected key(s)" the reference's that the
    learner's module lacks (a renamed layer). None when ``detail`` is not that error."""
    if not _STATE_DICT.search(detail):
        return None
    keys = {kind: ", ".join(k.strip().strip('"') for k in found.rstrip(". ").split(",") if k.strip())
            for kind, found in _KEYS.findall(detail)}
    extra, lacking = keys.get("Missing", ""), keys.get("Unexpected", "")
    if extra and lacking:
        return N_("{label}: your module has parameters the reference doesn't: {extra}; and it lacks the reference's "
                  "parameters {lacking}. Use the parameter names the assignment gives.").format(
                      label=label, extra=extra, lacking=lacking)
    if extra:
        return N_("{label}: your module has parameters the reference doesn't: {extra}. Check the assignment's "
                  "layers (is a bias=False missing, or is there a layer too many?).").format(label=label, extra=extra)
    if lacking:
        return N_("{label}: the reference has parameters your module doesn't: {lacking}. Use the parameter names "
                  "the assignment gives.").format(label=label, lacking=lacking)
    size = _SIZE.search(detail)
    if size:
        return N_("{label}: parameter {name} has shape {mine} in your module but {theirs} in the reference.").format(
            label=label, name=size.group(1).strip(), mine=_shape_text(size.group(3)), theirs=_shape_text(size.group(2)))
    return None


def call_method(obj: Any, method: str, *args: Any, name: str | None = None, **kwargs: Any) -> Any:
    """Like :func:`call` for ``obj.method(*args, **kwargs)``."""
    __tracebackhide__ = True
    label = name or method
    try:
        bound = getattr(obj, method)
    except AttributeError:
        raise CheckFailed(N_("{label}: the object has no method {method}").format(label=label, method=repr(method))) from None
    return call(bound, *args, name=label, **kwargs)
