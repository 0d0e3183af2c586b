"""Rotary position embeddings (RoPE, Su et al., 2021).

Shape letters: B batch, H heads, T sequence length, D head size (even).

Instead of adding a position vector to the token embedding, RoPE rotates each query and
key: the D features are split into D/2 pairs, and pair i of the vector at position m is
turned by the angle m * theta_i, with theta_i = base^(-2i/D) (the frequencies of the
sinusoidal encoding of lesson 6):

    (x1, x2) -> (x1 cos(m theta) - x2 sin(m theta),  x1 sin(m theta) + x2 cos(m theta))

A rotation by m theta followed by the transpose of one by n theta is a rotation by
(n - m) theta, so the score q_m . k_n = q^T R_m^T R_n k = q^T R_{n-m} k depends on the
positions only through their difference: attention sees relative positions, and the
values are not touched.

Two pairings are in use and they are NOT interchangeable (weights trained with one give
wrong results with the other):

* ``interleaved=False`` ("halves", GPT-NeoX / Llama in Hugging Face): feature i is paired
  with feature i + D/2;
* ``interleaved=True`` (the paper, GPT-J, Meta's original Llama code): feature 2i is
  paired with feature 2i + 1.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from course_lib.positional import sinusoidal_frequencies

__all__ = ["rotary_frequencies", "rotary_cos_sin", "apply_rotary", "RotaryEmbedding"]


def rotary_frequencies(head_dim: int, base: float = 10000.0) -> Tensor:
    """The D/2 angular frequencies theta_i = base^(-2i/D), i = 0 ... D/2 - 1 (float64)."""
    if head_dim <= 0 or head_dim % 2:
        raise ValueError(f"rotary embeddings rotate pairs of features: head_dim must be even and "
                         f"positive, got {head_dim}")
    return sinusoidal_frequencies(head_dim, base)  # (D/2,): lesson 6's frequencies


def rotary_cos_sin(positions: Tensor | int, head_dim: int, base: float = 10000.0,
                   dtype: torch.dtype = torch.float32) -> tuple[Tensor, Tensor]:
    """cos and sin of the angles p * theta_i, computed in float64 then cast.

    Args:
        positions: an int T (positions 0 ... T-1) or a (T,) tensor of positions.
        head_dim: D (even).

    Returns:
        ``(cos, sin)``, each (T, D/2).
    """
    if isinstance(positions, int):
        positions = torch.arange(positions)
    angles = positions.to(torch.float64)[:, None] * rotary_frequencies(head_dim, base)  # (T, D/2)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor, *, interleaved: bool = False) -> Tensor:
    """Rotate each pair of features of ``x`` by the angles whose cos and sin are given.

    Args:
        x: (..., T, D) queries or keys.
        cos, sin: (T, D/2) from :func:`rotary_cos_sin` (or broadcastable to (..., T, D/2)).
        interleaved: pair features (2i, 2i+1) if True, (i, i + D/2) if False (see the module
            docstring).

    Returns:
        (..., T, D), same dtype as ``x``; norms of each pair are unchanged.
    """
    if x.shape[-1] % 2:
        raise ValueError(f"the last size of x must be even (pairs of features), got {tuple(x.shape)}")
    if cos.shape[-1] * 2 != x.shape[-1] or cos.shape[-2] != x.shape[-2]:
        raise ValueError(f"cos/sin must have shape (T, D/2)=({x.shape[-2]}, {x.shape[-1] // 2}) for x of "
                         f"shape {tuple(x.shape)}; got {tuple(cos.shape)}")
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    if interleaved:
        x1, x2 = x[..., 0::2], x[..., 1::2]  # (..., T, D/2) each
        rotated = torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)  # (..., T, D/2, 2)
        return rotated.flatten(-2)  # (..., T, D)
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]  # (..., T, D/2) each
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)  # (..., T, D)


class RotaryEmbedding(nn.Module):
    """Rotary embeddings with cached cos/sin tables for positions 0 ... max_len - 1.

    The tables are non-persistent buffers (they follow ``.to(device)``, are not trained and
    are not saved). Apply the module to queries and keys after splitting heads, never to
    values.

    Args:
        head_dim: D (even).
        max_len: longest position supported (rebuild with a larger one, RoPE itself has no limit).
        base: 10000 in the paper.
        interleaved: the pairing convention (see the module docstring).

    Shape:
        x (..., T, D), offset t with t + T <= max_len -> (..., T, D)
    """

    cos: Tensor
    sin: Tensor

    def __init__(self, head_dim: int, max_len: int = 2048, base: float = 10000.0,
                 interleaved: bool = False) -> None:
        super().__init__()
        self.head_dim, self.max_len, self.base, self.interleaved = head_dim, max_len, base, interleaved
        cos, sin = rotary_cos_sin(max_len, head_dim, base)
        self.register_buffer("cos", cos, persistent=False)  # (max_len, D/2)
        self.register_buffer("sin", sin, persistent=False)  # (max_len, D/2)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """Rotate ``x`` as if its T positions were ``offset ... offset + T - 1``."""
        steps = x.shape[-2]
        if x.shape[-1] != self.head_dim:
            raise ValueError(f"x must have shape (..., T, D={self.head_dim}), got {tuple(x.shape)}")
        if offset < 0 or offset + steps > self.max_len:
            raise ValueError(f"positions {offset} ... {offset + steps - 1} are outside 0 ... {self.max_len - 1}; "
                             "build RotaryEmbedding with a larger max_len")
        return apply_rotary(x, self.cos[offset: offset + steps], self.sin[offset: offset + steps],
                            interleaved=self.interleaved)
