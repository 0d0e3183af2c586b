"""Valid lengths, boolean masks and the masked softmax.

Shape letters: B batch, Q queries, K keys.

Three ways to say "which keys may a query look at" exist in the wild; this module
converts between them and the rest of the course states which one each API takes.

* ``valid_lens`` (D2L): an integer tensor of shape (B,) — the first ``valid_lens[b]``
  keys are real for every query of batch element b — or (B, Q) — one length per query.
* A *keep* mask (``torch.nn.functional.scaled_dot_product_attention``'s boolean
  ``attn_mask``): True where the query **may** attend to the key.
* A *padding* mask (``torch.nn.MultiheadAttention``'s boolean ``key_padding_mask`` and
  ``attn_mask``): True where the key is **masked out**. It is the negation of a keep mask.

Inside course_lib every mask handed from one module to another is a padding mask (True =
masked out, or a float mask added to the scores), combined by :func:`merge_masks`. The
keep masks appear only at the edges that mirror ``F.scaled_dot_product_attention``
(:func:`causal_mask`, :func:`valid_lens_to_mask`,
:func:`course_lib.scoring.scaled_dot_product_attention`), which convert them once.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = [
    "valid_lens_to_mask",
    "valid_lens_to_key_padding_mask",
    "causal_mask",
    "merge_masks",
    "masked_softmax",
    "softmax_masked_out",
]


def _check_valid_lens(valid_lens: Tensor, batch: int, num_queries: int, num_keys: int) -> None:
    if valid_lens.dtype.is_floating_point or valid_lens.dtype == torch.bool:
        raise ValueError(f"valid_lens must be an integer tensor, got dtype {valid_lens.dtype}")
    if valid_lens.dim() == 1:
        if valid_lens.shape[0] != batch:
            raise ValueError(
                f"valid_lens of shape (B,) must have B={batch} entries, got shape {tuple(valid_lens.shape)}"
            )
    elif valid_lens.dim() == 2:
        if tuple(valid_lens.shape) != (batch, num_queries):
            raise ValueError(
                f"valid_lens of shape (B, Q) must have shape ({batch}, {num_queries}), "
                f"got {tuple(valid_lens.shape)}"
            )
    else:
        raise ValueError(
            f"valid_lens must have shape (B,)=({batch},) or (B, Q)=({batch}, {num_queries}), "
            f"got {tuple(valid_lens.shape)}"
        )
    if valid_lens.numel() and (valid_lens.min() < 0 or valid_lens.max() > num_keys):
        raise ValueError(f"valid_lens must lie in [0, K={num_keys}], got values "
                         f"from {int(valid_lens.min())} to {int(valid_lens.max())}")


def valid_lens_to_mask(valid_lens: Tensor, num_queries: int, num_keys: int) -> Tensor:
    """Turn valid lengths into a keep mask (True = may attend).

    Args:
        valid_lens: integer tensor of shape (B,) or (B, Q).
        num_queries: Q.
        num_keys: K.

    Returns:
        Boolean tensor of shape (B, Q, K); ``mask[b, i, j]`` is True iff
        ``j < valid_lens[b]`` (or ``valid_lens[b, i]``).
    """
    batch = valid_lens.shape[0] if valid_lens.dim() > 0 else 0
    _check_valid_lens(valid_lens, batch, num_queries, num_keys)
    lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None].expand(-1, num_queries)
    positions = torch.arange(num_keys, device=valid_lens.device)
    return positions[None, None, :] < lens[:, :, None]  # (B, Q, K)


def valid_lens_to_key_padding_mask(valid_lens: Tensor, num_keys: int) -> Tensor:
    """Turn per-sequence valid lengths (B,) into ``nn.MultiheadAttention``'s
    ``key_padding_mask``: shape (B, K), True at padded (ignored) positions."""
    if valid_lens.dim() != 1:
        raise ValueError(
            "key_padding_mask has one row per sequence: valid_lens must have shape (B,), "
            f"got {tuple(valid_lens.shape)}; per-query lengths (B, Q) need an attn_mask instead"
        )
    _check_valid_lens(valid_lens, valid_lens.shape[0], 1, num_keys)
    positions = torch.arange(num_keys, device=valid_lens.device)
    return positions[None, :] >= valid_lens[:, None]  # (B, K)


def causal_mask(num_queries: int, num_keys: int | None = None, *,
                device: torch.device | str | None = None) -> Tensor:
    """Keep mask of a causal (look-ahead) model: query i may attend to keys j <= i.

    When ``num_keys > num_queries`` (queries are the last tokens of a longer sequence, as
    in cached generation), query i sits at position ``num_keys - num_queries + i``.

    Returns:
        Boolean tensor (Q, K), True = may attend (SDPA convention). Negate it for
        ``nn.MultiheadAttention``'s ``attn_mask``.
    """
    num_keys = num_queries if num_keys is None else num_keys
    if num_keys < num_queries:
        raise ValueError(f"a causal mask needs num_keys >= num_queries, got K={num_keys} < Q={num_queries}")
    offset = num_keys - num_queries
    q = torch.arange(num_queries, device=device)[:, None]
    k = torch.arange(num_keys, device=device)[None, :]
    return k <= q + offset  # (Q, K)


def merge_masks(*masks: Tensor | None, dtype: torch.dtype) -> Tensor | None:
    """Combine attention masks in ``nn.MultiheadAttention``'s convention into one.

    Each mask is None, boolean (True = masked out) or float (added to the scores); they
    must broadcast against each other, e.g. a key padding mask (B, 1, 1, K) and a causal
    mask (Q, K).

    Returns:
        None if every mask is None; the union of the masked-out positions if every mask
        is boolean; otherwise a float mask of ``dtype``: the sum of the float masks, with
        ``-inf`` wherever a boolean mask masks out.
    """
    blocked: Tensor | None = None
    additive: Tensor | None = None
    for mask in masks:
        if mask is None:
            continue
        if mask.dtype == torch.bool:
            blocked = mask if blocked is None else blocked | mask
        else:
            additive = mask.to(dtype) if additive is None else additive + mask.to(dtype)
    if additive is None or blocked is None:
        return blocked if additive is None else additive
    return torch.where(blocked, float("-inf"), additive)  # broadcast to the union of both shapes


def masked_softmax(scores: Tensor, valid_lens: Tensor | None = None) -> Tensor:
    """Softmax over the last axis (the keys) that ignores keys beyond the valid length.

    Masked scores are replaced by the most negative finite number *before* the softmax,
    so the remaining weights still sum to one and masked keys get exactly zero weight.
    (Zeroing weights *after* a softmax would leave rows that no longer sum to one.)

    Args:
        scores: (B, Q, K) attention scores.
        valid_lens: None (no masking), (B,) or (B, Q) integers in [0, K].

    Returns:
        (B, Q, K) weights; each row sums to one over its valid keys. A row with valid
        length 0 has no key to attend to: its weights are all zero (D2L's version returns
        a uniform row there; ``nn.MultiheadAttention`` with ``need_weights=True`` returns NaN,
        and so did PyTorch's SDPA before version 2.5).

    Shape:
        scores (B, Q, K), valid_lens (B,) or (B, Q) -> (B, Q, K)
    """
    if scores.dim() != 3:
        raise ValueError(f"scores must have shape (B, Q, K), got {tuple(scores.shape)}")
    if valid_lens is None:
        return torch.softmax(scores, dim=-1)
    batch, num_queries, num_keys = scores.shape
    if valid_lens.dim() == 0 or valid_lens.shape[0] != batch:
        raise ValueError(f"valid_lens must have shape (B,)=({batch},) or (B, Q)=({batch}, {num_queries}), "
                         f"got {tuple(valid_lens.shape)}")
    keep = valid_lens_to_mask(valid_lens.to(scores.device), num_queries, num_keys)  # (B, Q, K)
    return softmax_masked_out(scores, ~keep)


def softmax_masked_out(scores: Tensor, mask: Tensor | None) -> Tensor:
    """The masked softmax of the whole course, with ``nn.MultiheadAttention``'s mask.

    ``mask`` broadcasts to ``scores``: boolean True = masked out, or float added to the
    scores (``-inf`` = masked out). Masked scores become the most negative finite number
    before the softmax, so in a row with a key left their weights underflow to exactly zero;
    masked weights are set to zero after it, which changes only a row with no key left: its
    weights are all zero (not 1/K, nor the NaN of a softmax over -inf).
    """
    if mask is None:
        return torch.softmax(scores, dim=-1)
    blocked = mask if mask.dtype == torch.bool else torch.isneginf(mask)
    if mask.dtype != torch.bool:
        scores = scores + mask.to(scores.dtype).masked_fill(blocked, 0.0)
    filled = scores.masked_fill(blocked, torch.finfo(scores.dtype).min)
    return torch.softmax(filled, dim=-1).masked_fill(blocked, 0.0)
