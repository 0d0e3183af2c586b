"""Valid lengths, boolean masks and the masked softmax.

    masked_softmax(s)_j = exp(s_j) / sum_{j' allowed} exp(s_j')  for an allowed key j, 0 otherwise.

Shape letters: B batch, Q queries, K keys.

One convention for the whole library, written into every name: a boolean mask is True
where a query **may attend** to a key. The names say so: ``may_attend`` ((Q, K) or
broadcastable to the scores: may query i look at key j?) and ``real_keys`` ((B, K): is
key j a real token, not padding?). A float bias that is added to the scores is called
``attn_bias`` (``-inf`` forbids a pair).

PyTorch has two opposite conventions behind one argument name, ``attn_mask``:
``F.scaled_dot_product_attention`` reads True as "may attend" (ours), while
``torch.nn.MultiheadAttention``'s ``attn_mask`` and ``key_padding_mask`` read True as
"masked out". To talk to ``nn.MultiheadAttention``, negate ours once:
``attn_mask=~may_attend``, ``key_padding_mask=~real_keys``. No course_lib function takes an
argument called ``attn_mask``, ``key_padding_mask`` or a function called ``causal_mask``:
passing one raises an error that says what to pass instead, so a mask of one polarity
cannot silently be read in the other.

* ``valid_lens`` (D2L): an integer tensor of shape (B,) — the first ``valid_lens[b]``
  keys are real for every query of batch element b — or (B, Q) — one length per query.
  :func:`valid_lens_to_may_attend` and :func:`valid_lens_to_real_keys` convert them.
* :func:`causal_may_attend`: query i may attend to keys j <= i.
"""

from __future__ import annotations


import torch
from torch import Tensor

__all__ = [
    "valid_lens_to_may_attend",
    "valid_lens_to_real_keys",
    "causal_may_attend",
    "combine_may_attend",
    "masked_softmax",
    "softmax_may_attend",
    "reject_old_mask_names",
    "check_mask_dtypes",
]

# The names of earlier versions, whose polarity the name did not say, and what replaced them.
_RENAMED = {
    "causal_mask": "causal_may_attend (same values: True = may attend)",
    "valid_lens_to_mask": "valid_lens_to_may_attend (same values: True = may attend)",
    "valid_lens_to_key_padding_mask": "valid_lens_to_real_keys (the negation: True = real key, "
                                      "False = padding)",
    "merge_masks": "combine_may_attend (True = may attend; float biases are passed separately)",
    "softmax_masked_out": "softmax_may_attend(scores, may_attend, attn_bias) (True = may attend)",
    "sliding_window_mask": "sliding_window_may_attend (same values: True = may attend)",
}


class RenamedError(ImportError):
    """An old, polarity-free name was used. (An ImportError, not an AttributeError: Python
    replaces an AttributeError raised during ``from module import name`` with a message of
    its own, which would lose the one saying what to use instead.)"""


def renamed_error(name: str, module: str) -> RenamedError:
    """The error for an old, polarity-free name (a module's ``__getattr__`` raises it)."""
    return RenamedError(
        f"{module}.{name} was renamed so that its name says which way its True points: use "
        f"{_RENAMED[name]}. In course_lib every boolean mask is True = may attend; negate it "
        f"(~mask) only for torch.nn.MultiheadAttention's attn_mask / key_padding_mask.")


def __getattr__(name: str) -> object:
    if name in _RENAMED:
        raise renamed_error(name, "course_lib.masking")
    raise AttributeError(f"module 'course_lib.masking' has no attribute {name!r}")


_OLD_ARGUMENTS = {
    "attn_mask": "may_attend=<bool, True = may attend> (for a boolean attn_mask in "
                 "nn.MultiheadAttention's convention, True = masked out: may_attend=~attn_mask; in "
                 "F.scaled_dot_product_attention's convention: may_attend=attn_mask), or "
                 "attn_bias=<float added to the scores>",
    "key_padding_mask": "real_keys=~key_padding_mask (True = real key, False = padding; "
                        "cl.valid_lens_to_real_keys(valid_lens, S) builds it)",
    "memory_key_padding_mask": "memory_real_keys=~memory_key_padding_mask (True = real source key)",
    "src_key_padding_mask": "src_real_keys=~src_key_padding_mask (True = real source key)",
}


class _Removed:
    """Default of a removed keyword argument: tells "not given" from any value a caller passes."""

    def __repr__(self) -> str:
        return "<removed>"


REMOVED: object = _Removed()


def reject_old_mask_names(where: str, **given: object) -> None:
    """Raise a TypeError if a caller passed a mask under a removed, polarity-free name.

    ``given`` maps the old argument names to what was passed (:data:`REMOVED` if nothing).
    """
    for name, value in given.items():
        if value is not REMOVED:
            raise TypeError(
                f"{where} no longer takes {name}= (its True meant 'masked out' in "
                f"nn.MultiheadAttention but 'may attend' in F.scaled_dot_product_attention). "
                f"Pass {_OLD_ARGUMENTS[name]}.")


