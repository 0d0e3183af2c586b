"""Decoding a trained seq2seq model: greedy search, beam search, and translation.

Shape letters: B batch, S source length, V target vocabulary size, W beam width
(``beam_size``; K means keys everywhere in the course).

Every seq2seq model of the course (GRU, Bahdanau, Transformer) implements the
:class:`Seq2SeqModel` protocol: ``forward`` for teacher forcing, and for decoding,
``encode`` the source once, then ``decode_step`` one token at a time, starting from
``<bos>``. The functions here only use the decoding half (:class:`StepDecoder`), so they
work for all of them and for the small fake models of the tests.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any, Literal, Protocol, overload, runtime_checkable

import torch
from torch import Tensor

from course_lib.training import eval_mode

__all__ = [
    "Seq2SeqModel",
    "StepDecoder",
    "greedy_decode",
    "beam_search",
    "beam_search_batch",
    "sequence_log_prob",
    "position_limit",
    "encode_sources",
    "decode_sentences",
    "translate",
]


@runtime_checkable
class StepDecoder(Protocol):
    """What decoding needs: encode once, then one token at a time.

    ``state`` is whatever the model needs between steps (encoder outputs, hidden state,
    cached keys and values, source valid lengths ...); decoding never looks inside it.
    A model may also set ``last_attention_weights`` after each ``decode_step``: one detached
    tensor whose first axis is the batch (e.g. (B, S), or (B, layers, H, S));
    :func:`greedy_decode` collects it when asked.
    """

    def encode(self, src: Tensor, src_valid_lens: Tensor) -> Any:
        """Encode a source batch ``(B, S)`` with valid lengths ``(B,)``; returns the decoder state."""
        ...

    def decode_step(self, prev_tokens: Tensor, state: Any) -> tuple[Tensor, Any]:
        """One step: previous tokens ``(B,)`` -> (next-token logits ``(B, V)``, new state).

        The first call gets ``<bos>`` for every row."""
        ...

    def reorder_state(self, state: Any, index: Tensor) -> Any:
        """Keep / repeat batch rows: row ``i`` of the result is row ``index[i]`` of ``state``."""
        ...


@runtime_checkable
class Seq2SeqModel(StepDecoder, Protocol):
    """A seq2seq model of the course (GRU, Bahdanau, Transformer): a :class:`StepDecoder`
    that can also be trained with teacher forcing through ``forward``."""

    def __call__(self, src: Tensor, src_valid_lens: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher forcing: logits ``(B, L, V)`` for source ``(B, S)`` and target input ``(B, L)``."""
        ...


def _check_src(src: Tensor, src_valid_lens: Tensor) -> None:
    if src.dim() != 2:
        raise ValueError(f"src must have shape (B, S), got {tuple(src.shape)}; add a batch axis with src[None]")
    if src_valid_lens.shape != (src.shape[0],):
        raise ValueError(
            f"src_valid_lens must have shape (B,) = ({src.shape[0]},), got {tuple(src_valid_lens.shape)}"
        )


def position_limit(model: Any) -> int | None:
    """The most positions a model can encode or decode, or None if it has no limit.

    A Transformer's positional table has ``config.max_len`` rows, so neither a source nor
    a decoded output may be longer; a GRU has no such limit.

    Args:
        model: any model; its ``config.max_len`` is read if it has one.

    Returns:
        ``model.config.max_len`` if it is an int, else None.
    """
    limit = getattr(getattr(model, "config", None), "max_len", None)
    return limit if isinstance(limit, int) and not isinstance(limit, bool) else None


def _check_limits(model: Any, src: Tensor, max_len: int) -> None:
    """Fail before any work when the source or the output would not fit the model."""
    limit = position_limit(model)
    if limit is None:
        return
    if src.shape[1] > limit:
        raise ValueError(
            f"src has {src.shape[1]} positions but the model encodes at most {limit} "
            f"(config.max_len); truncate the sources to {limit} tokens (translate() does it "
            "for you, with a warning)"
        )
    if max_len > limit:
        raise ValueError(
            f"max_len={max_len} output tokens but the model decodes at most {limit} positions "
            f"(config.max_len); pass max_len <= {limit}"
        )


def _select_row(obj: Any, b: int) -> Tensor:
    if not isinstance(obj, Tensor):
        raise TypeError(f"a model's last_attention_weights must be one tensor whose first axis is the batch "
                        f"(course_lib.multihead.HeadsAttention states the rule), got {type(obj).__name__}")
    return obj[b].detach().clone()


def _stack_steps(steps: list[Tensor]) -> Tensor | None:
    return torch.stack(steps) if steps else None  # (steps, ...)


