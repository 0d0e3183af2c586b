"""Multi-head attention with ``torch.nn.MultiheadAttention``'s forward arguments.

Shape letters: B batch, L target (query) length, S source (key) length, E model size,
H heads, D = E / H head size.

Each of the H heads attends in its own D-dimensional subspace. Rather than looping over
heads, the projected (B, T, E) tensors are reshaped to (B, H, T, D) so that one batched
matmul runs every head at once (:func:`split_heads`), and the heads' outputs are put
back side by side with the inverse reshape (:func:`merge_heads`) before the output
projection W_o.

Mask convention (the same as ``nn.MultiheadAttention``, and the *opposite* of
``F.scaled_dot_product_attention`` / :func:`course_lib.scoring.scaled_dot_product_attention`):
a boolean ``key_padding_mask`` or ``attn_mask`` is True where attention is **not**
allowed; float masks are added to the scores. D2L's ``valid_lens`` of shape (B,) map to
``key_padding_mask=valid_lens_to_key_padding_mask(valid_lens, S)``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib.masking import causal_mask
from course_lib.scoring import scaled_dot_product_attention

__all__ = ["split_heads", "merge_heads", "MultiHeadAttention"]


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


class MultiHeadAttention(nn.Module):
    """Multi-head attention: W_o [head_1; ...; head_H], head_h = attention(Q W_q^h, K W_k^h, V W_v^h).

    Same constructor and forward arguments as ``torch.nn.MultiheadAttention`` (without
    ``add_bias_kv`` / ``add_zero_attn``), but ``batch_first=True`` by default. Build one
    from a PyTorch module with :meth:`from_torch`; the two then agree to rounding error.

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
        self.dropout = dropout
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

    def _merge_masks(self, key_padding_mask: Tensor | None, attn_mask: Tensor | None,
                     is_causal: bool, batch: int, tgt_len: int, src_len: int,
                     dtype: torch.dtype) -> tuple[Tensor | None, bool]:
        """Combine PyTorch-MHA-style masks into one SDPA-style mask broadcastable to (B, H, L, S)."""
        keep: Tensor | None = None
        additive: Tensor | None = None
        if key_padding_mask is not None:
            if tuple(key_padding_mask.shape) != (batch, src_len):
                raise ValueError(f"key_padding_mask must have shape (B, S)=({batch}, {src_len}), "
                                 f"got {tuple(key_padding_mask.shape)}")
            kpm = key_padding_mask[:, None, None, :]  # (B, 1, 1, S)
            if kpm.dtype == torch.bool:
                keep = ~kpm
            else:
                additive = kpm.to(dtype)
        if attn_mask is not None:
            if attn_mask.dim() == 2:
                if tuple(attn_mask.shape) != (tgt_len, src_len):
                    raise ValueError(f"a 2-D attn_mask must have shape (L, S)=({tgt_len}, {src_len}), "
                                     f"got {tuple(attn_mask.shape)}")
                am = attn_mask[None, None]  # (1, 1, L, S)
            elif attn_mask.dim() == 3:
                expected = (batch * self.num_heads, tgt_len, src_len)
                if tuple(attn_mask.shape) != expected:
                    raise ValueError(f"a 3-D attn_mask must have shape (B*H, L, S)={expected}, "
                                     f"got {tuple(attn_mask.shape)}")
                am = attn_mask.reshape(batch, self.num_heads, tgt_len, src_len)  # (B, H, L, S)
            else:
                raise ValueError(f"attn_mask must be (L, S) or (B*H, L, S), got {tuple(attn_mask.shape)}")
            if am.dtype == torch.bool:
                keep = ~am if keep is None else keep & ~am
            else:
                additive = am.to(dtype) if additive is None else additive + am.to(dtype)
        if additive is not None:
            if keep is not None:
                additive = additive.masked_fill(~keep, float("-inf"))
            return additive, is_causal
        return keep, is_causal

    def forward(self, query: Tensor, key: Tensor, value: Tensor,
                key_padding_mask: Tensor | None = None, need_weights: bool = True,
                attn_mask: Tensor | None = None, average_attn_weights: bool = True,
                is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
        """Attend from ``query`` to ``key``/``value``.

        Args:
            query, key, value: see the class docstring for shapes.
            key_padding_mask: (B, S); bool True = padding (ignored), or float added.
            need_weights: return the attention weights (slower: no fused kernel).
            attn_mask: (L, S) or (B*H, L, S); bool True = not allowed, or float added.
            average_attn_weights: average the returned weights over heads.
            is_causal: apply a causal mask (query i sees keys j <= i). Unlike PyTorch's
                module, where it is only a hint that ``attn_mask`` is causal, here it is
                enough on its own; with an ``attn_mask`` both apply.

        Returns:
            ``(output, weights)`` as in ``nn.MultiheadAttention``. A query whose keys are all
            masked gets zero weights and output ``out_proj.bias`` (PyTorch's module gives NaN
            with ``need_weights=True``).
        """
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
            q_all, k_all, v_all = F.linear(query, weight, bias).chunk(3, dim=-1)  # 3 x (B, L, E)
        else:
            q_all, k_all, v_all = self.q_proj(query), self.k_proj(key), self.v_proj(value)
        q = split_heads(q_all, self.num_heads)  # (B, H, L, D)
        k = split_heads(k_all, self.num_heads)  # (B, H, S, D)
        v = split_heads(v_all, self.num_heads)  # (B, H, S, D)
        mask, causal = self._merge_masks(key_padding_mask, attn_mask, is_causal,
                                         batch, tgt_len, src_len, q.dtype)
        out, weights = scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=causal,
            dropout_p=self.dropout if self.training else 0.0, need_weights=need_weights)
        out = self.out_proj(merge_heads(out))  # (B, L, E)
        if not self.batch_first:
            out = out.transpose(0, 1)  # (L, B, E)
        if weights is None:
            return out, None
        self.attention_weights = weights.detach()
        return out, (weights.mean(dim=1) if average_attn_weights else weights)
