"""Printing numbers so that a committed notebook output holds on every machine.

Float results differ in their last digits between machines: the order in which a sum is
added up depends on the CPU's vector unit (AVX2, AVX-512, NEON), on the math library's code
path and on the number of threads. A raw ``print(tensor)`` shows those digits, and even
its *layout* changes (``tensor([1., 1.])`` when every entry is exactly one,
``tensor([1.0000, 1.0000])`` when one of them is 0.99999994). The lessons therefore print
floats with :func:`fmt`, which

* rounds to a fixed number of decimals, always in the same layout;
* prints ``0.0000``, never ``-0.0000``, for a value that rounds to zero;
* warns (:class:`RoundingBoundaryWarning`, printed under the cell) when a value lies so
  close to a rounding boundary that a machine with other last digits could round it the
  other way. It still prints the value: a learner who changes a seed never gets an
  exception from printing a number. For the committed lessons the warning is the guard:
  nbval compares a cell's stderr too, so a fresh run that warns fails, and
  tests/test_course_hygiene.py rejects a committed output that contains the warning. The
  author then chooses fewer (or more) decimals, so the committed output is a fact, not an
  accident.

Example::

    >>> fmt(torch.tensor([[0.43243, 0.56757], [1.0, 0.0]]), 3)
    '[[0.432, 0.568], [1.000, 0.000]]'
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Union

import torch

__all__ = ["fmt", "ROUNDING_TOLERANCE", "RoundingBoundaryWarning"]

# Relative distance to a rounding boundary below which a value is considered ambiguous:
# about ten float32 rounding steps.
# Float32 summation-order noise is ~1e-7 relative; trained models and long products are
# printed under NBVAL_IGNORE_OUTPUT instead, so they never reach this check.
ROUNDING_TOLERANCE = 1e-6

Number = Union[float, int]


class RoundingBoundaryWarning(UserWarning):
    """A printed value could round differently on another machine (see the module docstring)."""


Printable = Union[Number, torch.Tensor, Sequence]


def _fmt_one(v: float, decimals: int, tol: float) -> str:
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    scale = 10.0**decimals
    scaled = v * scale
    # distance to the nearest "...5" boundary, in units of the value
    boundary = math.floor(scaled) + 0.5
    if abs(scaled - boundary) / scale < tol * max(abs(v), 1.0 / scale):
        warnings.warn(f"{v!r} lies within {tol:g} (relative) of a rounding boundary at {decimals} decimals, "
                      "so another machine may print a different last digit; print it with "
                      f"{decimals - 1} or {decimals + 1} decimals instead", RoundingBoundaryWarning, stacklevel=2)
    text = f"{v:.{decimals}f}"
    if float(text) == 0.0:
        text = text.lstrip("-")
    return text


def fmt(x: Printable, decimals: int = 4, *, tol: float = ROUNDING_TOLERANCE) -> str:
    """Format a number, tensor or nested sequence with a fixed number of decimals.

    Args:
        x: a Python number, a tensor of any shape (any float or int dtype) or a nested
            list/tuple of numbers.
        decimals: digits after the decimal point.
        tol: relative distance to a rounding boundary below which a value is ambiguous.

    Returns:
        The value as text; tensors and sequences as nested ``[a, b, ...]`` lists.

    Warns:
        RoundingBoundaryWarning: if a value could round differently on another machine (see
            the module docstring); the value is printed all the same.

    Raises:
        ValueError: if ``decimals`` is negative; TypeError: if ``x`` is not a number.
    """
    if decimals < 0:
        raise ValueError(f"decimals must be >= 0, got {decimals}")
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().double().tolist()
    if isinstance(x, (list, tuple)):
        return "[" + ", ".join(fmt(item, decimals, tol=tol) for item in x) + "]"
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, (int, float)):
        return _fmt_one(float(x), decimals, tol)
    raise TypeError(f"fmt() takes a number, a tensor or a sequence of numbers, got {type(x).__name__}")