@overload
def greedy_decode(
    model: StepDecoder, src: Tensor, src_valid_lens: Tensor, *, bos_id: int, eos_id: int,
    max_len: int, return_attention: Literal[False] = ...,
) -> list[list[int]]: ...


@overload
def greedy_decode(
    model: StepDecoder, src: Tensor, src_valid_lens: Tensor, *, bos_id: int, eos_id: int,
    max_len: int, return_attention: Literal[True],
) -> tuple[list[list[int]], list[Any]]: ...


def greedy_decode(
    model: StepDecoder,
    src: Tensor,
    src_valid_lens: Tensor,
    *,
    bos_id: int,
    eos_id: int,
    max_len: int,
    return_attention: bool = False,
) -> list[list[int]] | tuple[list[list[int]], list[Any]]:
    """Greedy decoding of a batch: at each step, feed back the most likely token.

    Rows are decoded together; a row stops at its first ``<eos>`` (which is not included
    in its tokens) or after ``max_len`` tokens. The loop ends when every row has stopped.

    Args:
        model: a :class:`StepDecoder` (every :class:`Seq2SeqModel` is one).
        src: source token ids.
        src_valid_lens: real tokens per source row.
        bos_id: the ``<bos>`` id fed at the first step.
        eos_id: the ``<eos>`` id that ends a row.
        max_len: the most tokens generated per row (``<eos>`` included); at most the
            model's :func:`position_limit`.
        return_attention: also return, per row, the model's ``last_attention_weights``
            of each step stacked along a new first axis (one step per generated token,
            plus the step that produced ``<eos>`` if any). ``None`` for a row if the
            model does not expose attention weights.

    Returns:
        Token ids per row (without ``<bos>`` and ``<eos>``); with ``return_attention``,
        the pair ``(tokens, attention)``.

    Shape:
        src ``(B, S)``, src_valid_lens ``(B,)``. Attention of row ``b``: ``(steps, ...)``
        where ``...`` is the model's per-row attention shape, e.g. ``(S,)`` for Bahdanau
        attention or ``(layers, H, S)`` for a Transformer.
    """
    _check_src(src, src_valid_lens)
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    _check_limits(model, src, max_len)
    batch = src.shape[0]
    tokens: list[list[int]] = [[] for _ in range(batch)]
    attention: list[list[Any]] = [[] for _ in range(batch)]
    with eval_mode(model), torch.no_grad():
        state = model.encode(src, src_valid_lens)
        prev = torch.full((batch,), bos_id, dtype=torch.long, device=src.device)
        done = [False] * batch
        for _ in range(max_len):
            logits, state = model.decode_step(prev, state)
            prev = logits.argmax(dim=-1)  # (B,)
            weights = getattr(model, "last_attention_weights", None) if return_attention else None
            for b, tok in enumerate(prev.tolist()):
                if done[b]:
                    continue
                if weights is not None:
                    attention[b].append(_select_row(weights, b))
                if tok == eos_id:
                    done[b] = True
                else:
                    tokens[b].append(tok)
            if all(done):
                break
    if return_attention:
        return tokens, [_stack_steps(a) for a in attention]
    return tokens


def sequence_log_prob(
    model: StepDecoder,
    src: Tensor,
    src_valid_lens: Tensor,
    tokens: Sequence[int],
    *,
    bos_id: int,
) -> float:
    """Log-probability the model gives to one output sequence (e.g. greedy's).

    Args:
        model: a :class:`StepDecoder` (every :class:`Seq2SeqModel` is one).
        src: one source row.
        src_valid_lens: its valid length.
        tokens: the output tokens, ``<eos>`` included if the sequence ended with it.
        bos_id: the ``<bos>`` id.

    Returns:
        ``sum_t log P(tokens[t] | src, tokens[:t])``.

    Shape:
        src ``(1, S)``, src_valid_lens ``(1,)``.
    """
    _check_src(src, src_valid_lens)
    if src.shape[0] != 1:
        raise ValueError(f"sequence_log_prob scores one sentence: src must be (1, S), got {tuple(src.shape)}")
    total = 0.0
    with eval_mode(model), torch.no_grad():
        state = model.encode(src, src_valid_lens)
        prev = torch.tensor([bos_id], dtype=torch.long, device=src.device)
        for tok in tokens:
            logits, state = model.decode_step(prev, state)
            total += float(torch.log_softmax(logits.double(), dim=-1)[0, tok])
            prev = torch.tensor([tok], dtype=torch.long, device=src.device)
    return total


