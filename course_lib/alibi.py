"""ALiBi: attention with linear biases (Press, Smith and Lewis, 2022).

Shape letters: H heads, Q queries, K keys.

ALiBi adds no position vector to the tokens and does not rotate queries or keys. It adds a
fixed penalty to every score, proportional to the distance between query i and key j:

    score_h(i, j) = q_i . k_j / sqrt(D) - m_h * (i - j),    j <= i (causal attention)

Head h has its own slope m_h. The slopes form a geometric sequence, m_h = 2^(-8 h / H) for
h = 1 ... H (for 8 heads: 1/2, 1/4, ..., 1/256), so some heads look only at the last few
keys and others far back. Nothing is learned, and the penalty is defined for every
distance, including distances longer than any seen in training: this is what the paper
shows extrapolates on language modelling. The bias is a float ``attn_bias`` (added to the
scores, :mod:`course_lib.masking`), so it works with any attention function of the course.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["alibi_slopes", "alibi_bias", "ALiBi"]


def alibi_slopes(num_heads: int) -> Tensor:
    """The H slopes m_h = 2^(-8 h / H), h = 1 ... H: a geometric sequence (float64, shape (H,)).

    For a number of heads that is not a power of two the paper uses another rule (the slopes
    of the next power of two below, then every other one of the power above); the course
    uses the formula above for every H, which is the paper's for powers of two.
    """
    if num_heads <= 0:
        raise ValueError(f"num_heads must be positive, got {num_heads}")
    heads = torch.arange(1, num_heads + 1, dtype=torch.float64)
    return 2.0 ** (-8.0 * heads / num_heads)  # (H,)


def alibi_bias(num_heads: int, num_queries: int, num_keys: int | None = None, *,
               slopes: Tensor | None = None, dtype: torch.dtype = torch.float32,
               device: torch.device | str | None = None) -> Tensor:
    """The (H, Q, K) bias -m_h * |i - j| to add to the attention scores.

    As in :func:`course_lib.masking.causal_may_attend`, when K > Q the queries are the last Q
    positions (query i sits at position K - Q + i, as in cached decoding). With a causal mask
    only keys j <= i are used, and the bias is the paper's -m_h * (i - j); keys after the query
    get the symmetric penalty -m_h * (j - i).

    Args:
        num_heads: H (ignored if ``slopes`` is given).
        num_queries: Q.
        num_keys: K (default Q).
        slopes: (H,) slopes; default :func:`alibi_slopes` (``num_heads``).
    """
    num_keys = num_queries if num_keys is None else num_keys
    if num_keys < num_queries:
        raise ValueError(f"ALiBi places the queries at the last positions: need num_keys >= num_queries, "
                         f"got K={num_keys} < Q={num_queries}")
    slopes = alibi_slopes(num_heads) if slopes is None else slopes
    query_pos = torch.arange(num_keys - num_queries, num_keys, device=device)[:, None]  # (Q, 1)
    key_pos = torch.arange(num_keys, device=device)[None, :]  # (1, K)
    distance = (query_pos - key_pos).abs().to(torch.float64)  # (Q, K)
    return (-slopes.to(device=device, dtype=torch.float64)[:, None, None] * distance).to(dtype)  # (H, Q, K)


class ALiBi(nn.Module):
    """ALiBi's bias for a model with ``num_heads`` heads: ``alibi(Q, K)`` is the (H, Q, K)
    ``attn_bias``. The slopes are a buffer (saved with the model, never trained)."""

    slopes: Tensor

    def __init__(self, num_heads: int) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.register_buffer("slopes", alibi_slopes(num_heads).float(), persistent=False)

    def forward(self, num_queries: int, num_keys: int | None = None, *, dtype: torch.dtype | None = None) -> Tensor:
        return alibi_bias(self.num_heads, num_queries, num_keys, slopes=self.slopes,
                          dtype=dtype or self.slopes.dtype, device=self.slopes.device)
