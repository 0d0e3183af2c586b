"""Tests for course_lib.decoding: greedy search, beam search, translate."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from torch import Tensor, nn

from course_lib.decoding import (
    decode_sentences,
    encode_sources,
    Seq2SeqModel,
    StepDecoder,
    beam_search,
    beam_search_batch,
    greedy_decode,
    sequence_log_prob,
    translate,
)

TIER = "fast"  # course_tools/tiers.py

PAD, BOS, EOS = 0, 1, 2


class TinyGRUSeq2Seq(nn.Module):
    """A GRU encoder-decoder with a dot-product attention read-out, for decoding tests."""

    def __init__(self, vocab: int = 9, hidden: int = 16) -> None:
        super().__init__()
        self.src_emb = nn.Embedding(vocab, hidden)
        self.tgt_emb = nn.Embedding(vocab, hidden)
        self.encoder = nn.GRU(hidden, hidden, batch_first=True)
        self.cell = nn.GRUCell(2 * hidden, hidden)
        self.out = nn.Linear(hidden, vocab)
        self.last_attention_weights: Tensor | None = None

    def encode(self, src: Tensor, src_valid_lens: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        enc, _ = self.encoder(self.src_emb(src))  # (B, S, E)
        h = enc[torch.arange(src.shape[0]), src_valid_lens - 1]  # (B, E)
        mask = torch.arange(src.shape[1])[None, :] < src_valid_lens[:, None]  # (B, S)
        return enc, mask, h

    def decode_step(self, prev_tokens: Tensor, state: Any) -> tuple[Tensor, Any]:
        enc, mask, h = state
        scores = (enc @ h.unsqueeze(-1)).squeeze(-1).masked_fill(~mask, -1e9)  # (B, S)
        weights = scores.softmax(-1)
        self.last_attention_weights = weights
        context = (weights.unsqueeze(1) @ enc).squeeze(1)  # (B, E)
        h = self.cell(torch.cat([self.tgt_emb(prev_tokens), context], -1), h)
        return self.out(h), (enc, mask, h)

    def reorder_state(self, state: Any, index: Tensor) -> Any:
        return tuple(s.index_select(0, index) for s in state)

    def forward(self, src: Tensor, src_valid_lens: Tensor, tgt_in: Tensor) -> Tensor:
        state = self.encode(src, src_valid_lens)
        logits = []
        for t in range(tgt_in.shape[1]):
            step, state = self.decode_step(tgt_in[:, t], state)
            logits.append(step)
        return torch.stack(logits, 1)  # (B, L, V)


class PrefixModel:
    """A fake model whose next-token distribution is a fixed random function of the
    source and of the whole prefix (through a hash into a table of logits)."""

    training = False

    def __init__(self, vocab: int = 5, seed: int = 0, eos_bias: float = 0.0) -> None:
        g = torch.Generator().manual_seed(seed)
        self.vocab = vocab
        self.table = torch.randn(10007, vocab, generator=g, dtype=torch.float64) * 2
        self.table[:, EOS] += eos_bias

    def logits_for(self, src_row: list[int], prefix: list[int]) -> Tensor:
        h = 17
        for tok in src_row:  # src_row: the valid tokens only
            h = (h * 131 + tok + 1) % 10007
        h = (h * 7919) % 10007
        for tok in prefix:
            h = (h * 31 + tok + 1) % 10007
        return self.table[h]

    def encode(self, src: Tensor, src_valid_lens: Tensor) -> list[tuple[list[int], list[int]]]:
        # Per row: (valid source tokens, tokens fed so far). Padding is ignored.
        return [(src[b, : int(n)].tolist(), []) for b, n in enumerate(src_valid_lens)]

    def decode_step(self, prev_tokens: Tensor, state: Any) -> tuple[Tensor, Any]:
        state = [(s, fed + [int(t)]) for (s, fed), t in zip(state, prev_tokens)]
        # fed[0] is <bos>; the distribution depends on everything generated after it.
        return torch.stack([self.logits_for(s, fed[1:]) for s, fed in state]), state

    def reorder_state(self, state: Any, index: Tensor) -> Any:
        return [state[i] for i in index.tolist()]


class TableModel(PrefixModel):
    """Explicit next-token probabilities per prefix; unknown prefixes end with <eos>."""

    def __init__(self, probs: dict[tuple[int, ...], dict[int, float]], vocab: int = 5) -> None:
        self.vocab = vocab
        self.probs = probs

    def logits_for(self, src_row: list[int], prefix: list[int]) -> Tensor:
        p = torch.full((self.vocab,), 1e-9, dtype=torch.float64)
        for tok, value in self.probs.get(tuple(prefix), {EOS: 1.0}).items():
            p[tok] = value
        return p.log()


def _src(rows: list[list[int]]) -> tuple[Tensor, Tensor]:
    width = max(len(r) for r in rows)
    src = torch.tensor([r + [PAD] * (width - len(r)) for r in rows])
    return src, torch.tensor([len(r) for r in rows])


def _exhaustive(model: PrefixModel, src_row: list[int], max_len: int, alpha: float = 0.0):
    """Every output of at most max_len tokens (ending in <eos>, or cut at max_len), scored."""
    results = []

    def walk(prefix: list[int], logp: float) -> None:
        log_probs = torch.log_softmax(model.logits_for(src_row, prefix), -1)
        results.append((prefix, logp + float(log_probs[EOS]), len(prefix) + 1))
        for tok in range(model.vocab):
            if tok == EOS:
                continue
            if len(prefix) + 1 == max_len:
                results.append((prefix + [tok], logp + float(log_probs[tok]), max_len))
            else:
                walk(prefix + [tok], logp + float(log_probs[tok]))

    walk([], 0.0)
    scored = [(toks, lp / (n**alpha) if alpha else lp) for toks, lp, n in results]
    return sorted(scored, key=lambda c: c[1], reverse=True)


# --------------------------------------------------------------------------- greedy


def test_protocol_is_satisfied() -> None:
    assert isinstance(TinyGRUSeq2Seq(), Seq2SeqModel)
    assert isinstance(PrefixModel(), StepDecoder) and not isinstance(PrefixModel(), Seq2SeqModel)
    # isinstance only checks that the names exist: check that the course's models also keep
    # the contract's behaviour (shapes, and reorder_state picking rows).
    from course_lib.seq2seq import AttentionSeq2Seq, Seq2Seq, Seq2SeqConfig
    from course_lib.transformer import Transformer, TransformerConfig

    torch.manual_seed(0)
    gru = Seq2SeqConfig(10, 10, embed_size=8, num_hiddens=16, num_layers=1, dropout=0.0)
    models = [TinyGRUSeq2Seq(), Seq2Seq(gru), AttentionSeq2Seq(gru),
              Transformer(TransformerConfig(10, 10, d_model=8, num_heads=2, d_ff=16, num_layers=1, dropout=0.0))]
    src, valid = _src([[4, 5, 6, 2], [7, 2]])
    for model in models:
        assert isinstance(model, Seq2SeqModel), type(model).__name__
        model.eval()
        with torch.no_grad():
            state = model.encode(src, valid)
            logits, state = model.decode_step(torch.full((2,), BOS), state)
            assert logits.dim() == 2 and logits.shape[0] == 2  # (B, V)
            swapped = model.reorder_state(state, torch.tensor([1, 0]))
            nxt, _ = model.decode_step(torch.tensor([5, 6]), state)
            nxt_swapped, _ = model.decode_step(torch.tensor([6, 5]), swapped)
            torch.testing.assert_close(nxt_swapped, nxt.flip(0))


def test_greedy_matches_teacher_forced_argmax_and_batching() -> None:
    torch.manual_seed(0)
    model = TinyGRUSeq2Seq()
    src, valid = _src([[4, 5, 6, 2], [7, 2], [3, 3, 8, 8, 5, 2]])
    out = greedy_decode(model, src, valid, bos_id=BOS, eos_id=EOS, max_len=6)
    assert isinstance(out, list) and len(out) == 3
    with torch.no_grad():
        for b, tokens in enumerate(out):
            # Independent check: feeding <bos> + the prefix with teacher forcing, each
            # generated token is the argmax of the last position.
            fed = [BOS]
            for tok in tokens:
                logits = model(src[b : b + 1, : valid[b]], valid[b : b + 1], torch.tensor([fed]))
                assert int(logits[0, -1].argmax()) == tok
                fed.append(tok)
            if len(tokens) < 6:  # stopped: the next argmax is <eos>
                logits = model(src[b : b + 1, : valid[b]], valid[b : b + 1], torch.tensor([fed]))
                assert int(logits[0, -1].argmax()) == EOS
            # Decoding one row alone (without padding) gives the same tokens.
            alone = greedy_decode(model, src[b : b + 1, : valid[b]], valid[b : b + 1], bos_id=BOS, eos_id=EOS, max_len=6)
            assert alone == [tokens]
    assert model.training  # the mode is restored


def test_greedy_stops_per_row_at_eos() -> None:
    model = TableModel({(): {3: 0.9, EOS: 0.1}, (3,): {4: 0.9, EOS: 0.1}, (3, 4): {EOS: 0.9, 3: 0.1}})
    src, valid = _src([[3], [3, 4]])
    assert greedy_decode(model, src, valid, bos_id=BOS, eos_id=EOS, max_len=10) == [[3, 4], [3, 4]]
    assert greedy_decode(model, src, valid, bos_id=BOS, eos_id=EOS, max_len=1) == [[3], [3]]
    loop = TableModel({(): {3: 1.0}, (3,): {3: 1.0}, (3, 3): {3: 1.0}})
    assert greedy_decode(loop, src, valid, bos_id=BOS, eos_id=EOS, max_len=3) == [[3, 3, 3]] * 2


def test_greedy_returns_attention_per_row() -> None:
    torch.manual_seed(0)
    model = TinyGRUSeq2Seq()
    src, valid = _src([[4, 5, 6, 2], [7, 2]])
    tokens, attention = greedy_decode(model, src, valid, bos_id=BOS, eos_id=EOS, max_len=5, return_attention=True)
    for b in range(2):
        steps = len(tokens[b]) + (1 if len(tokens[b]) < 5 else 0)  # + the step that produced <eos>
        assert attention[b].shape == (steps, 4)
        torch.testing.assert_close(attention[b].sum(-1), torch.ones(steps))
        assert (attention[b][:, int(valid[b]) :] == 0).all()  # padding gets no weight
    _, none = greedy_decode(PrefixModel(), src, valid, bos_id=BOS, eos_id=EOS, max_len=3, return_attention=True)
    assert none == [None, None]


def test_bad_shapes_raise() -> None:
    model = PrefixModel()
    with pytest.raises(ValueError, match=r"\(B, S\)"):
        greedy_decode(model, torch.tensor([3, 4]), torch.tensor([2]), bos_id=BOS, eos_id=EOS, max_len=3)
    with pytest.raises(ValueError, match=r"\(B,\)"):
        greedy_decode(model, torch.tensor([[3, 4]]), torch.tensor([2, 2]), bos_id=BOS, eos_id=EOS, max_len=3)
    with pytest.raises(ValueError, match="beam_search_batch"):
        beam_search(model, *_src([[3], [4]]), bos_id=BOS, eos_id=EOS, beam_size=2, max_len=3)


# --------------------------------------------------------------------------- beam search


@pytest.mark.parametrize("seed", range(4))
def test_beam_size_one_is_greedy(seed: int) -> None:
    model = PrefixModel(vocab=6, seed=seed, eos_bias=0.5)
    src, valid = _src([[3, 4, 5], [5], [4, 4, 3, 3]])
    greedy = greedy_decode(model, src, valid, bos_id=BOS, eos_id=EOS, max_len=7)
    beams = beam_search_batch(model, src, valid, bos_id=BOS, eos_id=EOS, beam_size=1, max_len=7)
    assert [b[0][0] for b in beams] == greedy
    torch.manual_seed(seed)
    gru = TinyGRUSeq2Seq()
    greedy = greedy_decode(gru, src, valid, bos_id=BOS, eos_id=EOS, max_len=7)
    beams = beam_search_batch(gru, src, valid, bos_id=BOS, eos_id=EOS, beam_size=1, max_len=7)
    assert [b[0][0] for b in beams] == greedy


@pytest.mark.slow  # 0.38 s of CPU in its costliest case (a fast test stays under 0.1 s: course_tools/tiers.py)
@pytest.mark.parametrize("alpha", [0.0, 0.75])
def test_full_beam_equals_exhaustive_search(alpha: float) -> None:
    vocab, max_len = 4, 4
    model = PrefixModel(vocab=vocab, seed=3, eos_bias=0.3)
    src, valid = _src([[3, 3], [2, 3, 1]])
    results = beam_search_batch(model, src, valid, bos_id=BOS, eos_id=EOS, beam_size=vocab**max_len,
                                max_len=max_len, length_penalty=alpha, n_best=12)
    for b, row in enumerate(results):
        expected = _exhaustive(model, src[b, : valid[b]].tolist(), max_len, alpha)[:12]
        assert [t for t, _ in row] == [t for t, _ in expected]
        assert [s for _, s in row] == pytest.approx([s for _, s in expected], abs=1e-9)
    # The single-sentence API gives the same as the batched one.
    single = beam_search(model, src[1:, : valid[1]], valid[1:], bos_id=BOS, eos_id=EOS, beam_size=vocab**max_len,
                         max_len=max_len, length_penalty=alpha, n_best=12)
    assert single == results[1]


def test_small_beam_scores_are_log_probs_and_sorted() -> None:
    model = PrefixModel(vocab=6, seed=1, eos_bias=0.5)
    src, valid = _src([[4, 5]])
    hyps = beam_search(model, src, valid, bos_id=BOS, eos_id=EOS, beam_size=3, max_len=6)
    assert len(hyps) == 3
    scores = [s for _, s in hyps]
    assert scores == sorted(scores, reverse=True)
    for tokens, score in hyps:
        ended = tokens + [EOS] if len(tokens) < 6 else tokens
        assert score == pytest.approx(sequence_log_prob(model, src, valid, ended, bos_id=BOS), abs=1e-9)
    # Beam 3 is never worse than greedy (its best is at least greedy's score here).
    greedy = greedy_decode(model, src, valid, bos_id=BOS, eos_id=EOS, max_len=6)[0]
    greedy_score = sequence_log_prob(model, src, valid, greedy + [EOS] if len(greedy) < 6 else greedy, bos_id=BOS)
    assert scores[0] >= greedy_score - 1e-12


def test_beam_two_beats_greedy() -> None:
    A, B = 3, 4
    # Greedy takes A (0.5), then A (0.36): P(A A <eos>) = 0.18.
    # Beam 2 also keeps B (0.4), then <eos> (0.9): P(B <eos>) = 0.36.
    model = TableModel({
        (): {A: 0.5, B: 0.4, EOS: 0.1},
        (A,): {A: 0.36, B: 0.34, EOS: 0.30},
        (B,): {EOS: 0.9, A: 0.05, B: 0.05},
    })
    src, valid = _src([[3]])
    greedy = greedy_decode(model, src, valid, bos_id=BOS, eos_id=EOS, max_len=5)[0]
    assert greedy == [A, A]
    assert beam_search(model, src, valid, bos_id=BOS, eos_id=EOS, beam_size=1, max_len=5)[0][0] == greedy
    hyps = beam_search(model, src, valid, bos_id=BOS, eos_id=EOS, beam_size=2, max_len=5)
    assert hyps[0][0] == [B] and hyps[0][1] == pytest.approx(math.log(0.36))
    assert hyps[1][0] == [A, A] and hyps[1][1] == pytest.approx(math.log(0.18))


def test_beam_one_ignores_an_eos_that_is_not_the_best_candidate() -> None:
    A, B = 3, 4
    # <eos> first has P = 0.4 > P(A B <eos>) = 0.3, but greedy takes A (0.6) and never
    # looks back; beam 1 must do the same rather than keep the second-best <eos>.
    model = TableModel({(): {A: 0.6, EOS: 0.4}, (A,): {B: 0.5, A: 0.4, EOS: 0.1}})
    src, valid = _src([[3]])
    greedy = greedy_decode(model, src, valid, bos_id=BOS, eos_id=EOS, max_len=5)[0]
    assert greedy == [A, B]
    hyps = beam_search(model, src, valid, bos_id=BOS, eos_id=EOS, beam_size=1, max_len=5)
    assert hyps == [([A, B], pytest.approx(math.log(0.3)))]
    assert beam_search(model, src, valid, bos_id=BOS, eos_id=EOS, beam_size=2, max_len=5)[0][0] == []


# --------------------------------------------------------------------------- translate


class ToyVocab:
    def __init__(self, words: list[str]) -> None:
        self.itos = ["<pad>", "<bos>", "<eos>", "<unk>"] + words
        self.stoi = {w: i for i, w in enumerate(self.itos)}
        self.pad, self.bos, self.eos, self.unk = 0, 1, 2, 3

    def encode(self, tokens: list[str]) -> list[int]:
        return [self.stoi.get(t, self.unk) for t in tokens]

    def decode(self, ids: list[int]) -> list[str]:
        out = []
        for i in ids:
            if i == self.eos:
                break
            if i > self.unk:
                out.append(self.itos[i])
        return out


def test_translate_greedy_and_beam() -> None:
    vocab = ToyVocab(["a", "b", "c", "d", "e"])
    model = PrefixModel(vocab=len(vocab.itos), seed=5, eos_bias=1.0)
    sentences = ["a b c", "d", "e e a b"]
    out = translate(model, sentences, vocab, vocab, str.split, max_len=6)
    for sentence, text in zip(sentences, out):
        ids = vocab.encode(sentence.split()) + [vocab.eos]
        src, valid = _src([ids])
        expected = greedy_decode(model, src, valid, bos_id=BOS, eos_id=EOS, max_len=6)[0]
        assert text == " ".join(vocab.decode(expected))
    assert translate(model, sentences[1:2], vocab, vocab, str.split, max_len=6) == out[1:2]  # no padding effect
    beam = translate(model, sentences, vocab, vocab, str.split, max_len=6, beam_size=3)
    for sentence, text in zip(sentences, beam):
        src, valid = _src([vocab.encode(sentence.split()) + [vocab.eos]])
        best = beam_search(model, src, valid, bos_id=BOS, eos_id=EOS, beam_size=3, max_len=6)[0][0]
        assert text == " ".join(vocab.decode(best))
    assert translate(model, [], vocab, vocab, str.split, max_len=6) == []


def test_translate_detokenizes_when_asked() -> None:
    from course_lib.data import detokenize, tokenize

    words = ["je", "l'", "ai", "vu", "aujourd'hui", ",", "qu'", "il", "soit", "là", "."]
    vocab = ToyVocab(words)

    class Scripted:
        """Emits ``words`` then <eos>, whatever the source."""

        def encode(self, src, src_valid_lens):
            return torch.zeros(src.shape[0], dtype=torch.long)

        def decode_step(self, prev, step):
            logits = torch.full((prev.shape[0], len(vocab.itos)), -10.0)
            idx = int(step[0])
            logits[:, vocab.stoi[words[idx]] if idx < len(words) else vocab.eos] = 10.0
            return logits, step + 1

        def reorder_state(self, state, index):
            return state[index]

    raw = translate(Scripted(), ["x"], vocab, vocab, str.split, max_len=20)
    assert raw == ["je l' ai vu aujourd'hui , qu' il soit là ."]
    text = translate(Scripted(), ["x"], vocab, vocab, str.split, max_len=20, detokenize=detokenize)
    assert text == ["je l'ai vu aujourd'hui, qu'il soit là."]
    assert tokenize(text[0]) == words  # readable, and the same tokens


def _small_transformer(max_len: int):
    from course_lib.transformer import Transformer, TransformerConfig

    torch.manual_seed(0)
    return Transformer(TransformerConfig(12, 12, d_model=16, num_heads=2, d_ff=32, num_layers=1,
                                         dropout=0.0, max_len=max_len)).eval()


class CountingEncodes:
    """Wraps a model and counts ``encode`` calls (work done before any decoding step)."""

    def __init__(self, model) -> None:
        self.model, self.config, self.encodes = model, model.config, 0

    def encode(self, src, src_valid_lens):
        self.encodes += 1
        return self.model.encode(src, src_valid_lens)

    def decode_step(self, prev, state):
        return self.model.decode_step(prev, state)

    def reorder_state(self, state, index):
        return self.model.reorder_state(state, index)


def test_decoding_beyond_the_model_positions_fails_before_any_work() -> None:
    from course_lib.decoding import position_limit

    model = CountingEncodes(_small_transformer(max_len=6))
    assert position_limit(model) == 6 and position_limit(PrefixModel(vocab=8, seed=0)) is None
    src, valid = _src([[4, 5, 2]])
    with pytest.raises(ValueError, match=r"max_len=7 .* at most 6 positions"):
        greedy_decode(model, src, valid, bos_id=BOS, eos_id=EOS, max_len=7)
    with pytest.raises(ValueError, match=r"max_len=9 .* at most 6 positions"):
        beam_search_batch(model, src, valid, bos_id=BOS, eos_id=EOS, beam_size=2, max_len=9)
    long_src, long_valid = _src([[4] * 7 + [2]])
    with pytest.raises(ValueError, match="src has 8 positions"):
        greedy_decode(model, long_src, long_valid, bos_id=BOS, eos_id=EOS, max_len=3)
    assert model.encodes == 0  # nothing was computed before the error
    assert len(greedy_decode(model, src, valid, bos_id=BOS, eos_id=EOS, max_len=6)[0]) <= 6


def test_translate_truncates_long_sources_and_caps_max_len_with_warnings() -> None:
    vocab = ToyVocab([str(i) for i in range(8)])
    model = _small_transformer(max_len=6)
    long, short = " ".join(["1", "2", "3", "4", "5", "6", "7"]), "1 2"
    with pytest.warns(UserWarning, match=r"1 source sentence\(s\) .*truncated"):
        out = translate(model, [short, long], vocab, vocab, str.split, max_len=6)
    # the long source was cut to its first 5 tokens + <eos>; the short one is unaffected
    assert out == translate(model, [short, "1 2 3 4 5"], vocab, vocab, str.split, max_len=6)
    with pytest.warns(UserWarning, match="max_len=50 exceeds the model's 6 positions"):
        capped = translate(model, [short], vocab, vocab, str.split, max_len=50)
    assert capped == out[:1]


def test_encode_sources_pads_right_and_ends_with_eos() -> None:
    vocab = ToyVocab(["a", "b", "c"])
    src, valid = encode_sources(["a b c", "b"], vocab, str.split)
    assert src.tolist() == [vocab.encode(["a", "b", "c"]) + [EOS], vocab.encode(["b"]) + [EOS, 0, 0]]
    assert valid.tolist() == [4, 2] and src.dtype == valid.dtype == torch.long
    no_eos, lens = encode_sources(["a b c", "b"], vocab, str.split, append_eos=False)
    assert no_eos.shape == (2, 3) and lens.tolist() == [3, 1]


def test_decode_sentences_in_batches_equals_one_call_per_sentence() -> None:
    vocab = ToyVocab(["a", "b", "c", "d", "e"])
    model = PrefixModel(vocab=len(vocab.itos), seed=5, eos_bias=1.0)
    sentences = ["a b c", "d", "e e a b", "c a", "b"]
    got = decode_sentences(model, sentences, vocab, str.split, bos_id=BOS, eos_id=EOS, max_len=6, batch_size=2)
    for sentence, ids in zip(sentences, got):
        src, valid = encode_sources([sentence], vocab, str.split)
        assert ids == greedy_decode(model, src, valid, bos_id=BOS, eos_id=EOS, max_len=6)[0]
