"""Synthetic sequence-to-sequence tasks: copy / reverse a string, normalise a date.

Small tasks with an exact answer, for tests and experiments (no lesson trains on them):
a model that solves them has learned to move tokens by position (copy, reverse) or to
read a date in ten formats and write it in ISO form.
"""

from __future__ import annotations

import datetime as _dt
import random
from collections.abc import Callable, Sequence

from course_lib.data import SPECIAL_TOKENS, char_tokenize

__all__ = ["copy_task_pairs", "date_pairs"]


def copy_task_pairs(
    n: int,
    min_len: int = 1,
    max_len: int = 10,
    alphabet: Sequence[str] = "abcdefghij",
    seed: int = 0,
    reverse: bool = False,
) -> list[tuple[list[str], list[str]]]:
    """Random sequences to copy (or reverse): the simplest seq2seq task.

    Reversal is the classic test of attention: the first output token depends on the
    last input token, the hardest case for a fixed-size context vector.

    Args:
        n: number of pairs (>= 1).
        min_len, max_len: length range, inclusive (1 <= min_len <= max_len).
        alphabet: the symbols (at least one; must not contain the special tokens).
        seed: random seed.
        reverse: the target is the reversed source.

    Returns:
        ``n`` pairs ``(src_tokens, tgt_tokens)``.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if min_len < 1 or max_len < min_len:
        raise ValueError(f"need 1 <= min_len <= max_len, got min_len={min_len}, max_len={max_len}")
    symbols = list(alphabet)
    if not symbols:
        raise ValueError("alphabet is empty")
    if set(symbols) & set(SPECIAL_TOKENS):
        raise ValueError(f"alphabet must not contain the special tokens {SPECIAL_TOKENS}")
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        src = [rng.choice(symbols) for _ in range(rng.randint(min_len, max_len))]
        pairs.append((src, src[::-1] if reverse else list(src)))
    return pairs


_MONTHS = [
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
]  # fmt: skip
_MONTHS_ABBR = [m[:3] for m in _MONTHS]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def _ordinal(day: int) -> str:
    if 10 <= day % 100 <= 20:
        return f"{day}th"
    return f"{day}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(day % 10, 'th') }"


# Each format renders a date as a human would write it. Slash and dot formats are
# day-first (European): 03/04/21 is 3 April 2021. Two-digit years only occur in the
# range 1950..2049 generated here, read as 19yy for yy >= 50 and 20yy otherwise.
_DATE_FORMATS: list[Callable[[_dt.date], str]] = [
    lambda d: f"{d.day} {_MONTHS[d.month - 1]} {d.year}",
    lambda d: f"{_MONTHS[d.month - 1]} {d.day}, {d.year}",
    lambda d: f"{d.day:02d}/{d.month:02d}/{d.year % 100:02d}",
    lambda d: f"{_DAYS[d.weekday()][:3]} {d.day} {_MONTHS_ABBR[d.month - 1]} {d.year}",
    lambda d: f"{d.year}.{d.month}.{d.day}",
    lambda d: f"{d.day} {_MONTHS_ABBR[d.month - 1].lower()} {d.year}",
    lambda d: f"{_DAYS[d.weekday()]}, {_MONTHS[d.month - 1]} {d.day}, {d.year}",
    lambda d: f"{d.day:02d}.{d.month:02d}.{d.year}",
    lambda d: f"the {_ordinal(d.day)} of {_MONTHS[d.month - 1]} {d.year}",
    lambda d: f"{_MONTHS[d.month - 1].upper()} {d.day} {d.year}",
    lambda d: f"{d.day}/{d.month}/{d.year}",
    lambda d: f"{_MONTHS_ABBR[d.month - 1]} {_ordinal(d.day)} {d.year}",
]


def date_pairs(n: int, seed: int = 0) -> list[tuple[list[str], list[str]]]:
    """Human-written dates and their ISO form, as character tokens.

    Example pair (joined): ``"Tue 2 Mar 2021"`` -> ``"2021-03-02"``. Formats include
    ``"3 March 2021"``, ``"March 3, 2021"``, ``"03/03/21"`` (day first), ``"Tue 3 Mar 2021"``,
    ``"2021.3.3"``, ``"the 3rd of March 2021"`` and more. Dates are uniform over
    1950-01-01 .. 2049-12-31.

    Args:
        n: number of pairs (>= 1).
        seed: random seed.

    Returns:
        ``n`` pairs ``(list(human), list(iso))`` of single characters.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    rng = random.Random(seed)
    start = _dt.date(1950, 1, 1).toordinal()
    end = _dt.date(2049, 12, 31).toordinal()
    pairs = []
    for _ in range(n):
        day = _dt.date.fromordinal(rng.randint(start, end))
        human = rng.choice(_DATE_FORMATS)(day)
        pairs.append((char_tokenize(human), char_tokenize(day.isoformat())))
    return pairs
