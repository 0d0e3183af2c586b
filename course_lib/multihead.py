"""Multi-head attention with ``torch.nn.MultiheadAttention``'s constructor.

    MultiHead(Q, K, V) = [head_1; ...; head_H] W_o,
    head_h = softmax((Q W_q^h)(K W_k^h)^T / sqrt(D) + M) V W_v^h,

where W_q^h, W_k^h, W_v^h are the E x D column blocks h of the E x E projections and M is
the mask (0 where a query may attend, -inf elsewhere).

Shape letters: B batch, L target (query) length, S source (key) length, E model size,
H heads, D = E / H head size.

Each of the H heads attends in its own D-dimensional subspace. Rather than looping over
heads, the projected (B, T, E) tensors are reshaped to (B, H, T, D) so that one batched
matmul runs every head at once (:func:`split_heads`), and the heads' outputs are put
back side by side with the inverse reshape (:func:`merge_heads`) before the output
projection W_o.

Masks (:mod:`course_lib.masking`): ``may_attend`` (L, S), True = the query may attend to
the key, and ``real_keys`` (B, S), True = a real key, not padding; a float ``attn_bias`` is
added to the scores. ``torch.nn.MultiheadAttention`` takes the negations, under the names
``attn_mask`` and ``key_padding_mask`` (True = masked out); this module refuses those names,
so a mask cannot be read with the wrong polarity. D2L's ``valid_lens`` of shape (B,) map to
``real_keys=valid_lens_to_real_keys(valid_lens, S)``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib.masking import REMOVED, check_mask_dtypes, combine_may_attend, reject_old_mask_names
from course_lib.scoring import scaled_dot_product_attention

__all__ = ["split_heads", "merge_heads", "HeadsAttention", "set_record_attention",
           "MultiHeadAttention", "attend_heads", "KVCache"]


def split_heads(x: Tensor, num_heads: int) -> Tensor:
    """(B, T, E) -> (B, H, T, D) with D = E / H: head h gets features h*D ... (h+1)*D - 1."""
    batch, steps, embed = x.shape
    if embed % num_heads:
        raise ValueError(f"the last size E={embed} must be divisible by num_heads={num_heads}")
    x = x.reshape(batch, steps, num_heads, embed // num_heads)  # (B, T, H, D)
    return x.transpose(1, 2)  # (B, H, T, D)


def merge_heads(x: Tensor) -> Tensor:
    """Inverse of :func:`split_heads`: (B, H, T, D) -> (B, T, H*D)."""
    batch, heads, steps, head_dim = x.shape
    x = x.transpose(1, 2)  # (B, T, H, D)
    return x.reshape(batch, steps, heads * head_dim)  # (B, T, E)


class HeadsAttention(nn.Module):
    """Base of the course's multi-head attention modules, and their weights contract.

    The rule for attention weights, the same in every attention module of the course (the
    scoring modules, Nadaraya-Watson regression, the Bahdanau decoder, the multi-head
    modules, GPT's, GQA, the ViT's): ``attention_weights`` holds the weights of the last
    forward pass as one detached tensor, or None when that pass did not form them. A module
    forms them whenever its computation needs them (the scoring modules and the Bahdanau
    decoder always do); a multi-head module can skip them to take PyTorch's fused kernel,
    and ``record_attention`` says when it may. Models stack them per layer in
    ``attention_maps()``; a model for :mod:`course_lib.decoding` also sets
    ``last_attention_weights``, one detached tensor whose first axis is the batch.

    Attributes:
        dropout_p: dropout probability on the attention weights, applied in training (the
            name of ``F.scaled_dot_product_attention``'s argument; everywhere else in the
            course ``dropout`` is an ``nn.Dropout`` module, and the constructors' ``dropout``
            argument is the probability).
        attention_weights: the per-head weights (B, H, L, S) of the last forward pass,
            detached, or None if that pass did not record them.
        record_attention: when a model's blocks record the weights. None (the default):
            in evaluation mode only, so that training takes PyTorch's fused kernel, which
            never forms the weights; True: always; False: never. Set it for a whole model
            with :func:`set_record_attention`. (``MultiHeadAttention`` called directly
            follows its ``need_weights`` argument, as PyTorch's module does.)
    """

    dropout_p: float
    attention_weights: Tensor | None = None
    record_attention: bool | None = None

    def _records(self) -> bool:
        """Whether the next forward pass of a block records :attr:`attention_weights`."""
        return not self.training if self.record_attention is None else self.record_attention


def set_record_attention(model: nn.Module, flag: bool | None = True) -> None:
    """Set ``record_attention`` of every attention module in ``model`` (see :class:`HeadsAttention`)."""
    for module in model.modules():
        if isinstance(module, HeadsAttention):
            module.record_attention = flag


@contextmanager
def _recording_attention(model: nn.Module, flag: bool | None) -> Iterator[None]:
    """:func:`set_record_attention` for the ``with`` block only; the old settings come back after it."""
    saved = [(m, m.record_attention) for m in model.modules() if isinstance(m, HeadsAttention)]
    set_record_attention(model, flag)
    try:
        yield
    finally:
        for module, old in saved:
            module.record_attention = old


class MultiHeadAttention(HeadsAttention):
    """Multi-head attention: W_o [head_1; ...; head_H], head_h = attention(Q W_q^h, K W_k^h, V W_v^h).

    Same constructor as ``torch.nn.MultiheadAttention`` (without ``add_bias_kv`` /
    ``add_zero_attn``), but ``batch_first=True`` by default; its forward takes the masks
    as ``may_attend`` / ``real_keys`` (True = may attend) instead of PyTorch's ``attn_mask`` /
    ``key_padding_mask`` (True = masked out). Build one from a PyTorch module with
    :meth:`from_torch`; the two then agree to rounding error.

    Args:
        embed_dim: model size E.
        num_heads: H; must divide E.
        dropout: dropout on the attention weights (training only).
        bias: whether the four projections have biases.
        kdim, vdim: sizes of keys and values (default E).
        batch_first: inputs are (B, T, E) if True, (T, B, E) otherwise.

    Shape:
        query (B, L, E), key (B, S, kdim), value (B, S, vdim) -> output (B, L, E) and
        weights (B, L, S) averaged over heads, (B, H, L, S) per head, or None.
        After a forward pass with ``need_weights``, ``attention_weights`` holds the
        per-head weights (B, H, L, S), detached, for plotting.

    Parameters: 4 E^2 (+ 4 E biases) when kdim = vdim = E, whatever H is.
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 kdim: int | None = None, vdim: int | None = None, batch_first: bool = True,
                 device: torch.device | str | None = None, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be positive, got {embed_dim} and {num_heads}")
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim={embed_dim} must be divisible by num_heads={num_heads} "
                             f"(each head gets embed_dim / num_heads features)")
        factory = {"device": device, "dtype": dtype}
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self.dropout_p = dropout
        self.batch_first = batch_first
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **factory)
        self.k_proj = nn.Linear(self.kdim, embed_dim, bias=bias, **factory)
        self.v_proj = nn.Linear(self.vdim, embed_dim, bias=bias, **factory)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **factory)
        self.attention_weights: Tensor | None = None

    @classmethod
    def from_torch(cls, module: nn.MultiheadAttention) -> "MultiHeadAttention":
        """An equivalent module with weights copied from a ``torch.nn.MultiheadAttention``."""
        if module.bias_k is not None or module.add_zero_attn:
            raise ValueError("add_bias_kv and add_zero_attn are not supported by MultiHeadAttention")
        weight = module.out_proj.weight
        ours = cls(module.embed_dim, module.num_heads, dropout=module.dropout,
                   bias=module.in_proj_bias is not None, kdim=module.kdim, vdim=module.vdim,
                   batch_first=module.batch_first, device=weight.device, dtype=weight.dtype)
        with torch.no_grad():
            if module._qkv_same_embed_dim:
                assert module.in_proj_weight is not None
                w_q, w_k, w_v = module.in_proj_weight.chunk(3)
            else:
                w_q, w_k, w_v = module.q_proj_weight, module.k_proj_weight, module.v_proj_weight
            for proj, w in ((ours.q_proj, w_q), (ours.k_proj, w_k), (ours.v_proj, w_v)):
                proj.weight.copy_(w)
            if module.in_proj_bias is not None:
                for proj, b in zip((ours.q_proj, ours.k_proj, ours.v_proj), module.in_proj_bias.chunk(3)):
                    proj.bias.copy_(b)
            ours.out_proj.weight.copy_(module.out_proj.weight)
            if module.out_proj.bias is not None:
                ours.out_proj.bias.copy_(module.out_proj.bias)
        return ours.train(module.training)

    def forward(self, query: Tensor, key: Tensor, value: Tensor, *,
                real_keys: Tensor | None = None, need_weights: bool = True,
                may_attend: Tensor | None = None, attn_bias: Tensor | None = None,
                average_attn_weights: bool = True, is_causal: bool = False,
                key_padding_mask: object = REMOVED, attn_mask: object = REMOVED) -> tuple[Tensor, Tensor | None]:
        """Attend from ``query`` to ``key``/``value``.

        Args:
            query, key, value: see the class docstring for shapes.
            real_keys: (B, S) bool, True = a real key, False = padding (ignored).
            need_weights: return the attention weights (slower: no fused kernel).
            may_attend: (L, S) or (B*H, L, S) bool, True = the query may attend to the key.
            attn_bias: float added to the scores: (L, S), (B*H, L, S), or broadcastable
                to (B, H, L, S), e.g. a per-head (H, L, S) ALiBi bias.
            average_attn_weights: average the returned weights over heads.
            is_causal: apply a causal mask (query i sees keys j <= i). Unlike PyTorch's
                module, where it is only a hint that ``attn_mask`` is causal, here it is
                enough on its own; with an ``attn_mask`` both apply.

            key_padding_mask, attn_mask: removed (PyTorch's names, True = masked out); passing
                either raises a TypeError that says what to pass instead.

        Returns:
            ``(output, weights)`` as in ``nn.MultiheadAttention``. A query whose keys are all
            masked gets zero weights and output ``out_proj.bias`` (PyTorch's module gives NaN
            with ``need_weights=True``).
        """
        reject_old_mask_names("MultiHeadAttention.forward", key_padding_mask=key_padding_mask, attn_mask=attn_mask)
        # Self-attention (one tensor for all three) lets one GEMM do the three projections.
        packed = query is key and key is value and self.kdim == self.vdim == self.embed_dim
        if not self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))  # (B, T, E)
        if query.dim() != 3 or key.dim() != 3 or value.dim() != 3:
            raise ValueError("query, key and value must be 3-D: (B, L, E), (B, S, kdim), (B, S, vdim) "
                             f"with batch_first=True; got {tuple(query.shape)}, {tuple(key.shape)}, "
                             f"{tuple(value.shape)}")
        batch, tgt_len, embed = query.shape
        src_len = key.shape[1]
        if embed != self.embed_dim:
            raise ValueError(f"query must have shape (B, L, E={self.embed_dim}), got {tuple(query.shape)}")
        if key.shape[-1] != self.kdim or value.shape[-1] != self.vdim:
            raise ValueError(f"key must be (B, S, {self.kdim}) and value (B, S, {self.vdim}); got "
                             f"{tuple(key.shape)} and {tuple(value.shape)}")
        if key.shape[:2] != value.shape[:2] or key.shape[0] != batch:
            raise ValueError(f"query {tuple(query.shape)}, key {tuple(key.shape)} and value "
                             f"{tuple(value.shape)} must share B, and key/value must share S")

        if packed:  # the same numbers as the three separate projections below, a little faster
            projections = (self.q_proj, self.k_proj, self.v_proj)
            weight = torch.cat([p.weight for p in projections])  # (3E, E)
            bias = None if self.q_proj.bias is None else torch.cat([p.bias for p in projections])  # (3E,)
            q, k, v = (split_heads(t, self.num_heads) for t in F.linear(query, weight, bias).chunk(3, dim=-1))
        else:
            q = self.project_query(query)  # (B, H, L, D)
            k, v = self.project_key_value(key, value)  # (B, H, S, D) each
        allowed = combine_may_attend(self._real_keys_view(real_keys, batch, src_len),
                                     self._pairs_view(may_attend, "may_attend", batch, tgt_len, src_len))
        added = self._pairs_view(attn_bias, "attn_bias", batch, tgt_len, src_len)
        out, weights = self.attend(q, k, v, allowed, attn_bias=added, is_causal=is_causal,
                                   need_weights=need_weights)
        if not self.batch_first:
            out = out.transpose(0, 1)  # (L, B, E)
        if weights is None:
            return out, None
        return out, (weights.mean(dim=1) if average_attn_weights else weights)

    # The pieces of forward, also used on their own by cached decoding.

    def project_query(self, query: Tensor) -> Tensor:
        """(B, L, E) -> the per-head queries (B, H, L, D)."""
        return split_heads(self.q_proj(query), self.num_heads)

    def project_key_value(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """(B, S, kdim), (B, S, vdim) -> the per-head keys and values, (B, H, S, D) each."""
        return split_heads(self.k_proj(key), self.num_heads), split_heads(self.v_proj(value), self.num_heads)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, may_attend: Tensor | None = None, *,
               attn_bias: Tensor | None = None, is_causal: bool = False,
               need_weights: bool = True) -> tuple[Tensor, Tensor | None]:
        """Attend with the per-head q (B, H, L, D), k and v (B, H, S, D), merge the heads and
        apply W_o: output (B, L, E) and per-head weights (B, H, L, S) or None. ``may_attend``
        (bool, True = may attend) and ``attn_bias`` (float) broadcast to (B, H, L, S)."""
        return attend_heads(self, q, k, v, self.out_proj, may_attend, attn_bias=attn_bias,
                            is_causal=is_causal, need_weights=need_weights)

    @staticmethod
    def _real_keys_view(real_keys: Tensor | None, batch: int, src_len: int) -> Tensor | None:
        if real_keys is None:
            return None
        if real_keys.dtype != torch.bool or tuple(real_keys.shape) != (batch, src_len):
            raise ValueError(f"real_keys must be a boolean (B, S)=({batch}, {src_len}) tensor (True = real "
                             f"key), got {real_keys.dtype} of shape {tuple(real_keys.shape)}")
        return real_keys[:, None, None, :]  # (B, 1, 1, S)

    def _pairs_view(self, mask: Tensor | None, name: str, batch: int, tgt_len: int, src_len: int) -> Tensor | None:
        """``may_attend`` or ``attn_bias`` as a tensor that broadcasts to (B, H, L, S)."""
        if mask is None:
            return None
        check_mask_dtypes(*((mask, None) if name == "may_attend" else (None, mask)))
        if mask.dim() == 2:
            if tuple(mask.shape) != (tgt_len, src_len):
                raise ValueError(f"a 2-D {name} must have shape (L, S)=({tgt_len}, {src_len}), "
                                 f"got {tuple(mask.shape)}")
            return mask[None, None]  # (1, 1, L, S)
        if mask.dim() == 3 and mask.shape[0] == batch * self.num_heads and batch > 1:
            return mask.reshape(batch, self.num_heads, tgt_len, src_len)  # (B, H, L, S)
        try:
            torch.broadcast_shapes(mask.shape, (batch, self.num_heads, tgt_len, src_len))
        except RuntimeError:
            raise ValueError(f"{name} must be (L, S), (B*H, L, S) or broadcastable to (B, H, L, S)="
                             f"{(batch, self.num_heads, tgt_len, src_len)}, got {tuple(mask.shape)}") from None
        return mask