def check_mask_dtypes(may_attend: Tensor | None, attn_bias: Tensor | None = None) -> None:
    """A TypeError unless ``may_attend`` is boolean and ``attn_bias`` is float (either may be None)."""
    if may_attend is not None and may_attend.dtype != torch.bool:
        raise TypeError(f"may_attend must be a boolean tensor (True = may attend), got dtype "
                        f"{may_attend.dtype}; pass a float mask added to the scores as attn_bias=")
    if attn_bias is not None and attn_bias.dtype == torch.bool:
        raise TypeError("attn_bias is added to the scores and must be a float tensor; pass a boolean "
                        "mask as may_attend= (True = may attend)")


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


def valid_lens_to_may_attend(valid_lens: Tensor, num_queries: int, num_keys: int) -> Tensor:
    """Turn valid lengths into a (B, Q, K) mask, True = may attend.

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


def valid_lens_to_real_keys(valid_lens: Tensor, num_keys: int) -> Tensor:
    """Turn per-sequence valid lengths (B,) into ``real_keys``: shape (B, K), True at real
    tokens, False at padding. (``nn.MultiheadAttention``'s ``key_padding_mask`` is its
    negation, ``~real_keys``.)"""
    if valid_lens.dim() != 1:
        raise ValueError(
            "real_keys has one row per sequence: valid_lens must have shape (B,), "
            f"got {tuple(valid_lens.shape)}; per-query lengths (B, Q) need "
            "may_attend=valid_lens_to_may_attend(valid_lens, Q, K) instead"
        )
    _check_valid_lens(valid_lens, valid_lens.shape[0], 1, num_keys)
    positions = torch.arange(num_keys, device=valid_lens.device)
    return positions[None, :] < valid_lens[:, None]  # (B, K)


def causal_may_attend(num_queries: int, num_keys: int | None = None, *,
                      device: torch.device | str | None = None) -> Tensor:
    """The causal (look-ahead) mask: query i may attend to keys j <= i.

    When ``num_keys > num_queries`` (queries are the last tokens of a longer sequence, as
    in cached generation), query i sits at position ``num_keys - num_queries + i``.

    Returns:
        Boolean tensor (Q, K), True = may attend. Negate it for
        ``nn.MultiheadAttention``'s ``attn_mask`` (True = masked out there).
    """
    num_keys = num_queries if num_keys is None else num_keys
    if num_keys < num_queries:
        raise ValueError(f"a causal mask needs num_keys >= num_queries, got K={num_keys} < Q={num_queries}")
    offset = num_keys - num_queries
    q = torch.arange(num_queries, device=device)[:, None]
    k = torch.arange(num_keys, device=device)[None, :]
    return k <= q + offset  # (Q, K)


def combine_may_attend(*masks: Tensor | None) -> Tensor | None:
    """The pairs every mask allows: the logical AND of boolean masks (True = may attend)
    that broadcast against each other, e.g. real keys (B, 1, 1, K) and a causal mask (Q, K).
    None if every mask is None."""
    combined: Tensor | None = None
    for mask in masks:
        if mask is None:
            continue
        check_mask_dtypes(mask)
        combined = mask if combined is None else combined & mask
    return combined


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
    may_attend = valid_lens_to_may_attend(valid_lens.to(scores.device), num_queries, num_keys)  # (B, Q, K)
    return softmax_may_attend(scores, may_attend)


def softmax_may_attend(scores: Tensor, may_attend: Tensor | None, attn_bias: Tensor | None = None) -> Tensor:
    """The masked softmax of the whole course: softmax(scores + attn_bias) over the keys a
    query may attend to.

    ``may_attend`` (boolean, True = may attend) and ``attn_bias`` (float, added to the
    scores; ``-inf`` forbids a pair) broadcast to ``scores``. Forbidden scores become the most
    negative finite number before the softmax, so in a row with a key left their weights
    underflow to exactly zero; forbidden weights are set to zero after it, which changes only
    a row with no key left: its weights are all zero (not 1/K, nor the NaN of a softmax over
    -inf).
    """
    check_mask_dtypes(may_attend, attn_bias)
    allowed: Tensor | None = may_attend
    if attn_bias is not None:
        blocked_by_bias = torch.isneginf(attn_bias)
        scores = scores + attn_bias.to(scores.dtype).masked_fill(blocked_by_bias, 0.0)
        allowed = ~blocked_by_bias if may_attend is None else may_attend & ~blocked_by_bias
    if allowed is None:
        return torch.softmax(scores, dim=-1)
    filled = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
    return torch.softmax(filled, dim=-1).masked_fill(~allowed, 0.0)
