"""Tests for course_lib.seq2seq: GRU encoder-decoder, Bahdanau and Luong attention."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from course_lib.seq2seq import (
    AttentionSeq2Seq,
    AttentionState,
    GRUEncoder,
    LuongSeq2Seq,
    LuongState,
    Seq2Seq,
    Seq2SeqConfig,
    Seq2SeqState,
)



TIER = "fast"  # course_tools/tiers.py


class BidirectionalAttentionSeq2Seq(AttentionSeq2Seq):
    """The attention model with Bahdanau et al.'s bidirectional encoder, as a class for parametrize."""

    def __init__(self, config: Seq2SeqConfig) -> None:
        super().__init__(config, bidirectional=True)


class LuongWithoutInputFeeding(LuongSeq2Seq):
    """Luong's decoder without input feeding, as a class for parametrize."""

    def __init__(self, config: Seq2SeqConfig) -> None:
        super().__init__(config, input_feeding=False)


MODELS = [Seq2Seq, AttentionSeq2Seq, BidirectionalAttentionSeq2Seq, LuongSeq2Seq, LuongWithoutInputFeeding]
SRC_V, TGT_V = 11, 13


def _model(cls, dtype=torch.float64, **kw):
    torch.manual_seed(0)
    cfg = Seq2SeqConfig(SRC_V, TGT_V, embed_size=6, num_hiddens=8, num_layers=2, dropout=0.3, **kw)
    return cls(cfg).to(dtype).eval()


def _batch(b=4, s=7, l=5, seed=1):
    g = torch.Generator().manual_seed(seed)
    lens = torch.tensor([s, 3, 1, 5][:b])
    src = torch.randint(4, SRC_V, (b, s), generator=g)
    src = src.masked_fill(torch.arange(s)[None, :] >= lens[:, None], 0)  # right padding
    tgt = torch.randint(4, TGT_V, (b, l), generator=g)
    tgt[:, 0] = 1  # <bos>
    return src, lens, tgt


def _step_through(model, src, lens, tgt):
    state = model.encode(src, lens)
    logits, weights = [], []
    for t in range(tgt.shape[1]):
        out, state = model.decode_step(tgt[:, t], state)
        logits.append(out)
        weights.append(getattr(model, "last_attention_weights", None))
    return torch.stack(logits, 1), weights, state


# --------------------------------------------------------------------------- shapes, errors


@pytest.mark.parametrize("cls", MODELS)
def test_shapes(cls):
    model = _model(cls)
    src, lens, tgt = _batch()
    assert model(src, lens, tgt).shape == (4, 5, TGT_V)
    state = model.encode(src, lens)
    logits, state = model.decode_step(tgt[:, 0], state)
    assert logits.shape == (4, TGT_V)
    assert state.hidden.shape == (2, 4, 8)
    if issubclass(cls, AttentionSeq2Seq):
        assert isinstance(state, (AttentionState, LuongState)) and state.enc_outputs.shape == (4, 7, 8)
        assert model.last_attention_weights.shape == (4, 7)
        model(src, lens, tgt)
        assert model.attention_weights.shape == (4, 5, 7)
    else:
        assert isinstance(state, Seq2SeqState) and state.context.shape == (4, 8)


@pytest.mark.parametrize("cls", MODELS)
def test_bad_inputs_raise_clear_errors(cls):
    model = _model(cls)
    src, lens, tgt = _batch()
    with pytest.raises(ValueError, match=r"\(B, S\)"):
        model(src[0], lens, tgt)  # missing batch axis
    with pytest.raises(ValueError, match="torch.long"):
        model(src.float(), lens, tgt)
    with pytest.raises(ValueError, match=r"shape \(B,\)"):
        model(src, lens[:2], tgt)
    with pytest.raises(ValueError, match=r"\[1, S=7\]"):
        model(src, torch.tensor([8, 3, 1, 5]), tgt)
    with pytest.raises(ValueError, match=r"\[1, S=7\]"):
        model(src, torch.tensor([0, 3, 1, 5]), tgt)
    with pytest.raises(ValueError, match="integers"):
        model(src, lens.float(), tgt)
    with pytest.raises(ValueError, match=r"\(B, L\)"):
        model(src, lens, tgt[0])
    with pytest.raises(ValueError, match="same batch size"):
        model(src, lens, tgt[:2])
    with pytest.raises(ValueError, match=r"prev_tokens must have shape \(B,\)"):
        model.decode_step(tgt[:, :1], model.encode(src, lens))
    with pytest.raises(ValueError):
        Seq2SeqConfig(10, 10, num_layers=0)
    with pytest.raises(ValueError):
        Seq2SeqConfig(10, 10, dropout=1.0)


