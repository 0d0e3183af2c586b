"""The Transformer encoder-decoder (Vaswani et al., 2017), built from the course's pieces.

Each sub-layer f (attention or the FFN, FFN(x) = max(0, x W_1 + b_1) W_2 + b_2) is wrapped as
X = LayerNorm(X + f(X)) (post-norm, the paper) or X = X + f(LayerNorm(X)) (pre-norm); the
attention is lesson 5's MultiHead(Q, K, V), causal in the decoder's first sub-layer, with
the encoder output as K and V in its second.

Shape letters: B batch, S source length, L target length, E model size (d_model),
H heads, D = E / H head size, F feed-forward size (d_ff), V target vocabulary size,
t number of target tokens decoded so far (cached decoding).

An encoder block is self-attention, then a position-wise feed-forward network (FFN),
each wrapped in a residual connection and a layer norm. A decoder block has three
sub-layers: *causal* self-attention (position i sees target positions <= i), then
encoder-decoder (cross) attention, where the decoder supplies the queries and the
encoder output supplies the keys and values, then the FFN.

Residual + layer norm comes in two orders, chosen with ``norm_first``:

* post-norm (the paper, ``norm_first=False``): ``X = LayerNorm(X + dropout(sublayer(X)))``;
* pre-norm (GPT-2 and most recent models): ``X = X + dropout(sublayer(LayerNorm(X)))``,
  plus one final LayerNorm after the last block, since nothing else normalizes the
  residual stream. Pre-norm keeps an identity path from the input to the output and is
  usually easier to train deep or with a large learning rate.

LayerNorm normalizes each position's E features on their own. BatchNorm would average
over the batch and over positions, mixing real tokens with padding and depending on the
batch and sequence lengths, which is why sequence models use LayerNorm.

Unlike D2L's decoder, the decoder here applies its causal mask in evaluation too, and
teacher forcing (:meth:`Transformer.forward`) and step-by-step decoding
(:meth:`Transformer.decode_step`, with a key/value cache) give the same logits.

Masks: every module and method here takes ``real_keys`` (bool (B, S), True = a real token,
False = padding, ignored; :mod:`course_lib.masking`), cached decoding included; PyTorch's
layers take its negation, ``key_padding_mask=~real_keys``. :class:`Transformer` takes
D2L-style source valid lengths (B,) and converts them once, with ``valid_lens_to_real_keys``.

Attention weights are recorded in evaluation mode only (training takes PyTorch's fused
kernel); :meth:`Transformer.attention_maps` returns them per layer.

The module reads: config, FFN, AddNorm (the residual connection and layer norm around
every sub-layer, which each block calls with the sub-layer), the blocks and stacks, the
model; then cached decoding (one :class:`course_lib.multihead.KVCache` per state, as in
GPT) and the weight copy from PyTorch's layers, in sections at the end.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib.data import check_config, check_token_ids
from course_lib.masking import REMOVED, reject_old_mask_names, valid_lens_to_real_keys
from course_lib.multihead import HeadsAttention, KVCache, MultiHeadAttention, set_record_attention
from course_lib.positional import PositionalEncoding

__all__ = [
    "TransformerConfig",
    "PositionWiseFFN",
    "AddNorm",
    "TransformerEncoderBlock",
    "TransformerDecoderBlock",
    "TransformerEncoder",
    "TransformerDecoder",
    "TransformerState",
    "Transformer",
]


@dataclass
class TransformerConfig:
    """Hyperparameters of :class:`Transformer`.

    Args:
        src_vocab_size: size of the source vocabulary.
        tgt_vocab_size: V, size of the target vocabulary.
        d_model: E, the size of every token representation.
        num_heads: H; must divide ``d_model``.
        d_ff: F, hidden size of the position-wise FFN (the paper uses 4 * d_model).
        num_layers: number of encoder blocks and of decoder blocks.
        dropout: dropout after the positional encoding, on attention weights, inside the
            FFN and on every sub-layer output before the residual addition.
        max_len: longest source or target sequence (size of the positional table).
        norm_first: pre-norm if True, post-norm (the paper) if False.
        tie_embeddings: share the target embedding matrix with the output layer.
        layer_norm_eps: epsilon of every LayerNorm.
    """

    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int = 64
    num_heads: int = 4
    d_ff: int = 256
    num_layers: int = 2
    dropout: float = 0.1
    max_len: int = 256
    norm_first: bool = False
    tie_embeddings: bool = False
    layer_norm_eps: float = 1e-5

    def __post_init__(self) -> None:
        check_config(self, ("src_vocab_size", "tgt_vocab_size", "d_model", "num_heads", "d_ff", "num_layers",
                            "max_len"), "d_model", "num_heads")


class PositionWiseFFN(nn.Module):
    """FFN(x) = max(0, x W1 + b1) W2 + b2, the same two-layer MLP at every position.

    Args:
        d_model: E, input and output size.
        d_ff: F, hidden size.
        dropout: dropout on the hidden activations (as in ``nn.TransformerEncoderLayer``).
        bias: whether both layers have biases.

    Shape:
        X (B, T, E) -> (B, T, E)
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, bias: bool = True) -> None:
        super().__init__()
        self.dense1 = nn.Linear(d_model, d_ff, bias=bias)
        self.dropout = nn.Dropout(dropout)
        self.dense2 = nn.Linear(d_ff, d_model, bias=bias)

    def forward(self, X: Tensor) -> Tensor:
        return self.dense2(self.dropout(F.relu(self.dense1(X))))