def _final_score(log_prob: float, length: int, length_penalty: float) -> float:
    # D2L's length normalization: log P / L**alpha (alpha = 0: plain log-probability).
    return log_prob / (max(length, 1) ** length_penalty) if length_penalty else log_prob


def beam_search_batch(
    model: StepDecoder,
    src: Tensor,
    src_valid_lens: Tensor,
    *,
    bos_id: int,
    eos_id: int,
    beam_size: int,
    max_len: int,
    length_penalty: float = 0.0,
    n_best: int | None = None,
) -> list[list[tuple[list[int], float]]]:
    """Beam search on each row of a batch; see :func:`beam_search` for one sentence.

    Args:
        model: a :class:`StepDecoder` (every :class:`Seq2SeqModel` is one).
        src: source token ids.
        src_valid_lens: real tokens per source row.
        bos_id: the ``<bos>`` id fed at the first step.
        eos_id: the ``<eos>`` id that ends a hypothesis.
        beam_size: hypotheses kept per row at every step (W).
        max_len: the most tokens per hypothesis (``<eos>`` included); at most the
            model's :func:`position_limit`.
        length_penalty: alpha in D2L's score ``log P / L**alpha``, with ``L`` the number of
            tokens including ``<eos>``. 0 ranks by plain log-probability, which favours
            short outputs; D2L suggests 0.75.
        n_best: hypotheses returned per row (default ``beam_size``).

    Returns:
        Per row, a list of ``(tokens, score)`` best first; tokens without ``<bos>`` and
        ``<eos>``; score as above.

    Shape:
        src ``(B, S)``, src_valid_lens ``(B,)``. Internally the state has ``B * W`` rows.
    """
    _check_src(src, src_valid_lens)
    if beam_size < 1:
        raise ValueError(f"beam_size must be >= 1, got {beam_size}")
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    _check_limits(model, src, max_len)
    n_best = beam_size if n_best is None else n_best
    batch, W = src.shape[0], beam_size
    device = src.device

    # finished[b]: (tokens, log P, length counted for the penalty)
    finished: list[list[tuple[list[int], float, int]]] = [[] for _ in range(batch)]
    with eval_mode(model), torch.no_grad():
        state = model.encode(src, src_valid_lens)
        state = model.reorder_state(state, torch.arange(batch, device=device).repeat_interleave(W))
        prefixes: list[list[list[int]]] = [[[] for _ in range(W)] for _ in range(batch)]
        # Only the first copy of each row is alive at the start, so the W copies do not
        # all propose the same continuations.
        scores = torch.full((batch, W), -math.inf, dtype=torch.float64, device=device)
        scores[:, 0] = 0.0
        prev = torch.full((batch * W,), bos_id, dtype=torch.long, device=device)
        row_done = [False] * batch
        for _ in range(max_len):
            logits, state = model.decode_step(prev, state)
            log_probs = torch.log_softmax(logits.double(), dim=-1)  # (B*W, V)
            vocab = log_probs.shape[-1]
            total = (scores.reshape(-1, 1) + log_probs).reshape(batch, W * vocab)  # (B, W*V)
            # 2W candidates always leave W that do not end, even if W of them are <eos>.
            top_scores, top_index = total.topk(min(2 * W, W * vocab), dim=1)  # (B, 2W)
            new_scores = torch.full((batch, W), -math.inf, dtype=torch.float64, device=device)
            source_rows = torch.arange(batch, device=device).repeat_interleave(W) * W  # (B*W,)
            new_prefixes: list[list[list[int]]] = [[[] for _ in range(W)] for _ in range(batch)]
            next_tokens = torch.full((batch * W,), eos_id, dtype=torch.long, device=device)
            for b in range(batch):
                if row_done[b]:
                    continue
                alive = 0
                for rank, (s, idx) in enumerate(zip(top_scores[b].tolist(), top_index[b].tolist())):
                    if s == -math.inf or alive == W:
                        break
                    beam, tok = divmod(idx, vocab)
                    if tok == eos_id:
                        # Only an <eos> among the W best candidates ends a hypothesis (as
                        # in fairseq): one a W-wide beam would have pruned is not kept.
                        if rank < W:
                            finished[b].append((prefixes[b][beam], s, len(prefixes[b][beam]) + 1))
                        continue
                    new_scores[b, alive] = s
                    new_prefixes[b][alive] = prefixes[b][beam] + [tok]
                    source_rows[b * W + alive] = b * W + beam
                    next_tokens[b * W + alive] = tok
                    alive += 1
            scores, prefixes, prev = new_scores, new_prefixes, next_tokens
            state = model.reorder_state(state, source_rows)
            for b in range(batch):
                if row_done[b]:
                    continue
                best_alive = float(scores[b].max())
                if best_alive == -math.inf:
                    row_done[b] = True
                elif length_penalty == 0 and len(finished[b]) >= n_best:
                    # Log-probabilities only go down as a prefix grows, so no alive beam
                    # can overtake the n_best-th finished hypothesis any more.
                    kth = sorted((f[1] for f in finished[b]), reverse=True)[n_best - 1]
                    row_done[b] = best_alive <= kth
            if all(row_done):
                break
    results: list[list[tuple[list[int], float]]] = []
    for b in range(batch):
        candidates = list(finished[b])
        if not row_done[b]:  # max_len reached: unfinished beams compete as they are
            for beam in range(W):
                s = float(scores[b, beam])
                if s > -math.inf:
                    candidates.append((prefixes[b][beam], s, len(prefixes[b][beam])))
        ranked = sorted(
            ((toks, _final_score(lp, n, length_penalty)) for toks, lp, n in candidates),
            key=lambda c: c[1],
            reverse=True,
        )
        results.append(ranked[:n_best])
    return results