# --------------------------------------------------------------------------- encoder


@pytest.mark.slow  # a parity test against d2l: importing d2l (pandas, its plotting) costs about 0.6 s of CPU
def test_encoder_matches_d2l_on_full_rows_and_ignores_padding():
    from course_lib.d2l_compat import import_d2l

    d2l = import_d2l()
    torch.manual_seed(0)
    ours = GRUEncoder(SRC_V, 6, 8, 2).double()
    theirs = d2l.Seq2SeqEncoder(SRC_V, 6, 8, 2).double()
    theirs.load_state_dict({k.replace("rnn.", "rnn.rnn.", 1) if k.startswith("rnn.") else k: v
                            for k, v in ours.state_dict().items()})
    src, lens, _ = _batch()
    out, state = ours(src, lens)
    assert out.shape == (4, 7, 8) and state.shape == (2, 4, 8)
    for b, n in enumerate(lens.tolist()):
        # Reference: D2L's encoder (time-major) on the row without its padding.
        ref_out, ref_state = theirs(src[b : b + 1, :n])
        torch.testing.assert_close(out[b, :n], ref_out[:, 0], rtol=0, atol=1e-12)
        torch.testing.assert_close(state[:, b], ref_state[:, 0], rtol=0, atol=1e-12)
        assert torch.all(out[b, n:] == 0)
    # D2L's encoder runs over the pads, so its final state of a padded row is different.
    _, d2l_state = theirs(src)
    assert not torch.allclose(d2l_state[:, 1], state[:, 1])


