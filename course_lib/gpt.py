"""Decoder-only (GPT) and encoder-only (BERT-style) models for lesson 8.

GPT models p(x_1 ... x_T) = prod_t p(x_t | x_<t) and is trained on the next-token loss
-sum_t log p(x_t | x_<t), each block being x = x + attn(LN_1(x)); x = x + MLP(LN_2(x)) with
causal self-attention softmax(Q K^T / sqrt(D) + M_causal) V. BERT is trained on the
masked-LM loss -sum_{i masked} log p(x_i | the unmasked tokens), with no causal mask.

Shape letters: B batch, T sequence length, E model size (n_embd), H heads, D = E / H
head size, V vocabulary size, t positions already in the key/value cache.

GPT keeps only the decoder half of the Transformer, without cross-attention: every
position attends to itself and the positions before it (causal self-attention), and the
model is trained to predict the next token everywhere at once. Generating text is then
repeated sampling: predict, sample, append, predict again.

BERT keeps only the encoder half: attention is bidirectional, so a position sees the
whole sentence. It cannot generate left to right; it is trained to recover tokens that
were hidden (masked language modelling, :func:`mask_tokens` and :class:`MaskedLM`).

Key/value cache. At generation step n, a plain forward pass recomputes the keys and
values of all n previous positions, although they did not change (a causal model's past
never depends on the future). The cache keeps each layer's keys and values; a step then
projects only the newest token and attends with that single query to the cached keys:
O(n) work per step instead of O(n^2) for attention, and one token instead of n through
the MLPs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib.data import check_config
from course_lib.masking import valid_lens_to_real_keys
from course_lib.multihead import (HeadsAttention, KVCache, _recording_attention, attend_heads, set_record_attention,
                                  split_heads)
from course_lib.positional import LearnedPositionalEmbedding
from course_lib.training import eval_mode
from course_lib.transformer import TransformerConfig, TransformerEncoder

# Block and MLP are not exported (``course_lib.Block`` would be too generic a name);
# import them from course_lib.gpt.
__all__ = [
    "GPTConfig",
    "CausalSelfAttention",
    "GPT",
    "sample_next",
    "mask_tokens",
    "MaskedLMConfig",
    "MaskedLM",
]


@dataclass
class GPTConfig:
    """Hyperparameters of :class:`GPT`.

    Args:
        vocab_size: V.
        block_size: the longest context the model sees (number of learned positions).
        n_layer: number of blocks.
        n_head: H; must divide ``n_embd``.
        n_embd: E.
        dropout: dropout on embeddings, attention weights and residual branches.
        bias: biases in the Linear layers and LayerNorms.
    """

    vocab_size: int
    block_size: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 64
    dropout: float = 0.0
    bias: bool = True

    def __post_init__(self) -> None:
        check_config(self, ("vocab_size", "block_size", "n_layer", "n_head", "n_embd"), "n_embd", "n_head")


class CausalSelfAttention(HeadsAttention):
    """Multi-head self-attention in which position i attends to positions <= i.

    One Linear layer computes queries, keys and values together (3 E outputs), which is
    the same as three separate E x E projections stacked. The attention itself is the one
    every multi-head module of the course uses (:func:`course_lib.multihead.attend_heads`):
    softmax(Q K^T / sqrt(D)) V with the causal mask, the queries being the last T of the
    t + T positions when a cache holds t. It keeps the detached (B, H, T, t+T) weights in
    ``attention_weights`` when ``record_attention`` says so (in evaluation mode by default,
    :class:`course_lib.multihead.HeadsAttention`), and otherwise takes PyTorch's fused
    kernel, which never forms them.

    Shape:
        x (B, T, E) -> (B, T, E)
    """

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.n_head, self.n_embd = config.n_head, config.n_embd
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.dropout_p = config.dropout
        self.resid_dropout = nn.Dropout(config.dropout)

    def forward(self, x: Tensor, cache: KVCache | None = None, layer: int = 0) -> Tensor:
        """Attend; with a ``cache`` holding t positions, ``x`` holds positions t ... t+T-1."""
        q, k, v = (split_heads(t, self.n_head) for t in self.c_attn(x).split(self.n_embd, dim=2))  # (B, H, T, D)
        if cache is not None:
            k, v = cache.update(layer, k, v)  # (B, H, t+T, D): past keys/values never change
        # is_causal: query i sits at position t + i and sees keys j <= t + i (the offset mask
        # when t > 0, PyTorch's own causal kernel when t = 0; a single query sees every key)
        out, _ = attend_heads(self, q, k, v, self.c_proj, is_causal=True, need_weights=self._records())
        return self.resid_dropout(out)  # (B, T, E)


class MLP(nn.Module):
    """Position-wise feed-forward network, GPT-2 style: Linear(E, 4E), GELU, Linear(4E, E)."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x))))