class AddNorm(nn.Module):
    """The residual connection and layer norm around one sub-layer ("add & norm").

    * post-norm (the paper, ``norm_first=False``): ``LayerNorm(X + dropout(Y))`` with
      ``Y = sublayer(X)``;
    * pre-norm (``norm_first=True``): ``X + dropout(sublayer(LayerNorm(X)))``.

    ``forward(X, Y)`` takes the sub-layer's output ``Y`` (post-norm: the lesson's
    AddNorm(X, Y)) or the sub-layer itself, a callable that it applies in its norm order.
    The blocks pass the sub-layer, so every block of the course runs through this
    module's ``forward``. The layer norm is applied once per sub-layer (not once per head).

    Args:
        d_model: E.
        dropout: dropout on the sub-layer's output before the addition.
        eps: LayerNorm epsilon.
        norm_first: pre-norm if True, post-norm if False.

    Shape:
        X (B, T, E) and Y (B, T, E), or a sub-layer mapping (B, T, E) to (B, T, E) -> (B, T, E)
    """

    def __init__(self, d_model: int, dropout: float = 0.0, eps: float = 1e-5, norm_first: bool = False) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.dropout = nn.Dropout(dropout)
        self.norm = nn.LayerNorm(d_model, eps=eps)

    def forward(self, X: Tensor, Y: Tensor | Callable[[Tensor], Tensor]) -> Tensor:
        if not isinstance(Y, Tensor):  # the sub-layer: apply it in this module's norm order
            Y = Y(self.norm(X)) if self.norm_first else Y(X)
        elif self.norm_first:
            raise ValueError("a pre-norm AddNorm normalises the sub-layer's input, so it needs the "
                             "sub-layer (a callable), not its output")
        if X.shape != Y.shape:
            raise ValueError(f"the residual X and sub-layer output Y must have the same shape, "
                             f"got {tuple(X.shape)} and {tuple(Y.shape)}")
        return X + self.dropout(Y) if self.norm_first else self.norm(X + self.dropout(Y))


