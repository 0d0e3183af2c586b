"""Positional information for attention, which by itself ignores token order.

Shape letters: B batch, T sequence length, E model size.

Sinusoidal encoding (Vaswani et al., 2017), for position p and feature pair i:
    PE(p, 2i)   = sin(p / 10000^(2i / E))
    PE(p, 2i+1) = cos(p / 10000^(2i / E))
Each pair is a point on a circle turning at its own frequency, so moving k positions on
is a rotation: PE(p + k) = M_k PE(p) with a fixed matrix M_k that depends on k only
(:func:`shift_matrix`). Odd E works: the last feature is a sine without its cosine.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["sinusoidal_frequencies", "sinusoidal_encoding", "shift_matrix", "PositionalEncoding", "LearnedPositionalEmbedding"]


def sinusoidal_frequencies(embed_dim: int, base: float = 10000.0) -> Tensor:
    """The angular frequencies w_i = base^(-2i/E), i = 0 ... ceil(E/2) - 1 (float64): pair i of
    the encoding of position p is (sin(p w_i), cos(p w_i)). RoPE rotates by the same angles
    (:func:`course_lib.rotary.rotary_frequencies`)."""
    return base ** (-torch.arange(0, embed_dim, 2, dtype=torch.float64) / embed_dim)  # (ceil(E/2),)


def sinusoidal_encoding(num_positions: int, embed_dim: int, *, base: float = 10000.0,
                        dtype: torch.dtype = torch.float32) -> Tensor:
    """The (T, E) table of sinusoidal encodings for positions 0 ... T-1."""
    if num_positions <= 0 or embed_dim <= 0:
        raise ValueError(f"num_positions and embed_dim must be positive, got {num_positions}, {embed_dim}")
    angles = torch.arange(num_positions, dtype=torch.float64)[:, None] * sinusoidal_frequencies(embed_dim, base)  # (T, ceil(E/2))
    table = torch.zeros(num_positions, embed_dim, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles[:, : embed_dim // 2])
    return table.to(dtype)


def shift_matrix(shift: int, embed_dim: int, *, base: float = 10000.0) -> Tensor:
    """The (E, E) matrix M with PE(p + shift) = M @ PE(p) for every p (float64).

    It is block diagonal, one 2x2 rotation per (sin, cos) pair; with odd E the last sine
    has no partner and no exact linear map exists, so E must be even here.
    """
    if embed_dim % 2:
        raise ValueError(f"shift_matrix needs an even embed_dim, got {embed_dim}")
    matrix = torch.zeros(embed_dim, embed_dim, dtype=torch.float64)
    for i, w in enumerate(sinusoidal_frequencies(embed_dim, base)):
        c, s = torch.cos(shift * w), torch.sin(shift * w)
        # sin(a + b) = sin a cos b + cos a sin b ; cos(a + b) = cos a cos b - sin a sin b
        matrix[2 * i: 2 * i + 2, 2 * i: 2 * i + 2] = torch.stack([torch.stack([c, s]), torch.stack([-s, c])])
    return matrix


class PositionalEncoding(nn.Module):
    """Add sinusoidal position encodings to a batch of embeddings, then dropout.

    The table is a registered (non-persistent) buffer: it moves with ``.to(device)`` and
    is not a parameter. Like D2L's, the input is not rescaled here; the Transformer
    multiplies embeddings by sqrt(E) before adding.

    Args:
        embed_dim: E (odd values work).
        dropout: dropout probability after the addition.
        max_len: longest sequence supported.

    Shape:
        X (B, T, E) with T <= max_len -> (B, T, E)
    """

    P: Tensor

    def __init__(self, embed_dim: int, dropout: float = 0.0, max_len: int = 1000) -> None:
        super().__init__()
        self.embed_dim, self.max_len = embed_dim, max_len
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("P", sinusoidal_encoding(max_len, embed_dim)[None], persistent=False)  # (1, T, E)

    def forward(self, X: Tensor, offset: int = 0) -> Tensor:
        """``offset`` is the position of ``X[:, 0]`` (used by cached decoding)."""
        if X.dim() != 3 or X.shape[-1] != self.embed_dim:
            raise ValueError(f"X must have shape (B, T, E={self.embed_dim}), got {tuple(X.shape)}")
        if offset + X.shape[1] > self.max_len:
            raise ValueError(f"positions up to {offset + X.shape[1]} exceed max_len={self.max_len}; "
                             "build the module with a larger max_len")
        return self.dropout(X + self.P[:, offset: offset + X.shape[1]].to(X.dtype))


class LearnedPositionalEmbedding(nn.Module):
    """The alternative used by BERT and GPT: one trained vector per position, added, then dropout.

    Args:
        embed_dim, dropout, max_len: as in :class:`PositionalEncoding` (same order).

    Shape:
        X (B, T, E) with T <= max_len -> (B, T, E)
    """

    def __init__(self, embed_dim: int, dropout: float = 0.0, max_len: int = 1000) -> None:
        super().__init__()
        self.embed_dim, self.max_len = embed_dim, max_len
        self.embedding = nn.Embedding(max_len, embed_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, X: Tensor, offset: int = 0) -> Tensor:
        if X.dim() != 3 or X.shape[-1] != self.embed_dim:
            raise ValueError(f"X must have shape (B, T, E={self.embed_dim}), got {tuple(X.shape)}")
        if offset + X.shape[1] > self.max_len:
            raise ValueError(f"positions up to {offset + X.shape[1]} exceed max_len={self.max_len}")
        positions = torch.arange(offset, offset + X.shape[1], device=X.device)
        return self.dropout(X + self.embedding(positions)[None])