def beam_search(
    model: StepDecoder,
    src: Tensor,
    src_valid_lens: Tensor,
    *,
    bos_id: int,
    eos_id: int,
    beam_size: int,
    max_len: int,
    length_penalty: float = 0.0,
    n_best: int | None = None,
) -> list[tuple[list[int], float]]:
    """Beam search for one source sentence.

    Keep the ``beam_size`` most likely prefixes at each step. A prefix whose best
    continuation is ``<eos>`` becomes a finished hypothesis; the search stops when
    ``max_len`` is reached or (with ``length_penalty=0``) when no live prefix can beat
    the finished ones. With ``beam_size=1`` this is greedy decoding; with ``beam_size``
    large enough to keep every prefix it is exhaustive search.

    Args:
        model: a :class:`StepDecoder` (every :class:`Seq2SeqModel` is one).
        src: one source sentence (``(S,)`` is accepted too).
        src_valid_lens: its valid length.
        bos_id, eos_id, beam_size, max_len, length_penalty, n_best: see
            :func:`beam_search_batch`.

    Returns:
        ``(tokens, score)`` pairs, best first; tokens without ``<bos>``/``<eos>``; score is
        ``log P / L**length_penalty``.

    Shape:
        src ``(1, S)``, src_valid_lens ``(1,)``. For a batch use :func:`beam_search_batch`.
    """
    if src.dim() == 1:
        src = src.unsqueeze(0)  # (1, S)
    src_valid_lens = src_valid_lens.reshape(-1)  # (1,)
    if src.shape[0] != 1:
        raise ValueError(
            f"beam_search decodes one sentence, src (1, S); got {tuple(src.shape)}. "
            "Use beam_search_batch for a batch."
        )
    return beam_search_batch(
        model, src, src_valid_lens, bos_id=bos_id, eos_id=eos_id, beam_size=beam_size,
        max_len=max_len, length_penalty=length_penalty, n_best=n_best,
    )[0]


def encode_sources(sentences: Sequence[str], src_vocab: Any, tokenize: Callable[[str], list[str]], *,
                   append_eos: bool = True, max_positions: int | None = None,
                   device: str | torch.device = "cpu") -> tuple[Tensor, Tensor]:
    """Source sentences as a batch for a model: token ids, right-padded, and valid lengths.

    Each sentence is tokenized, encoded and ends with ``<eos>`` (as in the training
    batches), then padded with ``<pad>`` to the longest.

    Args:
        sentences: source sentences (at least one).
        src_vocab: the source vocabulary (``encode(tokens)``, ``.pad``, ``.eos``).
        tokenize: splits a sentence into tokens (e.g. ``course_lib.data.tokenize``).
        append_eos: end each source with ``<eos>``.
        max_positions: cut longer sources to this many ids, keeping the final ``<eos>``,
            with a warning (a model has a fixed number of positions).
        device: where the tensors go.

    Returns:
        ``(src (B, S), src_valid_lens (B,))``, both long.
    """
    tail = [src_vocab.eos] if append_eos else []
    ids = [list(src_vocab.encode(tokenize(s))) + tail for s in sentences]
    if max_positions is not None:
        too_long = [i for i, x in enumerate(ids) if len(x) > max_positions]
        if too_long:
            warnings.warn(f"{len(too_long)} source sentence(s) (first: #{too_long[0]}, {len(ids[too_long[0]])} "
                          f"tokens) exceed the model's {max_positions} positions (config.max_len) and were "
                          "truncated", stacklevel=2)
            ids = [x if len(x) <= max_positions else x[: max_positions - len(tail)] + tail for x in ids]
    width = max(max(len(x) for x in ids), 1)
    src = torch.tensor([x + [src_vocab.pad] * (width - len(x)) for x in ids], dtype=torch.long, device=device)
    return src, torch.tensor([len(x) for x in ids], dtype=torch.long, device=device)  # (B, S), (B,)