class TransformerEncoderBlock(nn.Module):
    """Self-attention and FFN, each with residual + layer norm.

    Args:
        d_model: E.
        num_heads: H.
        d_ff: F.
        dropout: see :class:`TransformerConfig`.
        norm_first: pre-norm if True, post-norm if False.
        layer_norm_eps: LayerNorm epsilon.
        bias: biases in the attention projections and the FFN.

    Shape:
        X (B, S, E), real_keys (B, S) bool (True = real token, False = padding) -> (B, S, E).
        After a forward pass, ``attention.attention_weights`` holds (B, H, S, S).
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0,
                 norm_first: bool = False, layer_norm_eps: float = 1e-5, bias: bool = True) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.attention = MultiHeadAttention(d_model, num_heads, dropout=dropout, bias=bias)
        self.addnorm1 = AddNorm(d_model, dropout, layer_norm_eps, norm_first)
        self.ffn = PositionWiseFFN(d_model, d_ff, dropout, bias=bias)
        self.addnorm2 = AddNorm(d_model, dropout, layer_norm_eps, norm_first)

    def forward(self, X: Tensor, real_keys: Tensor | None = None, *, key_padding_mask: object = REMOVED) -> Tensor:
        reject_old_mask_names("TransformerEncoderBlock.forward", key_padding_mask=key_padding_mask)

        def self_attend(h: Tensor) -> Tensor:
            return self.attention(h, h, h, real_keys=real_keys, average_attn_weights=False,
                                  need_weights=self.attention._records())[0]
        X = self.addnorm1(X, self_attend)
        return self.addnorm2(X, self.ffn)

    @classmethod
    def from_torch(cls, layer: nn.TransformerEncoderLayer) -> "TransformerEncoderBlock":
        """An equivalent block with weights copied from ``nn.TransformerEncoderLayer``.

        Supports ``norm_first`` both ways and the ReLU activation. The block is always
        batch-first; with a ``batch_first=False`` layer, transpose the inputs yourself.
        """
        return _block_from_torch(cls, layer, {"attention": layer.self_attn})


class TransformerDecoderBlock(nn.Module):
    """Causal self-attention, cross-attention to the encoder output, then FFN.

    In cross-attention the queries come from the decoder (the output of the first
    sub-layer) and the keys and values from the encoder output ``memory``.

    Args:
        d_model, num_heads, d_ff, dropout, norm_first, layer_norm_eps, bias: as in
            :class:`TransformerEncoderBlock`.

    Shape:
        X (B, L, E), memory (B, S, E), memory_real_keys (B, S) bool (True = real) -> (B, L, E).
        After a forward pass, ``self_attention.attention_weights`` holds (B, H, L, L) and
        ``cross_attention.attention_weights`` holds (B, H, L, S).
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0,
                 norm_first: bool = False, layer_norm_eps: float = 1e-5, bias: bool = True) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.num_heads = num_heads
        self.self_attention = MultiHeadAttention(d_model, num_heads, dropout=dropout, bias=bias)
        self.addnorm1 = AddNorm(d_model, dropout, layer_norm_eps, norm_first)
        self.cross_attention = MultiHeadAttention(d_model, num_heads, dropout=dropout, bias=bias)
        self.addnorm2 = AddNorm(d_model, dropout, layer_norm_eps, norm_first)
        self.ffn = PositionWiseFFN(d_model, d_ff, dropout, bias=bias)
        self.addnorm3 = AddNorm(d_model, dropout, layer_norm_eps, norm_first)

    def forward(self, X: Tensor, memory: Tensor, memory_real_keys: Tensor | None = None, *,
                memory_key_padding_mask: object = REMOVED) -> Tensor:
        """Teacher forcing: all L target positions at once, each seeing only its past."""
        reject_old_mask_names("TransformerDecoderBlock.forward", memory_key_padding_mask=memory_key_padding_mask)

        def self_attend(h: Tensor) -> Tensor:
            return self.self_attention(h, h, h, is_causal=True, average_attn_weights=False,
                                       need_weights=self.self_attention._records())[0]

        def cross_attend(h: Tensor) -> Tensor:
            return self.cross_attention(h, memory, memory, real_keys=memory_real_keys,
                                        average_attn_weights=False,
                                        need_weights=self.cross_attention._records())[0]
        X = self.addnorm1(X, self_attend)
        X = self.addnorm2(X, cross_attend)
        return self.addnorm3(X, self.ffn)

    @classmethod
    def from_torch(cls, layer: nn.TransformerDecoderLayer) -> "TransformerDecoderBlock":
        """An equivalent block with weights copied from ``nn.TransformerDecoderLayer``.

        Supports ``norm_first`` both ways and the ReLU activation. Our block always
        applies the causal mask; give the PyTorch layer ``tgt_mask`` (and
        ``tgt_is_causal=True``) to compare them.
        """
        return _block_from_torch(cls, layer, {"self_attention": layer.self_attn,
                                              "cross_attention": layer.multihead_attn})

    # -- cached decoding (see the section at the end of the module)

    def step(self, X: Tensor, cache: KVCache, cross: KVCache, layer: int = 0, *,
             memory_real_keys: Tensor | None = None) -> Tensor:
        """Process new target positions given the cached keys/values of the earlier ones.

        Args:
            X: (B, L_new, E) inputs of the new positions (usually L_new = 1).
            cache: self-attention keys and values of the t earlier positions; this call
                appends those of the new ones to ``cache``'s entry ``layer`` (in place).
            cross: the cross-attention keys and values of the encoder output, projected once
                (:meth:`Transformer.encode` fills entry ``layer``).
            layer: which entry of the caches is this block's.
            memory_real_keys: (B, S) bool, True = real source token, as in :meth:`forward`.

        Returns:
            The output (B, L_new, E), equal to the last L_new rows of :meth:`forward`.
        """
        real = None if memory_real_keys is None else memory_real_keys[:, None, None, :]  # (B, 1, 1, S)

        def self_attend(h: Tensor) -> Tensor:
            sa = self.self_attention
            k, v = cache.update(layer, *sa.project_key_value(h, h))  # (B, H, t+L_new, D) each
            # is_causal aligns the new queries with the *last* keys: query i sees t + i and before.
            return sa.attend(sa.project_query(h), k, v, is_causal=True, need_weights=sa._records())[0]

        def cross_attend(h: Tensor) -> Tensor:
            ca = self.cross_attention
            return ca.attend(ca.project_query(h), cross.keys[layer], cross.values[layer], real,
                             need_weights=ca._records())[0]  # (B, L_new, E)
        X = self.addnorm1(X, self_attend)
        X = self.addnorm2(X, cross_attend)
        return self.addnorm3(X, self.ffn)