class Block(nn.Module):
    """Pre-norm Transformer decoder block without cross-attention:
    x + attn(ln_1(x)), then x + mlp(ln_2(x))."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x: Tensor, cache: KVCache | None = None, layer: int = 0) -> Tensor:
        x = x + self.attn(self.ln_1(x), cache, layer)
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """A small GPT: token + learned position embeddings, n_layer blocks, LayerNorm, logits.

    The output layer shares its weight matrix with the token embedding (weight tying,
    as in GPT-2). Weights start from N(0, 0.02); the projections that write into the
    residual stream get a smaller std, 0.02 / sqrt(2 n_layer), so the stream's variance
    does not grow with depth.

    Args:
        config: a :class:`GPTConfig`.

    Shape:
        idx (B, T) with T <= block_size -> logits (B, T, V).
    """

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.block_size, config.n_embd)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * config.n_layer))
            elif p.dim() == 2:
                nn.init.normal_(p, std=0.02)
            elif name.endswith(".bias") and "ln" not in name:
                nn.init.zeros_(p)

    def num_parameters(self) -> int:
        """Number of parameters (the tied embedding counted once)."""
        return sum(p.numel() for p in self.parameters())

    def forward(self, idx: Tensor, targets: Tensor | None = None, *,
                cache: KVCache | None = None) -> tuple[Tensor, Tensor | None]:
        """Next-token logits for every position, and the loss if ``targets`` are given.

        Args:
            idx: (B, T) token ids. With a ``cache`` holding t positions, these are the
                tokens at positions t ... t+T-1.
            targets: optional (B, T) next tokens (idx shifted by one).
            cache: optional :class:`KVCache`, updated in place.

        Returns:
            ``(logits (B, T, V), loss)``; ``loss`` is the mean cross-entropy, or None.
        """
        if idx.dim() != 2 or idx.dtype.is_floating_point or idx.dtype == torch.bool:
            raise ValueError(f"idx must be an integer tensor of shape (B, T), got {idx.dtype} "
                             f"of shape {tuple(idx.shape)}")
        start = len(cache) if cache is not None else 0
        end = start + idx.shape[1]
        if end > self.config.block_size:
            raise ValueError(f"positions up to {end} exceed block_size={self.config.block_size}; "
                             "crop the context to its last block_size tokens (generate() does)")
        positions = torch.arange(start, end, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(positions))  # (B, T, E)
        for layer, block in enumerate(self.blocks):
            x = block(x, cache, layer)
        logits = self.lm_head(self.ln_f(x))  # (B, T, V)
        loss = None
        if targets is not None:
            if targets.shape != idx.shape:
                raise ValueError(f"targets must have the shape of idx (B, T)={tuple(idx.shape)}, "
                                 f"got {tuple(targets.shape)}")
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))  # (B*T, V)
        return logits, loss

    @torch.no_grad()
    def generate(self, idx: Tensor, max_new_tokens: int, *, temperature: float = 1.0,
                 top_k: int | None = None, use_cache: bool = True,
                 generator: torch.Generator | None = None) -> Tensor:
        """Extend ``idx`` by ``max_new_tokens`` sampled tokens (in eval mode, no gradients).

        With ``use_cache`` each step feeds only the newest token and reuses the cached keys
        and values. Once the sequence is longer than ``block_size``, the context window
        slides and every token changes position; learned absolute positions then make the
        cache useless, so each step reruns the cropped window, exactly as without cache.
        Cached and uncached generation pick the same tokens with the same ``generator``.

        Args:
            idx: (B, T) prompt, T >= 1.
            max_new_tokens: number of tokens to add.
            temperature, top_k, generator: see :func:`sample_next`.
            use_cache: use a :class:`KVCache`.

        Returns:
            (B, T + max_new_tokens) token ids, the prompt first.
        """
        if idx.dim() != 2 or idx.shape[1] == 0:
            raise ValueError(f"idx must be a non-empty (B, T) prompt, got shape {tuple(idx.shape)}")
        if max_new_tokens < 0:
            raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
        block = self.config.block_size
        cache = KVCache() if use_cache else None
        with eval_mode(self), _recording_attention(self, False):  # sampling needs no weights: fused kernel
            for _ in range(max_new_tokens):
                if cache is None or len(cache) == 0 or len(cache) >= block:
                    if cache is not None:
                        cache.clear()
                    feed = idx[:, -block:]  # the whole (cropped) context
                else:
                    feed = idx[:, -1:]  # only the newest token; the rest is cached
                logits, _ = self(feed, cache=cache)
                next_token = sample_next(logits[:, -1], temperature, top_k, generator)  # (B,)
                idx = torch.cat([idx, next_token[:, None]], dim=1)  # (B, T+1)
        return idx

    def set_record_attention(self, flag: bool | None = True) -> None:
        """Record the attention weights always (True), never (False) or in evaluation mode
        only (None, the default). :meth:`generate` never records."""
        set_record_attention(self, flag)

    def attention_maps(self) -> list[Tensor]:
        """Per-layer (B, H, T, T) weights of the last pass, for the layers that recorded them."""
        return [b.attn.attention_weights for b in self.layers() if b.attn.attention_weights is not None]

    def layers(self) -> list[Block]:
        """The blocks, typed."""
        return [cast(Block, block) for block in self.blocks]


def sample_next(logits: Tensor, temperature: float = 1.0, top_k: int | None = None,
                generator: torch.Generator | None = None) -> Tensor:
    """Sample one token per row from next-token logits.

    Temperature divides the logits: below 1 it sharpens the distribution, above 1 it
    flattens it, and 0 means greedy (argmax). ``top_k`` keeps only the k largest logits
    (exactly k, ties broken by ``torch.topk``) and renormalizes; ``top_k=1`` is greedy.

    Args:
        logits: (B, V) unnormalized scores.
        temperature: >= 0.
        top_k: None (all tokens) or >= 1; values above V mean all tokens.
        generator: optional ``torch.Generator`` for reproducible samples.

    Returns:
        (B,) long tensor of token ids.
    """
    if logits.dim() != 2:
        raise ValueError(f"logits must have shape (B, V), got {tuple(logits.shape)}; "
                         "take logits[:, -1] of a (B, T, V) output")
    if temperature < 0 or math.isnan(temperature):
        raise ValueError(f"temperature must be >= 0 (0 = greedy), got {temperature}")
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k must be None or >= 1, got {top_k}")
    if temperature == 0 or top_k == 1:
        return logits.argmax(dim=-1)
    logits = logits / temperature
    if top_k is not None and top_k < logits.shape[-1]:
        values, indices = torch.topk(logits, top_k, dim=-1)  # (B, k)
        logits = torch.full_like(logits, float("-inf")).scatter(-1, indices, values)
    probs = torch.softmax(logits, dim=-1)
    return torch.multinomial(probs, num_samples=1, generator=generator)[:, 0]


# --------------------------------------------------------------------------- BERT-style


def mask_tokens(ids: Tensor, mask_id: int, prob: float = 0.15,
                generator: torch.Generator | None = None, *, vocab_size: int,
                special_ids: tuple[int, ...] = (0, 1, 2)) -> tuple[Tensor, Tensor]:
    """BERT's masking for masked language modelling (the 80/10/10 rule).

    Each position that is not a special token is selected with probability ``prob``.
    A selected token is replaced by ``mask_id`` 80 % of the time, by a random ordinary
    token 10 % of the time, and left unchanged 10 % of the time; the model must predict
    the original token at every selected position. (Replacing only with ``<mask>`` would
    teach the model that real tokens never need predicting, and ``<mask>`` never appears
    when the model is used.)

    Args:
        ids: (B, T) token ids.
        mask_id: id of the ``<mask>`` token.
        prob: selection probability.
        generator: optional ``torch.Generator``.
        vocab_size: V; random replacements are drawn from ids in [0, V) other than
            ``special_ids`` and ``mask_id``.
        special_ids: ids never selected (default ``<pad>``, ``<bos>``, ``<eos>``).

    Returns:
        ``(inputs, labels)``, both (B, T): inputs with the replacements; labels equal to
        ``ids`` at selected positions and -100 elsewhere (``F.cross_entropy``'s default
        ``ignore_index``).
    """
    if not 0.0 <= prob <= 1.0:
        raise ValueError(f"prob must be in [0, 1], got {prob}")
    excluded = set(special_ids) | {mask_id}
    candidates = torch.tensor([i for i in range(vocab_size) if i not in excluded], device=ids.device)
    if len(candidates) == 0:
        raise ValueError(f"vocab_size={vocab_size} leaves no ordinary token to draw replacements from")
    special = torch.isin(ids, torch.tensor(list(special_ids), device=ids.device))
    selected = (torch.rand(ids.shape, generator=generator, device=ids.device) < prob) & ~special
    labels = ids.masked_fill(~selected, -100)
    u = torch.rand(ids.shape, generator=generator, device=ids.device)
    random_ids = candidates[torch.randint(len(candidates), ids.shape, generator=generator, device=ids.device)]
    inputs = torch.where(selected & (u < 0.8), torch.full_like(ids, mask_id), ids)
    inputs = torch.where(selected & (u >= 0.8) & (u < 0.9), random_ids, inputs)
    return inputs, labels


@dataclass
class MaskedLMConfig:
    """Hyperparameters of :class:`MaskedLM` (names as in :class:`TransformerConfig`)."""

    vocab_size: int
    max_len: int = 64
    d_model: int = 64
    num_heads: int = 4
    d_ff: int = 256
    num_layers: int = 2
    dropout: float = 0.0

    def encoder_config(self) -> TransformerConfig:
        return TransformerConfig(self.vocab_size, self.vocab_size, d_model=self.d_model,
                                 num_heads=self.num_heads, d_ff=self.d_ff, num_layers=self.num_layers,
                                 dropout=self.dropout, max_len=self.max_len, norm_first=False)


class MaskedLM(nn.Module):
    """A tiny BERT-style encoder: bidirectional self-attention and a masked-LM head.

    Token embedding + learned positions + LayerNorm, then the post-norm encoder blocks of
    :class:`course_lib.transformer.TransformerEncoder` (no causal mask: every position
    sees the whole sequence), then a Linear layer to V logits.

    Shape:
        ids (B, T), valid_lens (B,) or None -> logits (B, T, V)
    """

    def __init__(self, config: MaskedLMConfig) -> None:
        super().__init__()
        self.config = config
        self.embedding = nn.Embedding(config.vocab_size, config.d_model)
        self.positions = LearnedPositionalEmbedding(config.d_model, max_len=config.max_len)
        self.embed_norm = nn.LayerNorm(config.d_model)
        self.dropout = nn.Dropout(config.dropout)
        self.encoder = TransformerEncoder(config.encoder_config())
        self.head = nn.Linear(config.d_model, config.vocab_size)

    def forward(self, ids: Tensor, valid_lens: Tensor | None = None,
                labels: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """Logits for every position, and the loss over positions whose label is not -100.

        Args:
            ids: (B, T) token ids, T <= max_len.
            valid_lens: (B,) real tokens per row; positions beyond are padding and are
                ignored as keys.
            labels: optional (B, T) from :func:`mask_tokens`.
        """
        if ids.dim() != 2 or ids.shape[1] > self.config.max_len:
            raise ValueError(f"ids must have shape (B, T) with T <= max_len={self.config.max_len}, "
                             f"got {tuple(ids.shape)}")
        real = None
        if valid_lens is not None:
            real = valid_lens_to_real_keys(valid_lens.to(ids.device), ids.shape[1])  # (B, T)
        x = self.dropout(self.embed_norm(self.positions(self.embedding(ids))))
        logits = self.head(self.encoder(x, real))  # (B, T, V)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                                   ignore_index=-100)  # (B*T, V)
        return logits, loss
