"""Local (sliding-window) attention: each query sees only the last ``window`` positions.

    out_i = sum_{i - w < j <= i} softmax_j(q_i . k_j / sqrt(D)) v_j.

Shape letters: B batch, H heads, Q queries, K keys, D head size, w window.

Full causal attention lets query i attend to all i + 1 positions up to its own: O(T^2)
scores for a sequence of length T. A causal sliding window (Longformer, Mistral) keeps
only keys i - w + 1 ... i: O(T * w) scores, and a key/value cache that never holds more
than w positions. What it gives up is lesson 6's O(1) path length: one layer moves
information at most w - 1 positions, so connecting positions that are n apart takes
ceil(n / (w - 1)) stacked layers (:func:`layers_to_connect`).

Masks: True where a query **may** attend, as everywhere in course_lib
(:mod:`course_lib.masking`; negate them for ``nn.MultiheadAttention``).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from course_lib.flash import tiled_attention
from course_lib.masking import renamed_error

__all__ = ["sliding_window_may_attend", "sliding_window_attention", "layers_to_connect"]


def sliding_window_may_attend(num_queries: int, window: int, num_keys: int | None = None, *,
                              device: torch.device | str | None = None) -> Tensor:
    """The mask of causal sliding-window attention: query i may attend to keys j with i - w < j <= i.

    As in :func:`course_lib.masking.causal_may_attend`, when K > Q the queries are the last Q
    positions (query i sits at position K - Q + i). ``window >= K`` gives the causal mask.

    Returns:
        Boolean (Q, K), True = may attend; each row has at most ``window`` True entries.
    """
    num_keys = num_queries if num_keys is None else num_keys
    if window < 1:
        raise ValueError(f"window must be >= 1 (a query always sees its own position), got {window}")
    if num_keys < num_queries:
        raise ValueError(f"a causal mask needs num_keys >= num_queries, got K={num_keys} < Q={num_queries}")
    position = torch.arange(num_queries, device=device)[:, None] + (num_keys - num_queries)  # (Q, 1)
    key = torch.arange(num_keys, device=device)[None, :]  # (1, K)
    return (key <= position) & (key > position - window)  # (Q, K)


def sliding_window_attention(query: Tensor, key: Tensor, value: Tensor, window: int, *,
                             block_size: int = 64, scale: float | None = None) -> Tensor:
    """Causal sliding-window attention that computes only the tiles inside the band.

    Equal to ``scaled_dot_product_attention(q, k, v, sliding_window_may_attend(Q, window, K))``
    but with O(Q * window) work and memory (:func:`course_lib.flash.tiled_attention`).

    Shape:
        query (..., Q, D), key (..., K, D), value (..., K, Dv) -> (..., Q, Dv)
    """
    return tiled_attention(query, key, value, scale=scale, block_size=block_size, window=window)


def __getattr__(name: str) -> object:
    if name == "sliding_window_mask":
        raise renamed_error(name, "course_lib.local_attention")
    raise AttributeError(f"module 'course_lib.local_attention' has no attribute {name!r}")


def layers_to_connect(distance: int, window: int) -> int:
    """How many stacked sliding-window layers it takes for position p + distance to depend on p.

    One layer reaches w - 1 positions back; L layers reach L (w - 1).
    """
    if distance < 0:
        raise ValueError(f"distance must be >= 0, got {distance}")
    if window < 2:
        raise ValueError(f"with window={window} a position only sees itself: nothing is ever connected")
    return math.ceil(distance / (window - 1))