def _blocks_and_norm(config: TransformerConfig, block: type) -> tuple[nn.ModuleList, nn.Module]:
    """``num_layers`` blocks, and the final LayerNorm of a pre-norm stack (nothing else
    normalises its residual stream; post-norm blocks end with their own)."""
    blocks = nn.ModuleList(block(config.d_model, config.num_heads, config.d_ff, dropout=config.dropout,
                                 norm_first=config.norm_first, layer_norm_eps=config.layer_norm_eps)
                           for _ in range(config.num_layers))
    norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps) if config.norm_first else nn.Identity()
    return blocks, norm


class TransformerEncoder(nn.Module):
    """A stack of encoder blocks (plus a final LayerNorm when pre-norm).

    It takes embedded inputs, like ``nn.TransformerEncoder``; :class:`Transformer` adds
    the token embedding and positional encoding.

    Shape:
        X (B, S, E), real_keys (B, S) bool (True = real token) -> (B, S, E)
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.blocks, self.norm = _blocks_and_norm(config, TransformerEncoderBlock)

    def forward(self, X: Tensor, real_keys: Tensor | None = None, *, key_padding_mask: object = REMOVED) -> Tensor:
        reject_old_mask_names("TransformerEncoder.forward", key_padding_mask=key_padding_mask)
        for block in self.blocks:
            X = block(X, real_keys)
        return self.norm(X)

    def layers(self) -> list[TransformerEncoderBlock]:
        """The blocks, typed."""
        return [cast(TransformerEncoderBlock, block) for block in self.blocks]

    def attention_maps(self) -> list[Tensor]:
        """Self-attention weights (B, H, S, S) of the last pass, per layer that recorded them."""
        return _recorded(block.attention for block in self.layers())


class TransformerDecoder(nn.Module):
    """A stack of decoder blocks (plus a final LayerNorm when pre-norm).

    Shape:
        X (B, L, E), memory (B, S, E), memory_real_keys (B, S) -> (B, L, E)
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.blocks, self.norm = _blocks_and_norm(config, TransformerDecoderBlock)

    def forward(self, X: Tensor, memory: Tensor, memory_real_keys: Tensor | None = None, *,
                memory_key_padding_mask: object = REMOVED) -> Tensor:
        reject_old_mask_names("TransformerDecoder.forward", memory_key_padding_mask=memory_key_padding_mask)
        for block in self.blocks:
            X = block(X, memory, memory_real_keys)
        return self.norm(X)

    def layers(self) -> list[TransformerDecoderBlock]:
        """The blocks, typed."""
        return [cast(TransformerDecoderBlock, block) for block in self.blocks]

    def attention_maps(self) -> dict[str, list[Tensor]]:
        """``{"decoder_self": [(B, H, L, L)], "cross": [(B, H, L, S)]}``: the weights of the
        last pass, per layer that recorded them."""
        return {"decoder_self": _recorded(block.self_attention for block in self.layers()),
                "cross": _recorded(block.cross_attention for block in self.layers())}


