"""GRU encoder-decoder models for translation, without and with Bahdanau attention.

Decoder step t: s_t = GRU([embed(y_{t-1}); c_t], s_{t-1}), p(y_t | y_<t, x) = softmax(W s_t), with
the context c_t = h_S (the encoder's last state) without attention, or with Bahdanau's
c_t = sum_j alpha_tj h_j, alpha_tj = softmax_j(w_v^T tanh(W_q s_{t-1} + W_k h_j)).

Shape letters: B batch, S source length, L target length, V target vocabulary size,
E embedding size, h hidden size (``num_hiddens``), N number of GRU layers.

Two models, one interface (the one :mod:`course_lib.decoding` relies on):

* :class:`Seq2Seq` compresses the whole source into the encoder's final top-layer state,
  a fixed-size *context* vector that is fed to the decoder at every step (D2L's design).
  However long the sentence, everything the decoder learns about it has to fit in h
  numbers: the bottleneck that attention removes.
* :class:`AttentionSeq2Seq` keeps all S encoder states. At each step its decoder uses its
  previous top-layer hidden state as the query of an additive (Bahdanau) attention over
  them, and feeds the resulting context together with the embedded input token. With
  ``bidirectional=True`` its encoder is Bahdanau et al.'s: two GRUs of h/2 units each, one
  reading the source left to right and one right to left, whose states are concatenated, so
  that the encoder state at position j also knows the words after j.
* :class:`LuongSeq2Seq` is Luong et al.'s (2015) attention decoder: the GRU steps first, its
  *new* state h_t is the query of a multiplicative ("general") attention, and the context and
  h_t are combined into an *attentional hidden state* h~_t = tanh(W_c [c_t; h_t]) from which
  the next word is predicted. With input feeding (the default), h~_{t-1} is concatenated to
  the next step's input, so the decoder knows where it looked before.

All three implement:

* ``forward(src, src_valid_lens, tgt_in) -> logits (B, L, V)`` (teacher forcing);
* ``encode(src, src_valid_lens) -> state``;
* ``decode_step(prev_tokens (B,), state) -> (logits (B, V), state)``, starting from
  ``<bos>``; feeding ``tgt_in`` one column at a time gives the logits of ``forward``;
* ``reorder_state(state, index (B2,)) -> state``: row i of the result is row ``index[i]``
  (beam search uses it to keep and repeat hypotheses).

Source padding. Sequences are right-padded and ``src_valid_lens[b]`` counts the real
tokens of row b (``<eos>`` included). The encoder packs the batch
(``nn.utils.rnn.pack_padded_sequence``), so pad tokens never enter the GRU: the outputs at
real positions and the final state are those of the unpadded sentence, and the outputs at
padded positions are zero. (D2L's encoder runs the GRU over the pads too and takes the
state after the last *padded* position as the context.) The attention decoder masks the
padded positions with ``src_valid_lens``; they get exactly zero weight.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import torch
from torch import Tensor, nn

from course_lib.data import check_config, check_token_ids
from course_lib.masking import masked_softmax
from course_lib.scoring import AdditiveAttention, MultiplicativeAttention

__all__ = [
    "Seq2SeqConfig",
    "GRUEncoder",
    "GRUDecoder",
    "BahdanauDecoder",
    "LuongDecoder",
    "Seq2SeqState",
    "AttentionState",
    "LuongState",
    "Seq2Seq",
    "AttentionSeq2Seq",
    "LuongSeq2Seq",
    "init_seq2seq_weights",
]


@dataclass
class Seq2SeqConfig:
    """Hyperparameters of the GRU encoder-decoders.

    Attributes:
        src_vocab_size: size of the source vocabulary.
        tgt_vocab_size: V, size of the target vocabulary.
        embed_size: E, size of the token embeddings (encoder and decoder).
        num_hiddens: h, size of the GRU states (and of the attention MLP).
        num_layers: N, stacked GRU layers in the encoder and in the decoder.
        dropout: dropout between GRU layers and on the attention weights.
    """

    src_vocab_size: int
    tgt_vocab_size: int
    embed_size: int = 32
    num_hiddens: int = 64
    num_layers: int = 2
    dropout: float = 0.1

    def __post_init__(self) -> None:
        check_config(self, ("src_vocab_size", "tgt_vocab_size", "embed_size", "num_hiddens", "num_layers"))


# --------------------------------------------------------------------------- checks


def _check_src_valid_lens(valid_lens: Tensor, batch: int, length: int) -> None:
    if not isinstance(valid_lens, Tensor) or valid_lens.shape != (batch,):
        shape = tuple(valid_lens.shape) if isinstance(valid_lens, Tensor) else type(valid_lens).__name__
        raise ValueError(f"src_valid_lens must have shape (B,) = ({batch},), got {shape}")
    if valid_lens.dtype.is_floating_point or valid_lens.dtype == torch.bool:
        raise ValueError(f"src_valid_lens must hold integers, got dtype {valid_lens.dtype}")
    if batch and (int(valid_lens.min()) < 1 or int(valid_lens.max()) > length):
        raise ValueError(
            f"src_valid_lens must lie in [1, S={length}] (every source has at least its <eos>), "
            f"got values from {int(valid_lens.min())} to {int(valid_lens.max())}"
        )


def init_seq2seq_weights(module: nn.Module) -> None:
    """Xavier-uniform initialization of Linear and GRU weight matrices (D2L's choice).

    Use as ``model.apply(init_seq2seq_weights)``; biases and embeddings keep PyTorch's
    defaults.
    """
    if isinstance(module, nn.Linear):
        nn.init.xavier_uniform_(module.weight)
    elif isinstance(module, nn.GRU):
        for name, param in module.named_parameters():
            if name.startswith("weight"):
                nn.init.xavier_uniform_(param)


# --------------------------------------------------------------------------- encoder


class GRUEncoder(nn.Module):
    """Embedding + multi-layer GRU over the source, ignoring padding.

    Args:
        vocab_size: source vocabulary size.
        embed_size: E.
        num_hiddens: h.
        num_layers: N.
        dropout: dropout between GRU layers.
        bidirectional: if True, each layer is two GRUs of h/2 units (h must be even), one
            reading left to right and one right to left (from the last *real* token: the
            batch is packed), as in Bahdanau et al. (2015); their states are concatenated,
            forward half first, so outputs and state keep the size h. The backward GRU's
            final state is its state after reading the *first* token.

    Shape:
        src (B, S) long, src_valid_lens (B,) with values in [1, S] ->
        ``(outputs, state)``: outputs (B, S, h) are the top layer's states at every
        position (zero beyond the valid length); state (N, B, h) holds each layer's state
        after the last real token (bidirectional: forward final state, then backward final
        state).
    """

    def __init__(self, vocab_size: int, embed_size: int, num_hiddens: int, num_layers: int,
                 dropout: float = 0.0, bidirectional: bool = False) -> None:
        super().__init__()
        if bidirectional and num_hiddens % 2:
            raise ValueError(f"a bidirectional encoder splits num_hiddens between its two directions: "
                             f"it must be even, got {num_hiddens}")
        self.bidirectional = bidirectional
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size, num_hiddens // 2 if bidirectional else num_hiddens, num_layers,
                          batch_first=True, dropout=dropout if num_layers > 1 else 0.0,
                          bidirectional=bidirectional)

    def forward(self, src: Tensor, src_valid_lens: Tensor) -> tuple[Tensor, Tensor]:
        check_token_ids(src, "src", "(B, S)")
        _check_src_valid_lens(src_valid_lens, src.shape[0], src.shape[1])
        embedded = self.embedding(src)  # (B, S, E)
        # Packing runs each row only over its real tokens: the pads never touch the state.
        packed = nn.utils.rnn.pack_padded_sequence(
            embedded, src_valid_lens.cpu(), batch_first=True, enforce_sorted=False)
        packed_out, state = self.rnn(packed)  # state (N, B, h), or (2N, B, h/2); rows in the original order
        outputs, _ = nn.utils.rnn.pad_packed_sequence(
            packed_out, batch_first=True, total_length=src.shape[1])  # (B, S, h): both halves if bidirectional
        if self.bidirectional:
            layers, batch, half = state.shape[0] // 2, state.shape[1], state.shape[2]
            state = state.view(layers, 2, batch, half)  # (N, 2, B, h/2): PyTorch orders layer, then direction
            state = torch.cat([state[:, 0], state[:, 1]], dim=-1)  # (N, B, h)
        return outputs, state


# --------------------------------------------------------------------------- decoders


@dataclass
class Seq2SeqState:
    """Decoder state of :class:`Seq2Seq`.

    Attributes:
        context: the encoder's final top-layer state, fed at every step. Shape (B, h).
        hidden: the decoder GRU's state. Shape (N, B, h).
    """

    context: Tensor
    hidden: Tensor


@dataclass
class AttentionState:
    """Decoder state of :class:`AttentionSeq2Seq`.

    Attributes:
        enc_outputs: all encoder top-layer states, the keys and values. Shape (B, S, h).
        src_valid_lens: real source tokens per row. Shape (B,).
        hidden: the decoder GRU's state. Shape (N, B, h).
        projected_keys: ``W_k h_j`` for every encoder state, computed once per sentence
            because it does not depend on the step. Shape (B, S, h).
    """

    enc_outputs: Tensor
    src_valid_lens: Tensor
    hidden: Tensor
    projected_keys: Tensor


class GRUDecoder(nn.Module):
    """GRU decoder that reads the fixed context at every step (D2L's seq2seq decoder).

    The input of step t is ``[embedding(y_{t-1}); c]`` where c is the encoder's final
    top-layer state; the initial hidden state is the encoder's final state (all layers).

    Args:
        vocab_size: V.
        embed_size: E.
        num_hiddens: h (must equal the encoder's).
        num_layers: N (must equal the encoder's).
        dropout: dropout between GRU layers.

    Shape:
        tokens (B, L) long, state -> ``(logits (B, L, V), state)``.
    """

    def __init__(self, vocab_size: int, embed_size: int, num_hiddens: int, num_layers: int,
                 dropout: float = 0.0) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size + num_hiddens, num_hiddens, num_layers, batch_first=True,
                          dropout=dropout if num_layers > 1 else 0.0)
        self.dense = nn.Linear(num_hiddens, vocab_size)

    def init_state(self, enc_outputs: Tensor, enc_state: Tensor) -> Seq2SeqState:
        """The state before the first step, from the encoder's ``(outputs, state)``."""
        return Seq2SeqState(context=enc_state[-1], hidden=enc_state)

    def forward(self, tokens: Tensor, state: Seq2SeqState) -> tuple[Tensor, Seq2SeqState]:
        check_token_ids(tokens, "tgt_in", "(B, L)")
        embedded = self.embedding(tokens)  # (B, L, E)
        context = state.context.unsqueeze(1).expand(-1, tokens.shape[1], -1)  # (B, L, h)
        outputs, hidden = self.rnn(torch.cat([embedded, context], dim=-1), state.hidden)  # (B, L, h)
        return self.dense(outputs), Seq2SeqState(state.context, hidden)


class BahdanauDecoder(nn.Module):
    """GRU decoder with additive attention over all encoder states (Bahdanau et al. 2015).

    At step t the query is the decoder's previous top-layer hidden state s_{t-1}; the
    context is ``c_t = sum_j alpha(s_{t-1}, h_j) h_j`` over the real source positions j,
    and the GRU input is ``[embedding(y_{t-1}); c_t]``. The steps run one after another,
    even with teacher forcing, because each query depends on the previous step.

    Args:
        vocab_size: V.
        embed_size: E.
        num_hiddens: h (must equal the encoder's); also the attention MLP's size.
        num_layers: N (must equal the encoder's).
        dropout: dropout between GRU layers and on the attention weights.

    Shape:
        tokens (B, L) long, state -> ``(logits (B, L, V), state)``. After a call,
        ``attention_weights`` holds the (B, L, S) weights of its L steps (detached).
    """

    def __init__(self, vocab_size: int, embed_size: int, num_hiddens: int, num_layers: int,
                 dropout: float = 0.0) -> None:
        super().__init__()
        self.attention = AdditiveAttention(num_hiddens, num_hiddens, num_hiddens, dropout)
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size + num_hiddens, num_hiddens, num_layers, batch_first=True,
                          dropout=dropout if num_layers > 1 else 0.0)
        self.dense = nn.Linear(num_hiddens, vocab_size)
        self.attention_weights: Tensor | None = None

    def init_state(self, enc_outputs: Tensor, enc_state: Tensor, src_valid_lens: Tensor) -> AttentionState:
        """The state before the first step, from the encoder's outputs and final state."""
        return AttentionState(enc_outputs=enc_outputs, src_valid_lens=src_valid_lens, hidden=enc_state,
                              projected_keys=self.attention.W_k(enc_outputs))

    def attend(self, query: Tensor, state: AttentionState) -> Tensor:
        """Additive attention of one query per row over the encoder states.

        Computes exactly ``self.attention(query, enc_outputs, enc_outputs, src_valid_lens)``
        (and sets ``self.attention.attention_weights`` the same way), but reuses the keys
        projected once in :meth:`init_state` instead of projecting all S keys again at
        every step, which would cost more than the GRU step itself.

        Args:
            query: the decoder's previous top-layer state, (B, 1, h).
            state: the current decoder state.

        Returns:
            The context, (B, 1, h).
        """
        return self.attention.attend_projected(query, state.projected_keys, state.enc_outputs,
                                               state.src_valid_lens)  # (B, 1, h)

    def forward(self, tokens: Tensor, state: AttentionState) -> tuple[Tensor, AttentionState]:
        check_token_ids(tokens, "tgt_in", "(B, L)")
        embedded = self.embedding(tokens)  # (B, L, E)
        hidden = state.hidden
        outputs, weights = [], []
        for t in range(tokens.shape[1]):
            query = hidden[-1].unsqueeze(1)  # (B, 1, h)
            context = self.attend(query, state)  # (B, 1, h)
            step_weights = self.attention.attention_weights
            assert step_weights is not None  # set by attend()
            weights.append(step_weights)  # (B, 1, S), detached by the scoring module
            step_in = torch.cat([embedded[:, t : t + 1], context], dim=-1)  # (B, 1, E + h)
            out, hidden = self.rnn(step_in, hidden)  # (B, 1, h)
            outputs.append(out)
        self.attention_weights = torch.cat(weights, dim=1)  # (B, L, S)
        logits = self.dense(torch.cat(outputs, dim=1))  # (B, L, V)
        return logits, AttentionState(state.enc_outputs, state.src_valid_lens, hidden, state.projected_keys)


@dataclass
class LuongState:
    """Decoder state of :class:`LuongSeq2Seq`.

    Attributes:
        enc_outputs: all encoder top-layer states, the values. Shape (B, S, h).
        src_valid_lens: real source tokens per row. Shape (B,).
        hidden: the decoder GRU's state. Shape (N, B, h).
        projected_keys: ``W_a h_j`` for every encoder state, computed once per sentence.
            Shape (B, S, h).
        attentional: the last attentional hidden state h~_{t-1}, fed to the next step when
            input feeding is on (zeros before the first step). Shape (B, h).
    """

    enc_outputs: Tensor
    src_valid_lens: Tensor
    hidden: Tensor
    projected_keys: Tensor
    attentional: Tensor


class LuongDecoder(nn.Module):
    """GRU decoder with Luong et al.'s (2015) global attention and input feeding.

    Step t, with h_j the encoder states and y_{t-1} the previous token:

    * ``h_t = GRU([embedding(y_{t-1}); h~_{t-1}], h_{t-1})`` with input feeding, or
      ``GRU(embedding(y_{t-1}), h_{t-1})`` without;
    * ``alpha_t = softmax_j(h_t^T W_a h_j)`` over the real source positions (Luong's "general"
      score, :class:`~course_lib.scoring.MultiplicativeAttention`), ``c_t = sum_j alpha_tj h_j``;
    * ``h~_t = tanh(W_c [c_t; h_t])``, the attentional hidden state, and
      ``logits_t = W_o h~_t + b_o``.

    Unlike :class:`BahdanauDecoder`, the query is the *current* state h_t, computed before
    attending, and the context enters the prediction, not the GRU. Without input feeding the
    GRU therefore runs over all L teacher-forced inputs in one call and the L queries attend at
    once; input feeding makes step t's input depend on step t-1's attention, so the steps run
    one after another again.

    Args:
        vocab_size: V.
        embed_size: E.
        num_hiddens: h (must equal the encoder's); also the size of h~_t.
        num_layers: N (must equal the encoder's).
        dropout: dropout between GRU layers and on the attention weights.
        input_feeding: feed h~_{t-1} to step t (default True).

    Shape:
        tokens (B, L) long, state -> ``(logits (B, L, V), state)``. After a call,
        ``attention_weights`` holds the (B, L, S) weights of its L steps (detached).
    """

    def __init__(self, vocab_size: int, embed_size: int, num_hiddens: int, num_layers: int,
                 dropout: float = 0.0, input_feeding: bool = True) -> None:
        super().__init__()
        self.input_feeding = input_feeding
        self.attention = MultiplicativeAttention(num_hiddens, num_hiddens, dropout)
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size + (num_hiddens if input_feeding else 0), num_hiddens, num_layers,
                          batch_first=True, dropout=dropout if num_layers > 1 else 0.0)
        self.W_c = nn.Linear(2 * num_hiddens, num_hiddens, bias=False)
        self.dense = nn.Linear(num_hiddens, vocab_size)
        self.attention_weights: Tensor | None = None

    def init_state(self, enc_outputs: Tensor, enc_state: Tensor, src_valid_lens: Tensor) -> LuongState:
        """The state before the first step: h~_0 = 0, keys projected once."""
        batch, hiddens = enc_outputs.shape[0], self.W_c.out_features
        return LuongState(enc_outputs=enc_outputs, src_valid_lens=src_valid_lens, hidden=enc_state,
                          projected_keys=self.attention.W_a(enc_outputs),  # (B, S, h)
                          attentional=enc_outputs.new_zeros(batch, hiddens))  # (B, h)

    def attend(self, queries: Tensor, state: LuongState) -> tuple[Tensor, Tensor]:
        """Multiplicative attention of the decoder states over the encoder states.

        Computes ``self.attention(queries, enc_outputs, enc_outputs, src_valid_lens)`` with
        the keys projected once in :meth:`init_state`.

        Args:
            queries: decoder top-layer states h_t, (B, Q, h).
            state: the current decoder state.

        Returns:
            ``(contexts (B, Q, h), weights (B, Q, S))``.
        """
        scores = torch.bmm(queries, state.projected_keys.transpose(1, 2))  # (B, Q, S): h_t^T W_a h_j
        weights = masked_softmax(scores, state.src_valid_lens)  # (B, Q, S)
        self.attention.attention_weights = weights
        return torch.bmm(self.attention.dropout(weights), state.enc_outputs), weights  # (B, Q, h)

    def forward(self, tokens: Tensor, state: LuongState) -> tuple[Tensor, LuongState]:
        check_token_ids(tokens, "tgt_in", "(B, L)")
        embedded = self.embedding(tokens)  # (B, L, E)
        if self.input_feeding:
            hidden, attentional = state.hidden, state.attentional
            outputs, weights = [], []
            for t in range(tokens.shape[1]):
                step_in = torch.cat([embedded[:, t], attentional], dim=-1).unsqueeze(1)  # (B, 1, E + h)
                out, hidden = self.rnn(step_in, hidden)  # (B, 1, h)
                context, step_weights = self.attend(out, state)  # (B, 1, h), (B, 1, S)
                attentional = torch.tanh(self.W_c(torch.cat([context, out], dim=-1))).squeeze(1)  # (B, h)
                outputs.append(attentional)
                weights.append(step_weights.detach())
            attentional_all = torch.stack(outputs, dim=1)  # (B, L, h)
            self.attention_weights = torch.cat(weights, dim=1)  # (B, L, S)
        else:
            out, hidden = self.rnn(embedded, state.hidden)  # (B, L, h): every step in one call
            context, all_weights = self.attend(out, state)  # (B, L, h), (B, L, S)
            attentional_all = torch.tanh(self.W_c(torch.cat([context, out], dim=-1)))  # (B, L, h)
            attentional = attentional_all[:, -1]  # (B, h)
            self.attention_weights = all_weights.detach()
        logits = self.dense(attentional_all)  # (B, L, V)
        return logits, LuongState(state.enc_outputs, state.src_valid_lens, hidden, state.projected_keys,
                                  attentional)


# --------------------------------------------------------------------------- models


class _EncoderDecoder(nn.Module):
    """What both models share: encode once, decode with teacher forcing or step by step."""

    encoder: GRUEncoder
    decoder: nn.Module

    def __init__(self, config: Seq2SeqConfig,
                 decoder: type[GRUDecoder] | type[BahdanauDecoder] | type[LuongDecoder],
                 bidirectional: bool = False, **decoder_kwargs: bool) -> None:
        super().__init__()
        self.config = config
        sizes = (config.embed_size, config.num_hiddens, config.num_layers, config.dropout)
        self.encoder = GRUEncoder(config.src_vocab_size, *sizes, bidirectional=bidirectional)
        self.decoder = decoder(config.tgt_vocab_size, *sizes, **decoder_kwargs)
        self.apply(init_seq2seq_weights)

    def encode(self, src: Tensor, src_valid_lens: Tensor) -> Seq2SeqState | AttentionState | LuongState:
        """Run the encoder and build the decoder's initial state.

        Args:
            src: source ids, right-padded, (B, S) long.
            src_valid_lens: real tokens per row, (B,), each in [1, S].

        Returns:
            The decoder state (see :class:`Seq2SeqState` / :class:`AttentionState`).
        """
        raise NotImplementedError

    def forward(self, src: Tensor, src_valid_lens: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher forcing: the logits of every target position at once.

        Args:
            src: source ids (B, S), right-padded.
            src_valid_lens: real source tokens per row (B,).
            tgt_in: decoder input (B, L), ``<bos>`` followed by the target.

        Returns:
            Logits (B, L, V); position t scores the token that follows ``tgt_in[:, :t+1]``.
        """
        check_token_ids(tgt_in, "tgt_in", "(B, L)")
        if tgt_in.shape[0] != src.shape[0]:
            raise ValueError(f"src (B, S) {tuple(src.shape)} and tgt_in (B, L) {tuple(tgt_in.shape)} "
                             "must have the same batch size B")
        logits, _ = self.decoder(tgt_in, self.encode(src, src_valid_lens))
        return logits

    def decode_step(self, prev_tokens: Tensor, state: Seq2SeqState | AttentionState | LuongState
                    ) -> tuple[Tensor, Seq2SeqState | AttentionState | LuongState]:
        """One decoding step.

        Args:
            prev_tokens: the previous token of each row, (B,) long (``<bos>`` first).
            state: from :meth:`encode` or the previous step.

        Returns:
            ``(logits (B, V), new state)``.
        """
        if prev_tokens.dim() != 1:
            raise ValueError(f"prev_tokens must have shape (B,), got {tuple(prev_tokens.shape)}")
        logits, state = self.decoder(prev_tokens.unsqueeze(1), state)  # (B, 1, V)
        return logits.squeeze(1), state

    def reorder_state(self, state: Seq2SeqState | AttentionState | LuongState, index: Tensor
                      ) -> Seq2SeqState | AttentionState | LuongState:
        """Select / repeat batch rows of a state: row i of the result is row ``index[i]``.

        Args:
            state: a decoder state with B rows.
            index: (B2,) long indices into the B rows.

        Returns:
            A state of the same type with B2 rows.
        """
        if index.dim() != 1:
            raise ValueError(f"index must have shape (B2,), got {tuple(index.shape)}")
        if isinstance(state, (AttentionState, LuongState, Seq2SeqState)):
            # every field is batch-first except the GRU's hidden state, (layers, B, H)
            return replace(state, **{f.name: getattr(state, f.name).index_select(1 if f.name == "hidden" else 0, index)
                                     for f in fields(state)})
        raise ValueError(f"unknown state type {type(state).__name__}")


class Seq2Seq(_EncoderDecoder):
    """GRU encoder-decoder without attention: the source is squeezed into one vector.

    Args:
        config: the hyperparameters.

    Shape:
        ``forward``: src (B, S), src_valid_lens (B,), tgt_in (B, L) -> logits (B, L, V).
        ``decode_step``: prev_tokens (B,), state -> (logits (B, V), state).

    Example:
        >>> cfg = Seq2SeqConfig(src_vocab_size=10, tgt_vocab_size=12)
        >>> model = Seq2Seq(cfg)
        >>> src = torch.tensor([[5, 6, 2, 0]]); lens = torch.tensor([3])
        >>> model(src, lens, torch.tensor([[1, 7, 8]])).shape
        torch.Size([1, 3, 12])
    """

    decoder: GRUDecoder

    def __init__(self, config: Seq2SeqConfig) -> None:
        super().__init__(config, GRUDecoder)

    def encode(self, src: Tensor, src_valid_lens: Tensor) -> Seq2SeqState:
        enc_outputs, enc_state = self.encoder(src, src_valid_lens)
        return self.decoder.init_state(enc_outputs, enc_state)


class AttentionSeq2Seq(_EncoderDecoder):
    """GRU encoder-decoder with Bahdanau (additive) attention.

    Args:
        config: the hyperparameters.
        bidirectional: if True, the encoder is bidirectional (Bahdanau et al.'s setting):
            two GRUs of ``num_hiddens // 2`` units per layer, their states concatenated, so
            keys, values and the decoder keep the size h (see :class:`GRUEncoder`). The
            decoder starts from the concatenated final states. Default False: lesson 1a's
            one-directional encoder.

    Shape:
        ``forward``: src (B, S), src_valid_lens (B,), tgt_in (B, L) -> logits (B, L, V);
        afterwards ``attention_weights`` holds the (B, L, S) weights (row t: where the
        decoder looked to produce position t; zero beyond each valid length).
        ``decode_step``: prev_tokens (B,), state -> (logits (B, V), state); afterwards
        ``last_attention_weights`` holds that step's (B, S) weights.
    """

    decoder: BahdanauDecoder

    def __init__(self, config: Seq2SeqConfig, bidirectional: bool = False) -> None:
        super().__init__(config, BahdanauDecoder, bidirectional=bidirectional)
        self.attention_weights: Tensor | None = None
        self.last_attention_weights: Tensor | None = None

    def encode(self, src: Tensor, src_valid_lens: Tensor) -> AttentionState:
        enc_outputs, enc_state = self.encoder(src, src_valid_lens)
        return self.decoder.init_state(enc_outputs, enc_state, src_valid_lens)

    def forward(self, src: Tensor, src_valid_lens: Tensor, tgt_in: Tensor) -> Tensor:
        logits = super().forward(src, src_valid_lens, tgt_in)
        self.attention_weights = self.decoder.attention_weights  # (B, L, S)
        return logits

    def decode_step(self, prev_tokens: Tensor, state: Seq2SeqState | AttentionState | LuongState
                    ) -> tuple[Tensor, Seq2SeqState | AttentionState | LuongState]:
        logits, state = super().decode_step(prev_tokens, state)
        step_weights = self.decoder.attention_weights
        assert step_weights is not None  # set by the decoder's forward
        self.last_attention_weights = step_weights[:, 0]  # (B, S)
        return logits, state


class LuongSeq2Seq(AttentionSeq2Seq):
    """GRU encoder-decoder with Luong et al.'s (2015) attention and, by default, input feeding.

    The encoder is :class:`AttentionSeq2Seq`'s; the decoder is :class:`LuongDecoder`: GRU step
    first, then "general" multiplicative attention with the new state h_t as the query, then
    the attentional hidden state h~_t = tanh(W_c [c_t; h_t]) predicts the word and (input
    feeding) joins the next step's input.

    Args:
        config: the hyperparameters.
        bidirectional: a bidirectional encoder, as in :class:`AttentionSeq2Seq`.
        input_feeding: feed h~_{t-1} into step t (default True, Luong et al.'s best setting).

    Shape:
        As :class:`AttentionSeq2Seq`: ``forward`` -> logits (B, L, V) and
        ``attention_weights`` (B, L, S); ``decode_step`` -> (logits (B, V), state) and
        ``last_attention_weights`` (B, S).
    """

    decoder: LuongDecoder  # type: ignore[assignment]

    def __init__(self, config: Seq2SeqConfig, bidirectional: bool = False, input_feeding: bool = True) -> None:
        # AttentionSeq2Seq's encode, forward and decode_step serve as they are; only the decoder differs
        _EncoderDecoder.__init__(self, config, LuongDecoder, bidirectional=bidirectional,
                                 input_feeding=input_feeding)
        self.attention_weights: Tensor | None = None
        self.last_attention_weights: Tensor | None = None
