"""Attention without the T x T score matrix: the online softmax and FlashAttention's tiling.

Reading scores s_1, s_2, ... one block at a time, keep per row m = max s and l = sum exp(s - m):
a block that raises the maximum to m' updates l' = l exp(m - m') + sum exp(s - m') and the
output accumulator acc' = acc exp(m - m') + sum exp(s - m') v; at the end O = acc / l.

Shape letters: B batch, H heads, Q queries, K keys, D query/key size, Dv value size;
``...`` stands for any leading batch axes (e.g. B, H). Masks as in
:func:`course_lib.scoring.scaled_dot_product_attention`: a boolean ``may_attend`` is True
where a query may attend; a float ``attn_bias`` is added to the scores.

Plain attention computes all Q x K scores, softmaxes them and multiplies by V: its memory
grows as Q K. The softmax is what seems to need the whole row at once (the maximum to
subtract and the sum to divide by). The **online softmax** (Milakov and Gimelshein, 2018)
reads a row block by block and keeps, per row, the running maximum m and the running sum
l of exp(s - m); when a block raises the maximum from m to m', everything accumulated so
far is multiplied by exp(m - m'):

    m' = max(m, max_j s_j)           l' = exp(m - m') l + sum_j exp(s_j - m')
    acc' = exp(m - m') acc + sum_j exp(s_j - m') v_j          output = acc / l

FlashAttention (Dao et al., 2022) runs this recurrence over key blocks for each block of
queries, so only a (block x block) tile of scores exists at any time. With a causal mask
the tiles entirely above the diagonal are skipped, not computed and masked; with a
sliding window (:mod:`course_lib.local_attention`) the tiles outside the band are too.
The result equals plain attention up to rounding, whatever the block size.

The backward pass (:func:`flash_attention`, :class:`FlashAttentionFunction`) does not
keep the Q x K probabilities either. The forward pass stores, per query row, only the output
O and the log-sum-exp L = m + log(l) of its scores; the backward pass recomputes each tile
of probabilities as P = exp(S - L) and applies, tile by tile, with dO the gradient of O:

    dV = P^T dO        dP = dO V^T        D = rowsum(dO * O)        dS = P * (dP - D)
    dQ = scale * dS K                     dK = scale * dS^T Q

(D = rowsum(P * dP) because rowsum(P * (dO V^T)) = rowsum(dO * (P V)) = rowsum(dO * O):
one number per row, computed once, instead of a sum over a row of P.) What is kept between
the passes is O(Q) besides the inputs and the output, instead of the O(Q K) probabilities
that autograd saves for plain attention.

This is a reference implementation in plain PyTorch: each tile is a handful of separate
kernel launches, so on a CPU it saves memory but not time. PyTorch's fused
``F.scaled_dot_product_attention`` does the same tiling inside one compiled kernel.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from course_lib.masking import REMOVED, check_mask_dtypes, reject_old_mask_names

__all__ = [
    "online_softmax",
    "online_softmax_update",
    "tiled_attention",
    "key_block_range",
    "count_tiles",
    "flash_attention_forward",
    "flash_attention_backward",
    "FlashAttentionFunction",
    "flash_attention",
]


def online_softmax_update(running_max: Tensor, running_sum: Tensor, scores: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """One step of the online softmax: fold a block of scores into the running max and sum.

    Args:
        running_max: (..., 1) largest score seen so far (``-inf`` before the first block).
        running_sum: (..., 1) sum of exp(score - running_max) over the scores seen so far.
        scores: (..., N) the next block of scores (``-inf`` = masked out).

    Returns:
        ``(new_max, new_sum, correction)``, each (..., 1): ``correction = exp(old_max - new_max)``
        is the factor by which anything accumulated with the old maximum must be rescaled.
        While every score seen is ``-inf``, the maximum stays ``-inf``, the sum 0 and the
        correction 0 (never NaN).

    Shape:
        running_max (..., 1), running_sum (..., 1), scores (..., N) -> 3 x (..., 1)
    """
    new_max = torch.maximum(running_max, scores.amax(dim=-1, keepdim=True))
    # Subtract a finite reference: exp(-inf - (-inf)) would be NaN for rows masked so far.
    reference = torch.where(torch.isneginf(new_max), torch.zeros_like(new_max), new_max)
    correction = torch.exp(running_max - reference)
    new_sum = correction * running_sum + torch.exp(scores - reference).sum(dim=-1, keepdim=True)
    return new_max, new_sum, correction


def online_softmax(x: Tensor, block_size: int = 1) -> Tensor:
    """Softmax over the last axis in a single pass over blocks of ``block_size`` entries.

    The running maximum and sum are updated block by block (:func:`online_softmax_update`);
    a second, cheap pass divides exp(x - m) by the final sum. Equal to ``torch.softmax``
    up to rounding, and just as safe from overflow, since no exponent is ever positive.

    Args:
        x: (..., N) scores; ``-inf`` entries get weight 0 (an all ``-inf`` row gets all 0).
        block_size: how many entries are read per step (1 = the recurrence element by element).

    Returns:
        (..., N) weights summing to one along the last axis.
    """
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    running_max = torch.full((*x.shape[:-1], 1), float("-inf"), dtype=x.dtype, device=x.device)
    running_sum = torch.zeros_like(running_max)
    for start in range(0, x.shape[-1], block_size):
        running_max, running_sum, _ = online_softmax_update(running_max, running_sum, x[..., start: start + block_size])
    reference = torch.where(torch.isneginf(running_max), torch.zeros_like(running_max), running_max)
    safe_sum = torch.where(running_sum > 0, running_sum, torch.ones_like(running_sum))
    return torch.exp(x - reference) / safe_sum


def key_block_range(q_start: int, q_end: int, num_keys: int, block_size: int, *,
                    is_causal: bool = False, window: int | None = None, offset: int = 0) -> range:
    """Start indices of the key blocks that queries ``q_start ... q_end - 1`` must visit.

    Query i sits at position ``i + offset`` (``offset = K - Q`` when the queries are the
    last Q positions, as in :func:`course_lib.masking.causal_may_attend`). Causal: key blocks
    starting after the last query's position are skipped. Window w: so are key blocks
    that end before the first query's position - w + 1.

    Returns:
        ``range(first, last, block_size)`` over key-block start indices.
    """
    first, last = 0, num_keys
    if is_causal or window is not None:
        last = min(num_keys, q_end - 1 + offset + 1)
    if window is not None:
        first = max(0, q_start + offset - window + 1) // block_size * block_size
    return range(first, max(first, last), block_size)


def count_tiles(num_queries: int, num_keys: int, block_size: int, *, is_causal: bool = False,
                window: int | None = None) -> tuple[int, int]:
    """(tiles computed, tiles in the full grid) of :func:`tiled_attention` for these sizes."""
    computed = 0
    offset = num_keys - num_queries
    for q_start in range(0, num_queries, block_size):
        q_end = min(num_queries, q_start + block_size)
        computed += len(key_block_range(q_start, q_end, num_keys, block_size,
                                        is_causal=is_causal, window=window, offset=offset))
    total = math.ceil(num_queries / block_size) * math.ceil(num_keys / block_size)
    return computed, total


def tiled_attention(query: Tensor, key: Tensor, value: Tensor, may_attend: Tensor | None = None,
                    is_causal: bool = False, scale: float | None = None, *, block_size: int = 64,
                    window: int | None = None, attn_bias: Tensor | None = None,
                    attn_mask: object = REMOVED) -> Tensor:
    """softmax(Q K^T * scale + mask) V, one (block x block) tile of scores at a time.

    Args:
        query: (..., Q, D).
        key: (..., K, D).
        value: (..., K, Dv).
        may_attend: boolean, broadcastable to (..., Q, K): True = may attend
            (:mod:`course_lib.masking`). Only its tiles are read.
        is_causal: query i may attend to keys j <= i + K - Q; tiles above the diagonal are
            skipped.
        scale: defaults to 1 / sqrt(D).
        block_size: rows and columns of each tile (any value >= 1 gives the same result).
        window: if given, causal sliding-window attention: query i sees the ``window`` keys
            ending at its own position (implies ``is_causal``); tiles outside the band
            are skipped, so the cost is O(Q * window).
        attn_bias: float, broadcastable to (..., Q, K), added to the scores.
        attn_mask: removed (its polarity is not in its name): raises a TypeError.

    Returns:
        (..., Q, Dv). A query that may attend to no key gets a zero output, as in
        :func:`course_lib.scoring.scaled_dot_product_attention`.

    Shape:
        query (..., Q, D), key (..., K, D), value (..., K, Dv) -> (..., Q, Dv)
    """
    reject_old_mask_names("tiled_attention", attn_mask=attn_mask)
    if query.dim() < 2 or key.dim() < 2 or value.dim() < 2:
        raise ValueError("query, key and value need at least 2 dimensions (..., T, D); got shapes "
                         f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}")
    check_mask_dtypes(may_attend, attn_bias)
    if query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
        raise ValueError(f"expected query (..., Q, D), key (..., K, D), value (..., K, Dv); got "
                         f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}")
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    if window is not None and window < 1:
        raise ValueError(f"window must be >= 1 (the query's own position counts), got {window}")
    num_q, num_k = query.shape[-2], key.shape[-2]
    causal = is_causal or window is not None
    if causal and num_k < num_q:
        raise ValueError(f"a causal mask needs K >= Q (queries are the last Q positions), got K={num_k} < Q={num_q}")
    offset = num_k - num_q
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    allowed, bias = (_as_pairs(m, num_q, num_k) for m in (may_attend, attn_bias))

    batch_shape = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    rows: list[Tensor] = []
    for q_start in range(0, num_q, block_size):
        q_end = min(num_q, q_start + block_size)
        q = query[..., q_start:q_end, :] * scale  # (..., bq, D)
        running_max = torch.full((*batch_shape, q_end - q_start, 1), float("-inf"), dtype=query.dtype,
                                 device=query.device)  # (..., bq, 1)
        running_sum = torch.zeros_like(running_max)  # (..., bq, 1)
        acc = torch.zeros((*batch_shape, q_end - q_start, value.shape[-1]), dtype=value.dtype,
                          device=value.device)  # (..., bq, Dv)
        positions = torch.arange(q_start, q_end, device=query.device)[:, None] + offset  # (bq, 1)
        for k_start in key_block_range(q_start, q_end, num_k, block_size, is_causal=causal,
                                       window=window, offset=offset):
            k_end = min(num_k, k_start + block_size)
            scores = q @ key[..., k_start:k_end, :].transpose(-2, -1)  # (..., bq, bk)
            if bias is not None:
                scores = scores + bias[..., q_start:q_end, k_start:k_end]
            if allowed is not None:
                scores = scores.masked_fill(~allowed[..., q_start:q_end, k_start:k_end], float("-inf"))
            keys = torch.arange(k_start, k_end, device=query.device)[None, :]  # (1, bk)
            if causal and k_end - 1 > q_start + offset:  # a tile crossing the diagonal
                scores = scores.masked_fill(keys > positions, float("-inf"))
            if window is not None and k_start <= q_end - 1 + offset - window:  # crossing the band's edge
                scores = scores.masked_fill(keys <= positions - window, float("-inf"))
            running_max, running_sum, correction = online_softmax_update(running_max, running_sum, scores)
            reference = torch.where(torch.isneginf(running_max), torch.zeros_like(running_max), running_max)
            probs = torch.exp(scores - reference)  # (..., bq, bk), unnormalised
            acc = correction * acc + probs @ value[..., k_start:k_end, :]  # (..., bq, Dv)
        safe_sum = torch.where(running_sum > 0, running_sum, torch.ones_like(running_sum))
        rows.append(acc / safe_sum)  # rows with no allowed key: acc = 0, so output 0
    return torch.cat(rows, dim=-2)  # (..., Q, Dv)


def _as_pairs(mask: Tensor | None, num_q: int, num_k: int) -> Tensor | None:
    """A mask or bias broadcastable to (..., Q, K), expanded on its last two axes to (Q, K)."""
    if mask is None:
        return None
    if mask.dim() < 2:
        mask = mask.reshape(*([1] * (2 - mask.dim())), *mask.shape)
    return mask.expand(*mask.shape[:-2], num_q, num_k) if mask.shape[-2:] != (num_q, num_k) else mask


def _check_flash_inputs(query: Tensor, key: Tensor, value: Tensor, is_causal: bool, block_size: int) -> None:
    if query.dim() < 2 or key.dim() < 2 or value.dim() < 2:
        raise ValueError("query, key and value need at least 2 dimensions (..., T, D); got shapes "
                         f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}")
    if (query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]
            or not query.shape[:-2] == key.shape[:-2] == value.shape[:-2]):
        raise ValueError(f"expected query (..., Q, D), key (..., K, D), value (..., K, Dv) with the same leading "
                         f"axes; got {tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}")
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    if is_causal and key.shape[-2] < query.shape[-2]:
        raise ValueError(f"a causal mask needs K >= Q (queries are the last Q positions), "
                         f"got K={key.shape[-2]} < Q={query.shape[-2]}")


def _masked_tile(scores: Tensor, q_start: int, q_end: int, k_start: int, k_end: int, offset: int,
                 is_causal: bool) -> Tensor:
    """Apply the causal mask to one tile of scores if the tile crosses the diagonal."""
    if is_causal and k_end - 1 > q_start + offset:
        positions = torch.arange(q_start, q_end, device=scores.device)[:, None] + offset  # (bq, 1)
        keys = torch.arange(k_start, k_end, device=scores.device)[None, :]  # (1, bk)
        scores = scores.masked_fill(keys > positions, float("-inf"))
    return scores


def flash_attention_forward(query: Tensor, key: Tensor, value: Tensor, is_causal: bool = False,
                            scale: float | None = None, *, block_size: int = 64) -> tuple[Tensor, Tensor]:
    """FlashAttention's forward pass: the output and the row log-sum-exp of the scores.

    The same tile loop as :func:`tiled_attention` (without ``may_attend``, ``attn_bias`` or ``window``), which
    also returns, for each query row, ``L = m + log(l)``: the log of the softmax's normaliser,
    ``log sum_j exp(s_j)``. With it the backward pass recomputes any probability as
    ``exp(s_j - L)`` without a second pass over the row.

    Args:
        query: (..., Q, D). key: (..., K, D). value: (..., K, Dv); the same leading axes.
        is_causal: query i may attend to keys j <= i + K - Q (needs K >= Q, so that every
            query sees at least one key); tiles above the diagonal are skipped.
        scale: defaults to 1 / sqrt(D).
        block_size: rows and columns of each tile.

    Returns:
        ``(output, lse)``: (..., Q, Dv) and (..., Q).
    """
    _check_flash_inputs(query, key, value, is_causal, block_size)
    num_q, num_k = query.shape[-2], key.shape[-2]
    offset = num_k - num_q
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    outputs, lses = [], []
    for q_start in range(0, num_q, block_size):
        q_end = min(num_q, q_start + block_size)
        q = query[..., q_start:q_end, :] * scale  # (..., bq, D)
        running_max = torch.full((*query.shape[:-2], q_end - q_start, 1), float("-inf"), dtype=query.dtype,
                                 device=query.device)  # (..., bq, 1)
        running_sum = torch.zeros_like(running_max)  # (..., bq, 1)
        acc = torch.zeros((*query.shape[:-2], q_end - q_start, value.shape[-1]), dtype=value.dtype,
                          device=value.device)  # (..., bq, Dv)
        for k_start in key_block_range(q_start, q_end, num_k, block_size, is_causal=is_causal, offset=offset):
            k_end = min(num_k, k_start + block_size)
            scores = q @ key[..., k_start:k_end, :].transpose(-2, -1)  # (..., bq, bk)
            scores = _masked_tile(scores, q_start, q_end, k_start, k_end, offset, is_causal)
            running_max, running_sum, correction = online_softmax_update(running_max, running_sum, scores)
            acc = correction * acc + torch.exp(scores - running_max) @ value[..., k_start:k_end, :]
        outputs.append(acc / running_sum)  # every row saw at least one key: running_sum > 0
        lses.append((running_max + torch.log(running_sum)).squeeze(-1))  # (..., bq)
    return torch.cat(outputs, dim=-2), torch.cat(lses, dim=-1)


def flash_attention_backward(grad_output: Tensor, query: Tensor, key: Tensor, value: Tensor, output: Tensor,
                             lse: Tensor, is_causal: bool = False, scale: float | None = None, *,
                             block_size: int = 64) -> tuple[Tensor, Tensor, Tensor]:
    """FlashAttention's backward pass: the gradients of Q, K and V, recomputing every tile.

    Nothing of size Q x K is read from the forward pass: for each tile the scores are
    recomputed from Q and K, and the probabilities as ``P = exp(S - L)`` with the stored
    log-sum-exp. Then, per tile (dO = ``grad_output``, D = rowsum(dO * O) once per row)::

        dV_j += P^T dO_i     dP = dO_i V_j^T     dS = P * (dP - D_i)
        dQ_i += scale * dS K_j                   dK_j += scale * dS^T Q_i

    The outer loop runs over key blocks, as in the FlashAttention papers, so each block's dK
    and dV are finished in one sweep over the query blocks that may see it.

    Returns:
        ``(grad_query, grad_key, grad_value)``, shaped like ``query``, ``key``, ``value``.
    """
    _check_flash_inputs(query, key, value, is_causal, block_size)
    num_q, num_k = query.shape[-2], key.shape[-2]
    offset = num_k - num_q
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    delta = (grad_output * output).sum(dim=-1, keepdim=True)  # (..., Q, 1): D = rowsum(dO * O)
    lse = lse.unsqueeze(-1)  # (..., Q, 1)
    grad_query = torch.zeros_like(query)
    grad_key, grad_value = torch.zeros_like(key), torch.zeros_like(value)
    for k_start in range(0, num_k, block_size):
        k_end = min(num_k, k_start + block_size)
        k, v = key[..., k_start:k_end, :], value[..., k_start:k_end, :]  # (..., bk, D), (..., bk, Dv)
        d_k, d_v = torch.zeros_like(k), torch.zeros_like(v)
        # causal: query i sees key j iff j <= i + offset; the first query that sees key k_start is k_start - offset
        first_q = max(0, k_start - offset) // block_size * block_size if is_causal else 0
        for q_start in range(first_q, num_q, block_size):
            q_end = min(num_q, q_start + block_size)
            q = query[..., q_start:q_end, :]  # (..., bq, D)
            scores = scale * (q @ k.transpose(-2, -1))  # (..., bq, bk), recomputed
            scores = _masked_tile(scores, q_start, q_end, k_start, k_end, offset, is_causal)
            probs = torch.exp(scores - lse[..., q_start:q_end, :])  # (..., bq, bk), recomputed, normalised
            d_out = grad_output[..., q_start:q_end, :]  # (..., bq, Dv)
            d_v = d_v + probs.transpose(-2, -1) @ d_out
            d_probs = d_out @ v.transpose(-2, -1)  # (..., bq, bk)
            d_scores = probs * (d_probs - delta[..., q_start:q_end, :])  # the softmax's backward
            grad_query[..., q_start:q_end, :] += scale * (d_scores @ k)
            d_k = d_k + scale * (d_scores.transpose(-2, -1) @ q)
        grad_key[..., k_start:k_end, :] = d_k
        grad_value[..., k_start:k_end, :] = d_v
    return grad_query, grad_key, grad_value


class FlashAttentionFunction(torch.autograd.Function):
    """Autograd wrapper: saves Q, K, V, O and the row log-sum-exp; nothing of size Q x K."""

    @staticmethod
    def forward(ctx, query: Tensor, key: Tensor, value: Tensor, is_causal: bool, scale: float | None,
                block_size: int) -> Tensor:  # type: ignore[override]
        output, lse = flash_attention_forward(query, key, value, is_causal, scale, block_size=block_size)
        ctx.save_for_backward(query, key, value, output, lse)
        ctx.is_causal, ctx.scale, ctx.block_size = is_causal, scale, block_size
        return output

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_output: Tensor):  # type: ignore[override]
        query, key, value, output, lse = ctx.saved_tensors
        grads = flash_attention_backward(grad_output, query, key, value, output, lse, ctx.is_causal, ctx.scale,
                                         block_size=ctx.block_size)
        return (*grads, None, None, None)


def flash_attention(query: Tensor, key: Tensor, value: Tensor, is_causal: bool = False,
                    scale: float | None = None, *, block_size: int = 64) -> Tensor:
    """softmax(Q K^T * scale) V with FlashAttention's tiled forward **and** backward passes.

    Equal to plain attention (and to :func:`tiled_attention`) up to rounding, and its
    gradients to those autograd computes for plain attention; but between the passes it keeps
    only the output and one log-sum-exp per query row (memory O(Q), not O(Q K)).
    First-order gradients only (``once_differentiable``).

    Shape:
        query (..., Q, D), key (..., K, D), value (..., K, Dv) -> (..., Q, Dv); the same leading axes.
    """
    return FlashAttentionFunction.apply(query, key, value, is_causal, scale, block_size)