def _gru_by_hand(rnn: torch.nn.GRU, suffix: str, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # One GRU direction written out (PyTorch's equations, gates r, z, n), over x (T, E): outputs (T, H), last (H,)
    w_ih, w_hh = getattr(rnn, "weight_ih_l0" + suffix), getattr(rnn, "weight_hh_l0" + suffix)
    b_ih, b_hh = getattr(rnn, "bias_ih_l0" + suffix), getattr(rnn, "bias_hh_l0" + suffix)
    h = torch.zeros(rnn.hidden_size, dtype=x.dtype)
    outs = []
    for x_t in x:
        gi, gh = w_ih @ x_t + b_ih, w_hh @ h + b_hh
        i_r, i_z, i_n = gi.chunk(3)
        h_r, h_z, h_n = gh.chunk(3)
        r, z = torch.sigmoid(i_r + h_r), torch.sigmoid(i_z + h_z)
        n = torch.tanh(i_n + r * h_n)
        h = (1 - z) * n + z * h
        outs.append(h)
    return torch.stack(outs), h


def test_bidirectional_encoder_matches_two_grus_written_by_hand():
    torch.manual_seed(0)
    enc = GRUEncoder(SRC_V, 6, 8, 1, bidirectional=True).double()
    assert enc.rnn.hidden_size == 4  # h / 2 per direction
    src, lens, _ = _batch()
    out, state = enc(src, lens)
    assert out.shape == (4, 7, 8) and state.shape == (1, 4, 8)
    for b, n in enumerate(lens.tolist()):
        x = enc.embedding(src[b, :n])  # (n, E): the real tokens only
        fwd, fwd_last = _gru_by_hand(enc.rnn, "", x)
        bwd, bwd_last = _gru_by_hand(enc.rnn, "_reverse", x.flip(0))  # reads from the last real token
        torch.testing.assert_close(out[b, :n], torch.cat([fwd, bwd.flip(0)], dim=-1), rtol=0, atol=1e-12)
        torch.testing.assert_close(state[0, b], torch.cat([fwd_last, bwd_last]), rtol=0, atol=1e-12)
        assert torch.all(out[b, n:] == 0)


def test_bidirectional_encoder_state_halves_are_the_ends_of_the_outputs():
    # Two layers: the top layer's final state is the forward output at the last real token and
    # the backward output at the first one; every layer's state is (forward, backward) of that layer.
    torch.manual_seed(0)
    enc = GRUEncoder(SRC_V, 6, 8, 2, bidirectional=True).double().eval()
    src, lens, _ = _batch()
    out, state = enc(src, lens)
    assert state.shape == (2, 4, 8)
    last = out[torch.arange(4), lens - 1]  # (B, h)
    torch.testing.assert_close(state[-1, :, :4], last[:, :4], rtol=0, atol=0)
    torch.testing.assert_close(state[-1, :, 4:], out[:, 0, 4:], rtol=0, atol=0)
    _, raw = enc.rnn(enc.embedding(src[2:3, :1]))  # the one-token row, unpacked: (2N, 1, h/2)
    torch.testing.assert_close(state[:, 2], torch.cat([raw[0::2, 0], raw[1::2, 0]], dim=-1), rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="even"):
        GRUEncoder(SRC_V, 6, 7, 1, bidirectional=True)


def test_bidirectional_attention_model_reads_words_after_each_position():
    # A one-directional encoder's state at position 0 ignores the later words; the bidirectional one's does not.
    src, lens, _ = _batch()
    changed = src.clone()
    changed[0, 5] = 4 if src[0, 5] != 4 else 5  # a later real token of row 0 (valid length 7)
    for bidirectional, moves in ((False, False), (True, True)):
        torch.manual_seed(0)
        enc = GRUEncoder(SRC_V, 6, 8, 1, bidirectional=bidirectional).double()
        first, first_changed = enc(src, lens)[0][0, 0], enc(changed, lens)[0][0, 0]
        assert (not torch.equal(first, first_changed)) == moves
    torch.manual_seed(0)
    plain = AttentionSeq2Seq(Seq2SeqConfig(SRC_V, TGT_V, embed_size=6, num_hiddens=8, num_layers=1))
    torch.manual_seed(0)
    bi = AttentionSeq2Seq(Seq2SeqConfig(SRC_V, TGT_V, embed_size=6, num_hiddens=8, num_layers=1), bidirectional=True)
    count = lambda m: sum(p.numel() for p in m.encoder.rnn.parameters())
    assert count(bi) < count(plain)  # two GRUs of h/2 have fewer weights than one of h


# --------------------------------------------------------------------------- decoding interface


@pytest.mark.parametrize("cls", MODELS)
@pytest.mark.parametrize("dtype,atol", [(torch.float64, 1e-12), (torch.float32, 1e-5)])
def test_decode_step_loop_reproduces_forward(cls, dtype, atol):
    model = _model(cls, dtype)
    src, lens, tgt = _batch()
    full = model(src, lens, tgt)
    stepped, weights, _ = _step_through(model, src, lens, tgt)
    torch.testing.assert_close(stepped, full, rtol=0, atol=atol)
    if issubclass(cls, AttentionSeq2Seq):
        torch.testing.assert_close(torch.stack(weights, 1), model.attention_weights, rtol=0, atol=atol)
    # In training mode dropout is active: the two paths would differ, eval turns it off.
    model.train()
    assert not torch.equal(model(src, lens, tgt), model(src, lens, tgt))


@pytest.mark.parametrize("cls", MODELS)
def test_reorder_state_selects_and_repeats_rows(cls):
    model = _model(cls)
    src, lens, tgt = _batch()
    index = torch.tensor([2, 0, 0, 3, 1])
    state = model.reorder_state(model.encode(src, lens), index)
    ref_state = model.encode(src[index], lens[index])
    for t in range(3):
        logits, state = model.decode_step(tgt[index, t], state)
        ref_logits, ref_state = model.decode_step(tgt[index, t], ref_state)
        torch.testing.assert_close(logits, ref_logits, rtol=0, atol=1e-12)
    # Reordering in the middle of decoding: continue rows 3 and 1 only.
    half = model.reorder_state(state, torch.tensor([3, 4]))
    out, _ = model.decode_step(tgt[index[[3, 4]], 3], half)
    full, _ = model.decode_step(tgt[index, 3], state)
    torch.testing.assert_close(out, full[[3, 4]], rtol=0, atol=1e-12)
    with pytest.raises(ValueError):
        model.reorder_state(state, index[None])


# --------------------------------------------------------------------------- padding, attention


@pytest.mark.parametrize("cls", MODELS)
def test_padding_invariance(cls):
    model = _model(cls)
    src, lens, tgt = _batch()
    logits = model(src, lens, tgt)
    weights = getattr(model, "attention_weights", None)
    # Tokens beyond the valid length are ignored, whatever they are.
    beyond = torch.arange(src.shape[1])[None, :] >= lens[:, None]
    noisy = src.masked_scatter(beyond, torch.randint(4, SRC_V, (int(beyond.sum()),)))
    assert not torch.equal(noisy, src)
    assert torch.equal(model(noisy, lens, tgt), logits)
    # More padding columns change nothing either (up to rounding).
    wider = torch.cat([src, torch.zeros(4, 3, dtype=torch.long)], dim=1)
    torch.testing.assert_close(model(wider, lens, tgt), logits, rtol=0, atol=1e-12)
    if weights is not None:
        wide_weights = model.attention_weights  # (B, L, S + 3)
        torch.testing.assert_close(wide_weights[..., :7], weights, rtol=0, atol=1e-12)
        assert torch.all(wide_weights[..., 7:] == 0)
        beyond_w = (torch.arange(7)[None, :] >= lens[:, None])[:, None, :].expand_as(weights)  # (B, L, S)
        assert torch.all(weights[beyond_w] == 0) and torch.all(weights[~beyond_w] > 0)
    # Each row alone, unpadded, gives the same logits as in the padded batch.
    for b, n in enumerate(lens.tolist()):
        alone = model(src[b : b + 1, :n], lens[b : b + 1], tgt[b : b + 1])
        torch.testing.assert_close(alone[0], logits[b], rtol=0, atol=1e-12)
    # A token inside the valid length does change the output (the test can fail).
    changed = src.clone()
    changed[0, 0] = 4 if src[0, 0] != 4 else 5
    assert not torch.allclose(model(changed, lens, tgt)[0], logits[0])


def test_attention_weights_are_a_distribution_over_real_keys():
    model = _model(AttentionSeq2Seq)
    src, lens, tgt = _batch()
    model(src, lens, tgt)
    w = model.attention_weights
    torch.testing.assert_close(w.sum(-1), torch.ones(4, 5, dtype=w.dtype), rtol=0, atol=1e-12)
    assert torch.all(w >= 0)
    # Row with one real token: all weight on it.
    assert torch.all(w[2, :, 0] == 1)


def test_bahdanau_step_matches_hand_written_reference():
    model = _model(AttentionSeq2Seq)
    src, lens, tgt = _batch()
    state = model.encode(src, lens)
    logits, _ = model.decode_step(tgt[:, 0], state)
    dec, att = model.decoder, model.decoder.attention
    # score_j = w_v . tanh(W_q s + W_k h_j), masked with -inf beyond the valid length.
    q = state.hidden[-1]  # (B, h)
    h = state.enc_outputs  # (B, S, h)
    scores = torch.tanh((q @ att.W_q.weight.T)[:, None] + h @ att.W_k.weight.T)  # (B, S, h)
    scores = (scores @ att.w_v.weight.T).squeeze(-1)  # (B, S)
    scores = scores.masked_fill(torch.arange(7)[None] >= lens[:, None], -math.inf)
    alpha = F.softmax(scores, dim=-1)
    torch.testing.assert_close(model.last_attention_weights, alpha, rtol=0, atol=1e-12)
    context = (alpha[:, :, None] * h).sum(1)  # (B, h)
    x = torch.cat([dec.embedding(tgt[:, 0]), context], dim=-1)[:, None]  # (B, 1, E + h)
    out, _ = dec.rnn(x, state.hidden)
    torch.testing.assert_close(logits, dec.dense(out[:, 0]), rtol=0, atol=1e-12)


def test_attend_with_cached_keys_equals_additive_attention_module():
    model = _model(AttentionSeq2Seq)
    src, lens, tgt = _batch()
    state = model.encode(src, lens)
    query = torch.randn(4, 1, 8, dtype=torch.float64)
    fast = model.decoder.attend(query, state)
    fast_weights = model.decoder.attention.attention_weights
    slow = model.decoder.attention(query, state.enc_outputs, state.enc_outputs, lens)
    torch.testing.assert_close(fast, slow, rtol=0, atol=1e-12)
    torch.testing.assert_close(fast_weights, model.decoder.attention.attention_weights, rtol=0, atol=1e-12)


def test_plain_decoder_feeds_the_same_context_at_every_step():
    model = _model(Seq2Seq)
    src, lens, tgt = _batch()
    state = model.encode(src, lens)
    enc_out, enc_state = model.encoder(src, lens)
    torch.testing.assert_close(state.context, enc_state[-1], rtol=0, atol=0)
    _, _, final = _step_through(model, src, lens, tgt)
    assert torch.equal(final.context, state.context)
    assert not torch.allclose(final.hidden, state.hidden)



# --------------------------------------------------------------------------- Luong attention


def _luong_step_by_hand(model, tokens, state):
    """One step of Luong et al.'s decoder from the equations: (logits, h_t, h~_t, alpha)."""
    dec = model.decoder
    x = dec.embedding(tokens)  # (B, E)
    if dec.input_feeding:
        x = torch.cat([x, state.attentional], dim=-1)  # (B, E + h): [e(y_{t-1}); h~_{t-1}]
    out, hidden = dec.rnn(x[:, None], state.hidden)
    h_t = out[:, 0]  # (B, h): the query is the state *after* this step
    h = state.enc_outputs  # (B, S, h)
    scores = torch.einsum("bd,bsd->bs", h_t @ dec.attention.W_a.weight, h)  # h_t^T W_a h_j
    padded = torch.arange(h.shape[1])[None] >= state.src_valid_lens[:, None]
    alpha = F.softmax(scores.masked_fill(padded, -math.inf), dim=-1)  # (B, S)
    context = (alpha[:, :, None] * h).sum(1)  # (B, h)
    attentional = torch.tanh(torch.cat([context, h_t], dim=-1) @ dec.W_c.weight.T)  # h~_t = tanh(W_c [c_t; h_t])
    return dec.dense(attentional), hidden, attentional, alpha


@pytest.mark.parametrize("cls", [LuongSeq2Seq, LuongWithoutInputFeeding])
def test_luong_steps_match_hand_written_reference(cls):
    model = _model(cls)
    src, lens, tgt = _batch()
    state = model.encode(src, lens)
    assert isinstance(state, LuongState) and torch.equal(state.attentional, torch.zeros(4, 8, dtype=torch.float64))
    for t in range(3):
        ref_logits, ref_hidden, ref_attentional, ref_alpha = _luong_step_by_hand(model, tgt[:, t], state)
        logits, state = model.decode_step(tgt[:, t], state)
        torch.testing.assert_close(logits, ref_logits, rtol=0, atol=1e-12)
        torch.testing.assert_close(state.hidden, ref_hidden, rtol=0, atol=1e-12)
        torch.testing.assert_close(state.attentional, ref_attentional, rtol=0, atol=1e-12)
        torch.testing.assert_close(model.last_attention_weights, ref_alpha, rtol=0, atol=1e-12)
        # masked source positions get exactly zero weight; real ones share all of it
        padded = torch.arange(7)[None] >= lens[:, None]
        assert torch.all(ref_alpha[padded] == 0) and torch.all(ref_alpha[~padded] > 0)
        torch.testing.assert_close(ref_alpha.sum(-1), torch.ones(4, dtype=torch.float64), rtol=0, atol=1e-12)
    assert model.decoder.rnn.input_size == 6 + (8 if model.decoder.input_feeding else 0)


def test_input_feeding_puts_the_last_attentional_state_into_the_next_input():
    fed, unfed = _model(LuongSeq2Seq), _model(LuongWithoutInputFeeding)
    src, lens, tgt = _batch()
    for model in (fed, unfed):
        state = model.encode(src, lens)
        _, state = model.decode_step(tgt[:, 0], state)
        assert not torch.allclose(state.attentional, torch.zeros_like(state.attentional))
        # The same step 2 from a state whose h~_1 is replaced: with input feeding the next step
        # changes (the GRU reads h~_1), without it nothing changes (h~_1 is only an output).
        changed = LuongState(state.enc_outputs, state.src_valid_lens, state.hidden, state.projected_keys,
                             torch.randn_like(state.attentional))
        logits, _ = model.decode_step(tgt[:, 1], state)
        logits_changed, _ = model.decode_step(tgt[:, 1], changed)
        if model.decoder.input_feeding:
            assert not torch.allclose(logits, logits_changed)
        else:
            assert torch.equal(logits, logits_changed)
    # With input feeding, the first step's attention changes the second step's GRU input
    # (and so its attention weights): the two models differ from the second step on.
    fed_logits = fed(src, lens, tgt)
    torch.testing.assert_close(fed.decoder.attention_weights.sum(-1), torch.ones(4, 5, dtype=torch.float64),
                               rtol=0, atol=1e-12)
    state = fed.encode(src, lens)
    _, state = fed.decode_step(tgt[:, 0], state)
    x_fed = torch.cat([fed.decoder.embedding(tgt[:, 1]), state.attentional], dim=-1)  # (B, E + h)
    out, _ = fed.decoder.rnn(x_fed[:, None], state.hidden)
    torch.testing.assert_close(fed.decoder.attend(out, state)[1][:, 0], fed.attention_weights[:, 1],
                               rtol=0, atol=1e-12)
    assert fed_logits.shape == (4, 5, TGT_V)


def test_luong_attend_with_cached_keys_equals_multiplicative_attention_module():
    model = _model(LuongSeq2Seq)
    src, lens, tgt = _batch()
    state = model.encode(src, lens)
    queries = torch.randn(4, 3, 8, dtype=torch.float64)
    fast, fast_weights = model.decoder.attend(queries, state)
    slow = model.decoder.attention(queries, state.enc_outputs, state.enc_outputs, lens)
    torch.testing.assert_close(fast, slow, rtol=0, atol=1e-12)
    torch.testing.assert_close(fast_weights, model.decoder.attention.attention_weights, rtol=0, atol=1e-12)


# --------------------------------------------------------------------------- training and decoding


@pytest.mark.slow  # trains each model 40 epochs (about 1 s of CPU each): the slow tier, not fast
@pytest.mark.parametrize("cls", MODELS)
def test_overfits_a_tiny_copy_task_and_decodes_greedily(cls):
    from course_lib.data import build_vocabs, make_translation_loader
    from course_lib.tasks import copy_task_pairs
    from course_lib.decoding import beam_search, greedy_decode
    from course_lib.training import TrainConfig, fit, seq2seq_loss

    pairs = copy_task_pairs(32, min_len=1, max_len=5, alphabet="abcde", seed=0)
    src_vocab, tgt_vocab = build_vocabs(pairs)
    loader = make_translation_loader(pairs, src_vocab, tgt_vocab, batch_size=32, seed=0)
    torch.manual_seed(0)
    model = cls(Seq2SeqConfig(len(src_vocab), len(tgt_vocab), embed_size=16, num_hiddens=32,
                              num_layers=1, dropout=0.0))
    history = fit(model, loader, seq2seq_loss, TrainConfig(epochs=40, lr=2e-2, progress=False))
    assert history.epoch_loss[-1] < 0.05 and history.epoch_loss[0] > 1.5

    batch = next(iter(make_translation_loader(pairs, src_vocab, tgt_vocab, batch_size=32, shuffle=False)))
    out = greedy_decode(model, batch.src, batch.src_valid_lens, bos_id=1, eos_id=2, max_len=8,
                        return_attention=True)
    tokens, attention = out
    correct = sum(tgt_vocab.decode(t) == list(p[1]) for t, p in zip(tokens, pairs))
    assert correct >= 30, f"only {correct}/32 copied exactly"
    if issubclass(cls, AttentionSeq2Seq):
        a = attention[0]  # (steps, S): one row per generated token and the <eos> step
        assert a.shape == (len(tokens[0]) + 1, batch.src.shape[1])
        torch.testing.assert_close(a.sum(-1), torch.ones(a.shape[0]))
    # Beam search uses reorder_state; its best hypothesis is at least as likely as greedy's.
    hyps = beam_search(model, batch.src[:1], batch.src_valid_lens[:1], bos_id=1, eos_id=2,
                       beam_size=3, max_len=8)
    assert len(hyps) == 3 and hyps[0][1] >= hyps[-1][1]
    assert tgt_vocab.decode(hyps[0][0]) == list(pairs[0][1])


@pytest.mark.parametrize("cls", MODELS)
def test_int32_token_ids_work_as_in_the_transformer(cls):
    model = _model(cls)
    src, lens, tgt = _batch()
    torch.testing.assert_close(model(src.int(), lens, tgt.int()), model(src, lens, tgt), rtol=0, atol=0)