def decode_sentences(model: StepDecoder, sentences: Sequence[str], src_vocab: Any,
                     tokenize: Callable[[str], list[str]], *, bos_id: int, eos_id: int, max_len: int,
                     batch_size: int = 250, return_attention: bool = False,
                     device: str | torch.device = "cpu") -> Any:
    """Greedy decoding of many source sentences, ``batch_size`` at a time.

    Returns:
        The output ids of each sentence (without ``<bos>`` / ``<eos>``); with
        ``return_attention``, also each sentence's weights (steps, S_valid), cut to its own
        source length.
    """
    outputs: list[list[int]] = []
    weights: list[Tensor] = []
    for i in range(0, len(sentences), batch_size):
        src, valid = encode_sources(sentences[i:i + batch_size], src_vocab, tokenize, device=device)
        if return_attention:
            out, att = greedy_decode(model, src, valid, bos_id=bos_id, eos_id=eos_id, max_len=max_len,
                                     return_attention=True)
            weights += [a[:, :n] for a, n in zip(att, valid.tolist())]  # (steps, S_valid)
        else:
            out = greedy_decode(model, src, valid, bos_id=bos_id, eos_id=eos_id, max_len=max_len)
        outputs += out
    return (outputs, weights) if return_attention else outputs


def translate(
    model: StepDecoder,
    sentences: Sequence[str],
    src_vocab: Any,
    tgt_vocab: Any,
    tokenize: Callable[[str], list[str]],
    *,
    max_len: int,
    beam_size: int = 1,
    length_penalty: float = 0.0,
    append_src_eos: bool = True,
    device: str | torch.device = "cpu",
    detokenize: Callable[[Sequence[str]], str] | None = None,
) -> list[str]:
    """Translate sentences: tokenize, encode, decode, and turn the output into text.

    Sources longer than the model's :func:`position_limit` are cut to fit (keeping the
    final ``<eos>``) and ``max_len`` is lowered to the limit, each with a warning, so one
    long sentence never costs the whole batch.

    Args:
        model: a :class:`StepDecoder` (every :class:`Seq2SeqModel` is one).
        sentences: source sentences.
        src_vocab: source vocabulary (``encode(tokens)``, ``.pad``, ``.eos``).
        tgt_vocab: target vocabulary (``decode(ids)`` drops specials, ``.bos``, ``.eos``).
        tokenize: splits a sentence into tokens (e.g. ``course_lib.data.tokenize``);
            passed in so this module does not depend on the data module.
        max_len: the most output tokens.
        beam_size: 1 for greedy decoding, more for beam search.
        length_penalty: for beam search, see :func:`beam_search_batch`.
        append_src_eos: append ``<eos>`` to each source, as the training batches do.
        device: where the source tensors go.
        detokenize: turns the output tokens into text, e.g. ``course_lib.data.detokenize``
            (``"je l'ai vu aujourd'hui, qu'il soit là."``) or a subword tokenizer's
            ``decode``. None joins the tokens with single spaces (``"je l' ai vu ..."``),
            which shows the model's tokens.

    Returns:
        One string per sentence.

    Raises:
        ValueError: ``max_len`` < 1.
    """
    if not sentences:
        return []
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    limit = position_limit(model)
    src, valid = encode_sources(sentences, src_vocab, tokenize, append_eos=append_src_eos, max_positions=limit,
                                device=device)
    if limit is not None and max_len > limit:
        warnings.warn(f"max_len={max_len} exceeds the model's {limit} positions (config.max_len); "
                      f"decoding at most {limit} tokens", stacklevel=2)
        max_len = limit
    if beam_size == 1:
        outputs = greedy_decode(model, src, valid, bos_id=tgt_vocab.bos, eos_id=tgt_vocab.eos, max_len=max_len)
    else:
        outputs = [
            hyps[0][0]
            for hyps in beam_search_batch(
                model, src, valid, bos_id=tgt_vocab.bos, eos_id=tgt_vocab.eos,
                beam_size=beam_size, max_len=max_len, length_penalty=length_penalty, n_best=1,
            )
        ]
    texts = []
    for out in outputs:
        decoded = tgt_vocab.decode(out)
        if isinstance(decoded, str):
            texts.append(decoded)
        elif detokenize is not None:
            texts.append(detokenize(list(decoded)))
        else:
            texts.append(" ".join(decoded))
    return texts