def attend_heads(module: HeadsAttention, q: Tensor, k: Tensor, v: Tensor, out_proj: nn.Module,
                 may_attend: Tensor | None = None, *, attn_bias: Tensor | None = None,
                 is_causal: bool = False, need_weights: bool = True) -> tuple[Tensor, Tensor | None]:
    """The middle of every multi-head attention in the course: attend, merge heads, project.

    ``module`` supplies ``dropout_p`` (a probability, applied in training) and receives the
    detached weights in ``attention_weights`` (None when ``need_weights`` is False).

    Shape:
        q (B, H, L, D), k and v (B, H, S, D), may_attend (True = may attend) and attn_bias
        broadcastable to (B, H, L, S) -> output (B, L, E), weights (B, H, L, S) or None.
    """
    dropout = module.dropout_p if module.training else 0.0
    out, weights = scaled_dot_product_attention(q, k, v, may_attend, dropout_p=dropout, is_causal=is_causal,
                                                attn_bias=attn_bias, need_weights=need_weights)
    module.attention_weights = None if weights is None else weights.detach()
    return out_proj(merge_heads(out)), weights  # (B, L, E)


class KVCache:
    """The keys and values of the positions seen so far, per layer: what cached decoding
    carries from one step to the next. The one cache of the course: GPT
    (``model(idx, cache=cache)``), the Transformer decoder (:class:`TransformerState`) and
    grouped-query attention use it.

    A causal model's past never depends on the future, so the keys and values of earlier
    positions never change: a step projects only its new positions and appends them with
    :meth:`update` (in place). ``len(cache)`` is the number of cached positions t.

    Shape:
        ``keys[layer]`` and ``values[layer]``: (B, heads, t, D).
    """

    def __init__(self, keys: list[Tensor] | None = None, values: list[Tensor] | None = None) -> None:
        self.keys: list[Tensor] = list(keys or [])
        self.values: list[Tensor] = list(values or [])

    def __len__(self) -> int:
        return self.length(0)

    def length(self, layer: int) -> int:
        """Positions cached for ``layer`` (0 before its first :meth:`update`)."""
        return self.keys[layer].shape[2] if layer < len(self.keys) else 0

    def clear(self) -> None:
        self.keys.clear()
        self.values.clear()

    def update(self, layer: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Append the new (B, heads, T, D) keys/values of ``layer``; return all (B, heads, t+T, D)."""
        if layer == len(self.keys):  # first call for this layer
            self.keys.append(k)
            self.values.append(v)
        elif layer < len(self.keys):
            self.keys[layer] = torch.cat([self.keys[layer], k], dim=2)  # (B, heads, t+T, D)
            self.values[layer] = torch.cat([self.values[layer], v], dim=2)  # (B, heads, t+T, D)
        else:
            raise ValueError(f"layers must be cached in order: got layer {layer} with "
                             f"{len(self.keys)} layers cached")
        return self.keys[layer], self.values[layer]

    def index_select(self, index: Tensor) -> "KVCache":
        """A new cache whose row ``i`` is row ``index[i]`` of this one (beam search)."""
        return KVCache([k.index_select(0, index) for k in self.keys],
                       [v.index_select(0, index) for v in self.values])
