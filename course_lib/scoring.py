"""Attention scoring functions: scaled dot-product, additive (Bahdanau) and multiplicative
(Luong) attention.

Shape letters: B batch, Q queries (L in PyTorch's docs), K keys (S), D query/key size,
Dv value size. ``...`` stands for any leading batch axes (e.g. B, H).

Scaled dot-product attention: Attention(Q, K, V) = softmax(Q K^T / sqrt(D) + M) V, where
the mask M is 0 where a query may look at a key and -inf where it may not.

Two APIs:

* :func:`scaled_dot_product_attention` mirrors ``F.scaled_dot_product_attention``, with
  its boolean ``attn_mask`` named for what True means, ``may_attend``, and a float mask
  added to the scores named ``attn_bias`` (:mod:`course_lib.masking`). It also returns
  the weights, which PyTorch's function does not. The attention modules call it.
* :class:`DotProductAttention`, :class:`AdditiveAttention` and
  :class:`MultiplicativeAttention` mirror D2L: a
  ``valid_lens`` tensor of shape (B,) or (B, Q) keeps the first ``valid_lens`` keys
  (see :mod:`course_lib.masking`). ``valid_lens=v`` is the same as
  ``may_attend=valid_lens_to_may_attend(v, Q, K)``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib.masking import (REMOVED, causal_may_attend, check_mask_dtypes, combine_may_attend, masked_softmax,
                               reject_old_mask_names, softmax_may_attend)

__all__ = ["scaled_dot_product_attention", "DotProductAttention", "AdditiveAttention", "MultiplicativeAttention"]


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    may_attend: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    *,
    attn_bias: Tensor | None = None,
    need_weights: bool = True,
    attn_mask: object = REMOVED,
) -> tuple[Tensor, Tensor | None]:
    """softmax(Q K^T * scale + attn_bias) V over the allowed keys, returning the weights as well.

    Args:
        query: (..., Q, D).
        key: (..., K, D).
        value: (..., K, Dv).
        may_attend: boolean, broadcastable to (..., Q, K): True = the query may attend to
            the key (what ``F.scaled_dot_product_attention`` calls a boolean ``attn_mask``).
        dropout_p: dropout on the weights (applied whenever > 0, as in PyTorch).
        is_causal: query i may attend to keys j <= i (+ K - Q when K > Q, i.e. the queries
            are the last Q positions). Combined with ``may_attend`` if both are given.
        scale: defaults to 1 / sqrt(D).
        attn_bias: float, broadcastable to (..., Q, K), added to the scores (``-inf``
            forbids a pair): PyTorch's float ``attn_mask``, e.g. ALiBi's distance penalty.
        need_weights: if False, return ``None`` weights and take PyTorch's fused kernel (on
            CPU only without dropout: PyTorch has no fused CPU kernel with dropout).
        attn_mask: removed (its polarity is not in its name); passing it raises a TypeError
            that says what to pass instead.

    Returns:
        ``(output, weights)``: output (..., Q, Dv); weights (..., Q, K) before dropout, or
        None. A query that may attend to no key gets all-zero weights and a zero output
        (PyTorch's SDPA also returns zeros since version 2.5, NaN before); both paths agree.
    """
    reject_old_mask_names("scaled_dot_product_attention", attn_mask=attn_mask)
    _check_qkv(query, key, value)
    check_mask_dtypes(may_attend, attn_bias)
    num_q, num_k = query.shape[-2], key.shape[-2]
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    # PyTorch's fused kernel, when the weights are not wanted. On CPU it has no fused version
    # with dropout (it falls back to an unfused one, measured slower than the lines below:
    # benchmarks/bench_fused_training.py), so training with attention dropout stays here.
    fused = not need_weights and (dropout_p == 0.0 or query.device.type != "cpu")
    if is_causal and (num_q != num_k or may_attend is not None or attn_bias is not None or not fused):
        # The causal mask as a tensor: only for cached steps (the queries are the last Q of
        # K positions; a single one sees every key), with another mask, or for the weights.
        causal = None if num_q == 1 else causal_may_attend(num_q, num_k, device=query.device)  # (Q, K)
        may_attend, is_causal = combine_may_attend(may_attend, causal), False
    if fused:  # queries and keys aligned: PyTorch gets is_causal itself and picks its kernel
        sdpa_mask = may_attend  # SDPA's boolean attn_mask: True = may attend, as ours
        if attn_bias is not None:
            bias = attn_bias.to(query.dtype)
            sdpa_mask = bias if may_attend is None else bias.masked_fill(~may_attend, float("-inf"))
        return F.scaled_dot_product_attention(query, key, value, attn_mask=sdpa_mask, dropout_p=dropout_p,
                                              is_causal=is_causal, scale=scale), None
    scores = torch.matmul(query * scale, key.transpose(-2, -1))  # (..., Q, K); scaling q is cheaper
    weights = softmax_may_attend(scores, may_attend, attn_bias)  # a query with no key left: zero weights
    attended = F.dropout(weights, p=dropout_p) if dropout_p > 0 else weights
    return torch.matmul(attended, value), (weights if need_weights else None)


def _check_qkv(query: Tensor, key: Tensor, value: Tensor) -> None:
    if query.dim() < 2 or key.dim() < 2 or value.dim() < 2:
        raise ValueError("query, key and value need at least 2 dimensions (..., T, E); got shapes "
                         f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}")
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(f"query and key must have the same last size D: query (..., Q, D) is "
                         f"{tuple(query.shape)}, key (..., K, D) is {tuple(key.shape)}")
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(f"key and value must have the same number of positions K: key is "
                         f"{tuple(key.shape)}, value (..., K, Dv) is {tuple(value.shape)}")


class DotProductAttention(nn.Module):
    """Scaled dot-product attention with D2L's ``valid_lens`` masking.

    Scores are q.k / sqrt(D): for q and k with i.i.d. entries of mean 0 and variance 1 the
    dot product has variance D, so dividing by sqrt(D) keeps the scores at unit variance
    and the softmax out of its saturated, vanishing-gradient regime.

    Args:
        dropout: dropout probability on the attention weights.

    Shape:
        queries (B, Q, D), keys (B, K, D), values (B, K, Dv),
        valid_lens None, (B,) or (B, Q) -> (B, Q, Dv).
        After a forward pass, ``attention_weights`` holds the (B, Q, K) weights, detached
        (:class:`course_lib.multihead.HeadsAttention` states the rule for every module).
    """

    def __init__(self, dropout: float = 0.0) -> None:
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.attention_weights: Tensor | None = None

    def forward(self, queries: Tensor, keys: Tensor, values: Tensor,
                valid_lens: Tensor | None = None) -> Tensor:
        _check_qkv(queries, keys, values)
        if queries.dim() != 3:
            raise ValueError(f"queries must have shape (B, Q, D), got {tuple(queries.shape)}")
        scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])  # (B, Q, K)
        weights = masked_softmax(scores, valid_lens)  # (B, Q, K)
        self.attention_weights = weights.detach()
        return torch.bmm(self.dropout(weights), values)


def _check_module_inputs(module: str, queries: Tensor, keys: Tensor, values: Tensor, query_size: int, key_size: int) -> None:
    """Shapes of a scoring module's inputs, each mistake named (B, Q, K and the feature sizes)."""
    if queries.dim() != 3 or keys.dim() != 3 or values.dim() != 3:
        raise ValueError(f"{module} expects queries (B, Q, query_size), keys (B, K, key_size), "
                         f"values (B, K, Dv); got {tuple(queries.shape)}, {tuple(keys.shape)}, "
                         f"{tuple(values.shape)}")
    if queries.shape[-1] != query_size or keys.shape[-1] != key_size:
        raise ValueError(f"expected query size {query_size} and key size {key_size}, "
                         f"got {queries.shape[-1]} and {keys.shape[-1]}")
    if keys.shape[:2] != values.shape[:2]:
        raise ValueError(f"keys (B, K, .) {tuple(keys.shape)} and values (B, K, Dv) "
                         f"{tuple(values.shape)} must agree on B and K")


class AdditiveAttention(nn.Module):
    """Additive (Bahdanau) attention: score(q, k) = w_v^T tanh(W_q q + W_k k).

    Queries and keys may have different sizes; both are projected to ``num_hiddens``.
    Parameter names (``W_q``, ``W_k``, ``w_v``, all without bias) match D2L's so weights
    can be copied between the two.

    Args:
        key_size: size of each key.
        query_size: size of each query.
        num_hiddens: size of the hidden layer of the scoring MLP.
        dropout: dropout probability on the attention weights.

    Shape:
        queries (B, Q, query_size), keys (B, K, key_size), values (B, K, Dv),
        valid_lens None, (B,) or (B, Q) -> (B, Q, Dv).
        After a forward pass, ``attention_weights`` holds the (B, Q, K) weights, detached
        (:class:`course_lib.multihead.HeadsAttention` states the rule for every module).
    """

    def __init__(self, key_size: int, query_size: int, num_hiddens: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.W_k = nn.Linear(key_size, num_hiddens, bias=False)
        self.W_q = nn.Linear(query_size, num_hiddens, bias=False)
        self.w_v = nn.Linear(num_hiddens, 1, bias=False)
        self.dropout = nn.Dropout(dropout)
        self.attention_weights: Tensor | None = None

    def forward(self, queries: Tensor, keys: Tensor, values: Tensor,
                valid_lens: Tensor | None = None) -> Tensor:
        _check_module_inputs("AdditiveAttention", queries, keys, values, self.W_q.in_features, self.W_k.in_features)
        return self.attend_projected(queries, self.W_k(keys), values, valid_lens)

    def attend_projected(self, queries: Tensor, projected_keys: Tensor, values: Tensor,
                         valid_lens: Tensor | None = None) -> Tensor:
        """:meth:`forward` with the keys already projected, ``W_k keys`` (B, K, num_hiddens): a
        decoder that asks one query per step of the same keys projects them once."""
        features = torch.tanh(self.W_q(queries).unsqueeze(2) + projected_keys.unsqueeze(1))  # (B, Q, K, h)
        scores = self.w_v(features).squeeze(-1)  # (B, Q, K)
        weights = masked_softmax(scores, valid_lens)  # (B, Q, K)
        self.attention_weights = weights.detach()
        return torch.bmm(self.dropout(weights), values)  # (B, Q, Dv)


class MultiplicativeAttention(nn.Module):
    """Multiplicative attention (Luong et al. 2015, their "general" score): score(q, k) = q^T W_a k.

    One learned matrix ``W_a`` (query_size x key_size, no bias) between query and key, so
    queries and keys may have different sizes, as in :class:`AdditiveAttention`, but the
    scores of all pairs are one batched matrix product, as in :class:`DotProductAttention`:
    Q (K W_a^T)^T. With equal sizes and ``W_a`` = I the score is the plain dot product
    (Luong's "dot" score); with ``W_a`` = I / sqrt(D) this module equals
    :class:`DotProductAttention`. Scaled dot-product attention on learned projections
    q W_q and k W_k is this score with ``W_a`` = W_q W_k^T / sqrt(D), of rank at most D.
    No scale is applied: Luong et al. use none (initialise or scale ``W_a`` instead).

    Args:
        key_size: size of each key.
        query_size: size of each query.
        dropout: dropout probability on the attention weights.

    Shape:
        queries (B, Q, query_size), keys (B, K, key_size), values (B, K, Dv),
        valid_lens None, (B,) or (B, Q) -> (B, Q, Dv).
        After a forward pass, ``attention_weights`` holds the (B, Q, K) weights, detached
        (:class:`course_lib.multihead.HeadsAttention` states the rule for every module).
        ``W_a.weight`` is the (query_size, key_size) matrix W_a.
    """

    def __init__(self, key_size: int, query_size: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.W_a = nn.Linear(key_size, query_size, bias=False)  # W_a k for each key: (query_size, key_size)
        self.dropout = nn.Dropout(dropout)
        self.attention_weights: Tensor | None = None

    def forward(self, queries: Tensor, keys: Tensor, values: Tensor,
                valid_lens: Tensor | None = None) -> Tensor:
        _check_module_inputs("MultiplicativeAttention", queries, keys, values, self.W_a.out_features, self.W_a.in_features)
        scores = torch.bmm(queries, self.W_a(keys).transpose(1, 2))  # (B, Q, K): q_i^T W_a k_j
        weights = masked_softmax(scores, valid_lens)  # (B, Q, K)
        self.attention_weights = weights.detach()
        return torch.bmm(self.dropout(weights), values)  # (B, Q, Dv)