def _recorded(modules: Iterable[HeadsAttention]) -> list[Tensor]:
    return [m.attention_weights for m in modules if m.attention_weights is not None]


class Transformer(nn.Module):
    """Encoder-decoder Transformer for sequence-to-sequence tasks such as translation.

    Token embeddings are multiplied by sqrt(E) and added to sinusoidal positional
    encodings. The embeddings are initialised with standard deviation 1/sqrt(E), so after
    the scaling their entries have unit variance, the same scale as the encoding (with
    PyTorch's default N(0, 1) embeddings the scaled tokens would drown the positions).
    A final Linear maps each decoder output to V logits; a softmax over them gives the
    distribution of the next token (the loss applies it inside the cross-entropy).

    Implements the seq2seq interface used by :mod:`course_lib.decoding`: ``forward``
    (teacher forcing), ``encode``, ``decode_step`` and ``reorder_state``. Token ids:
    ``<pad>`` = 0, ``<bos>`` = 1, ``<eos>`` = 2.

    Args:
        config: a :class:`TransformerConfig`.

    Shape:
        src (B, S), src_valid_lens (B,), tgt_in (B, L) -> logits (B, L, V).
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = config
        E = config.d_model
        self.src_embedding = nn.Embedding(config.src_vocab_size, E)
        self.tgt_embedding = nn.Embedding(config.tgt_vocab_size, E)
        for emb in (self.src_embedding, self.tgt_embedding):
            nn.init.normal_(emb.weight, std=E ** -0.5)
        self.positional = PositionalEncoding(E, config.dropout, config.max_len)
        self.encoder = TransformerEncoder(config)
        self.decoder = TransformerDecoder(config)
        self.output = nn.Linear(E, config.tgt_vocab_size)
        if config.tie_embeddings:
            self.output.weight = self.tgt_embedding.weight
        self.last_attention_weights: Tensor | None = None

    # ------------------------------------------------------------------ checks
    def _check_token_ids(self, tokens: Tensor, name: str, letter: str, offset: int = 0) -> None:
        check_token_ids(tokens, name, f"(B, {letter})")
        if offset + tokens.shape[1] > self.config.max_len:
            raise ValueError(f"{name} reaches position {offset + tokens.shape[1]} but max_len="
                             f"{self.config.max_len}; truncate it or build the model with a larger "
                             f"TransformerConfig.max_len")

    def _embed(self, embedding: nn.Embedding, tokens: Tensor, offset: int = 0) -> Tensor:
        return self.positional(embedding(tokens) * math.sqrt(self.config.d_model), offset=offset)

    # ------------------------------------------------------------------ teacher forcing
    def encode_memory(self, src: Tensor, src_valid_lens: Tensor | None) -> tuple[Tensor, Tensor]:
        """Encoder output (B, S, E) and the source ``real_keys`` (B, S) (True = real token)."""
        self._check_token_ids(src, "src", "S")
        batch, src_len = src.shape
        if src_valid_lens is None:
            src_valid_lens = torch.full((batch,), src_len, dtype=torch.long, device=src.device)
        if src_valid_lens.shape != (batch,):
            raise ValueError(f"src_valid_lens must have shape (B,)=({batch},), got {tuple(src_valid_lens.shape)}")
        real = valid_lens_to_real_keys(src_valid_lens.to(src.device), src_len)  # (B, S)
        memory = self.encoder(self._embed(self.src_embedding, src), real)
        return memory, real

    def forward(self, src: Tensor, src_valid_lens: Tensor | None, tgt_in: Tensor) -> Tensor:
        """Teacher forcing: logits for every target position in one parallel pass.

        Args:
            src: (B, S) source ids.
            src_valid_lens: (B,) real tokens per source row (None: no padding).
            tgt_in: (B, L) target input, ``<bos>`` followed by the target shifted right.

        Returns:
            Logits (B, L, V); position i depends on ``tgt_in[:, :i+1]`` only.
        """
        memory, real = self.encode_memory(src, src_valid_lens)
        self._check_token_ids(tgt_in, "tgt_in", "L")
        if tgt_in.shape[0] != src.shape[0]:
            raise ValueError(f"src (B, S) and tgt_in (B, L) must share B, got {tuple(src.shape)} "
                             f"and {tuple(tgt_in.shape)}")
        hidden = self.decoder(self._embed(self.tgt_embedding, tgt_in), memory, real)
        return self.output(hidden)

    # ------------------------------------------------------------------ step by step
    def encode(self, src: Tensor, src_valid_lens: Tensor | None) -> TransformerState:
        """Run the encoder once and prepare the decoding state (no target tokens yet)."""
        memory, real = self.encode_memory(src, src_valid_lens)
        cross = KVCache()
        for layer, block in enumerate(self.decoder.layers()):
            cross.update(layer, *block.cross_attention.project_key_value(memory, memory))  # (B, H, S, D)
        return TransformerState(memory, real, KVCache(), cross)

    def decode_step(self, prev_tokens: Tensor, state: TransformerState) -> tuple[Tensor, TransformerState]:
        """Feed one token per row (``<bos>`` first) and get the next-token logits.

        Only the new position is computed: each layer appends its projected key and value
        to the cache and attends with the single new query. The result equals the
        corresponding row of :meth:`forward`'s logits.

        Args:
            prev_tokens: (B,) the previous token of every row.
            state: from :meth:`encode` or the previous step (left unchanged).

        Returns:
            ``(logits (B, V), new_state)``. ``last_attention_weights`` is then this step's
            cross-attention weights, one tensor (B, layers, H, S) (None if not recorded).
        """
        if prev_tokens.dim() != 1 or prev_tokens.shape[0] != state.memory.shape[0]:
            raise ValueError(f"prev_tokens must have shape (B,)=({state.memory.shape[0]},), "
                             f"got {tuple(prev_tokens.shape)}")
        tokens = prev_tokens[:, None]  # (B, 1)
        steps = len(state.cache)
        self._check_token_ids(tokens, "the decoded target", "1", offset=steps)
        X = self._embed(self.tgt_embedding, tokens, offset=steps)  # (B, 1, E)
        cache = KVCache(state.cache.keys, state.cache.values)  # a new cache: the old state stays valid
        for layer, block in enumerate(self.decoder.layers()):
            X = block.step(X, cache, state.cross, layer, memory_real_keys=state.src_real_keys)
        logits = self.output(self.decoder.norm(X))[:, 0]  # (B, V)
        cross_maps = self.decoder.attention_maps()["cross"]  # per layer (B, H, 1, S), if recorded
        self.last_attention_weights = torch.stack(cross_maps, dim=1)[:, :, :, 0] if cross_maps else None  # (B, layers, H, S)
        return logits, TransformerState(state.memory, state.src_real_keys, cache, state.cross)

    def reorder_state(self, state: TransformerState, index: Tensor) -> TransformerState:
        """Row ``i`` of the new state is row ``index[i]`` of ``state`` (beam search)."""
        return state.index_select(index.to(state.memory.device))

    # ------------------------------------------------------------------ attention maps
    def attention_maps(self) -> dict[str, list[Tensor]]:
        """Attention weights of the last pass, per layer, each (B, H, queries, keys).

        Recorded in evaluation mode (training takes the fused kernel, which does not form
        them); :meth:`set_record_attention` changes that.

        Returns:
            ``{"encoder_self": [(B, H, S, S)], "decoder_self": [(B, H, L, L)],
            "cross": [(B, H, L, S)]}``, one entry per layer (after :meth:`decode_step`
            the decoder maps cover the last step only: L = 1).
        """
        return {"encoder_self": self.encoder.attention_maps(), **self.decoder.attention_maps()}

    def set_record_attention(self, flag: bool | None = True) -> None:
        """Record the attention weights always (True), never (False) or in evaluation mode
        only (None, the default)."""
        set_record_attention(self, flag)


# --------------------------------------------------------------------------- cached decoding


@dataclass
class TransformerState:
    """What :meth:`Transformer.decode_step` carries from one step to the next.

    Every tensor has the batch on its first axis (so :meth:`index_select` can reorder
    beams). Per decoder layer, in two :class:`course_lib.multihead.KVCache`: the
    self-attention keys/values of the t target tokens seen so far (``cache``; t =
    ``len(cache)``) and the cross-attention keys/values of the encoder output, projected
    once (``cross``).

    Shape:
        memory (B, S, E); src_real_keys (B, S) (True = real source token); ``cache.keys[layer]`` (B, H, t, D);
        ``cross.keys[layer]`` (B, H, S, D).
    """

    memory: Tensor
    src_real_keys: Tensor
    cache: KVCache
    cross: KVCache

    def index_select(self, index: Tensor) -> "TransformerState":
        """Row ``i`` of the result is row ``index[i]`` of this state (beam search)."""
        return TransformerState(self.memory.index_select(0, index),
                                self.src_real_keys.index_select(0, index),
                                self.cache.index_select(index), self.cross.index_select(index))


# --------------------------------------------------------------------------- interop with PyTorch


def _block_from_torch(cls: type, layer: nn.Module, attentions: dict[str, nn.Module]) -> Any:
    """A block of class ``cls`` with the sizes and weights of a PyTorch layer, on its device
    and dtype; ``attentions`` maps our attention attribute to the layer's module."""
    activation = getattr(layer, "activation", None)
    if activation is not F.relu and not isinstance(activation, nn.ReLU):
        raise ValueError(f"only activation='relu' is supported (the paper's FFN), got {activation}")
    linear1 = cast(nn.Linear, layer.linear1)
    block = cls(linear1.in_features, cast(nn.MultiheadAttention, layer.self_attn).num_heads,
                linear1.out_features, dropout=cast(nn.Dropout, layer.dropout).p,
                norm_first=layer.norm_first, layer_norm_eps=cast(nn.LayerNorm, layer.norm1).eps,
                bias=linear1.bias is not None)
    # Convert before copying, so that float64 weights are not rounded through float32.
    block = block.to(device=linear1.weight.device, dtype=linear1.weight.dtype)
    for name, module in attentions.items():
        attention = MultiHeadAttention.from_torch(cast(nn.MultiheadAttention, module))
        attention.batch_first = True
        setattr(block, name, attention)
    pairs: list[tuple[nn.Module, nn.Module]] = [(block.ffn.dense1, cast(nn.Module, layer.linear1)),
                                                (block.ffn.dense2, cast(nn.Module, layer.linear2))]
    for k in range(1, len(attentions) + 2):  # addnorm1 <- norm1, addnorm2 <- norm2, ...
        pairs.append((getattr(block, f"addnorm{k}").norm, getattr(layer, f"norm{k}")))
    with torch.no_grad():
        for ours, theirs in pairs:
            cast(Tensor, ours.weight).copy_(cast(Tensor, theirs.weight))
            if theirs.bias is not None:
                cast(Tensor, ours.bias).copy_(cast(Tensor, theirs.bias))
    return block.train(layer.training)
