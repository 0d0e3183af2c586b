"""Grouped-query attention (GQA, Ainslie et al., 2023) and multi-query attention (MQA, Shazeer, 2019).

    head_h = softmax((Q W_q^h)(K W_k^g)^T / sqrt(D) + M) V W_v^g,   g = floor(h / (H / G)):

query head h uses key/value head g of its group, so only G key/value heads are projected
and cached.

Shape letters: B batch, L target (query) length, S source (key) length, E model size,
H query heads, G key/value heads (``num_kv_heads``), D = E / H head size, t cached positions.

When a model generates text, its key/value cache holds, for every layer and every past
token, H keys and H values of size D: 2 * n_layer * H * D numbers per token. That memory,
not the arithmetic, limits batch size and context length. GQA keeps H query heads but
only G < H key/value heads; the H query heads are split into G groups of H / G heads
that share one key/value head. G = H is ordinary multi-head attention, G = 1 is MQA.
The cache shrinks by the factor H / G.

Sharing is done by repeating each key/value head for the H / G query heads of its group
(:func:`repeat_kv`): query head h uses key/value head h // (H / G), i.e. the copies of one
head are *adjacent* (``repeat_interleave``), as in ``F.scaled_dot_product_attention(...,
enable_gqa=True)``.

Masks as in :class:`course_lib.multihead.MultiHeadAttention`: a boolean ``real_keys`` (B, S) is
True at real keys; padded keys are ignored.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from course_lib.alibi import ALiBi
from course_lib.masking import REMOVED, reject_old_mask_names
from course_lib.multihead import HeadsAttention, KVCache, MultiHeadAttention, attend_heads, split_heads
from course_lib.rotary import RotaryEmbedding

__all__ = ["repeat_kv", "GroupedQueryAttention", "kv_cache_bytes_per_token"]


def repeat_kv(x: Tensor, num_repeats: int) -> Tensor:
    """Repeat each key/value head ``num_repeats`` times, copies adjacent: (B, G, S, D) -> (B, G*r, S, D).

    Output head h is input head h // num_repeats (so heads 0 ... r-1 share input head 0).
    """
    if num_repeats < 1:
        raise ValueError(f"num_repeats must be >= 1, got {num_repeats}")
    if num_repeats == 1:
        return x
    batch, groups, steps, head_dim = x.shape
    x = x[:, :, None].expand(batch, groups, num_repeats, steps, head_dim)  # (B, G, r, S, D)
    return x.reshape(batch, groups * num_repeats, steps, head_dim)  # (B, G*r, S, D)


def kv_cache_bytes_per_token(n_layer: int, num_kv_heads: int, head_dim: int,
                             dtype: torch.dtype = torch.float32) -> int:
    """Bytes the key/value cache grows by per generated token (per sequence in the batch):
    2 (keys and values) * n_layer * G * D * bytes per number."""
    return 2 * n_layer * num_kv_heads * head_dim * torch.empty((), dtype=dtype).element_size()


class GroupedQueryAttention(HeadsAttention):
    """Attention with ``num_heads`` query heads sharing ``num_kv_heads`` key/value heads.

    Args:
        embed_dim: E.
        num_heads: H; must divide E.
        num_kv_heads: G; must divide H. G = H is multi-head attention, G = 1 multi-query.
        dropout: dropout on the attention weights (training only).
        bias: biases in the four projections.
        rotary: rotate queries and keys with :class:`course_lib.rotary.RotaryEmbedding`
            (then ``rotary_max_len`` bounds the positions).
        alibi: add ALiBi's per-head distance penalty to the scores
            (:class:`course_lib.alibi.ALiBi`; no bound on the positions).

    Shape:
        query (B, L, E), key and value (B, S, E) -> (B, L, E). With a ``cache`` (a
        :class:`course_lib.multihead.KVCache`), the new keys and values (B, G, S, D) are
        appended and attention runs over all t + S cached positions. After a call that
        records them (``record_attention``, as every attention module), ``attention_weights``
        holds the per-query-head weights (B, H, L, t+S).

    Parameters: 2 E^2 + 2 E G D (+ biases): the key and value projections are H / G times
    smaller than in multi-head attention.
    """

    def __init__(self, embed_dim: int, num_heads: int, num_kv_heads: int, dropout: float = 0.0,
                 bias: bool = True, rotary: bool = False, rotary_max_len: int = 2048,
                 alibi: bool = False) -> None:
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0 or num_kv_heads <= 0:
            raise ValueError(f"embed_dim, num_heads and num_kv_heads must be positive, got "
                             f"{embed_dim}, {num_heads}, {num_kv_heads}")
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim={embed_dim} must be divisible by num_heads={num_heads}")
        if num_heads % num_kv_heads:
            raise ValueError(f"num_heads={num_heads} must be divisible by num_kv_heads={num_kv_heads} "
                             "(each key/value head serves an equal group of query heads)")
        self.embed_dim, self.num_heads, self.num_kv_heads = embed_dim, num_heads, num_kv_heads
        self.head_dim = embed_dim // num_heads
        self.dropout_p = dropout
        kv_dim = num_kv_heads * self.head_dim
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.k_proj = nn.Linear(embed_dim, kv_dim, bias=bias)
        self.v_proj = nn.Linear(embed_dim, kv_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.rotary = RotaryEmbedding(self.head_dim, rotary_max_len) if rotary else None
        self.alibi = ALiBi(num_heads) if alibi else None

    @classmethod
    def from_multihead(cls, mha: MultiHeadAttention) -> "GroupedQueryAttention":
        """A GQA layer with G = H and the weights of ``mha``: it computes the same function."""
        if mha.kdim != mha.embed_dim or mha.vdim != mha.embed_dim:
            raise ValueError("from_multihead needs kdim = vdim = embed_dim")
        gqa = cls(mha.embed_dim, mha.num_heads, mha.num_heads, dropout=mha.dropout_p,
                  bias=mha.q_proj.bias is not None).to(mha.q_proj.weight.dtype)
        gqa.load_state_dict(mha.state_dict())  # the same four projections, the same names
        return gqa.train(mha.training)

    def forward(self, query: Tensor, key: Tensor, value: Tensor, real_keys: Tensor | None = None,
                is_causal: bool = False, cache: KVCache | None = None, layer: int = 0, *,
                key_padding_mask: object = REMOVED) -> Tensor:
        """Attend from ``query`` to ``key``/``value`` (see the class docstring for shapes).

        Args:
            real_keys: (B, S) boolean, True = real key, False = padding (ignored); not with a cache.
            is_causal: query i sees keys j <= i (+ t, the cached positions).
            cache: optional KVCache updated in place; its tensors are (B, G, t, D).
            layer: which of the cache's layers this module is.
        """
        if query.dim() != 3 or key.dim() != 3 or value.dim() != 3 or query.shape[-1] != self.embed_dim:
            raise ValueError(f"query, key and value must be (B, L, E={self.embed_dim}), (B, S, E), (B, S, E); "
                             f"got {tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}")
        reject_old_mask_names("GroupedQueryAttention.forward", key_padding_mask=key_padding_mask)
        start = cache.length(layer) if cache is not None else 0  # this layer's t
        q = split_heads(self.q_proj(query), self.num_heads)  # (B, H, L, D)
        k = split_heads(self.k_proj(key), self.num_kv_heads)  # (B, G, S, D)
        v = split_heads(self.v_proj(value), self.num_kv_heads)  # (B, G, S, D)
        if self.rotary is not None:
            q = self.rotary(q, offset=start)  # self-attention: query i is at position t + i
            k = self.rotary(k, offset=start)
        if cache is not None:
            k, v = cache.update(layer, k, v)  # (B, G, t+S, D): only G heads are stored
        may_attend = None
        if real_keys is not None:
            if cache is not None or tuple(real_keys.shape) != (query.shape[0], k.shape[2]):
                raise ValueError(f"real_keys must be (B, S)=({query.shape[0]}, {k.shape[2]}) and "
                                 f"cannot be combined with a cache; got {tuple(real_keys.shape)}")
            may_attend = real_keys[:, None, None, :]  # (B, 1, 1, S), True = real key
        bias = None if self.alibi is None else self.alibi(q.shape[2], k.shape[2], dtype=q.dtype)  # (H, L, t+S)
        group = self.num_heads // self.num_kv_heads
        out, _ = attend_heads(self, q, repeat_kv(k, group), repeat_kv(v, group), self.out_proj, may_attend,
                              attn_bias=bias, is_causal=is_causal, need_weights=self._records())
        return out  # (B, L, E)
