"""Tests for course_lib.transformer: shapes, masks, cached decoding, PyTorch parity, training."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_lib.decoding import greedy_decode
from course_lib.multihead import KVCache
from course_lib.transformer import (
    AddNorm,
    PositionWiseFFN,
    Transformer,
    TransformerConfig,
    TransformerDecoderBlock,
    TransformerEncoderBlock,
)

TIER = "fast"  # course_tools/tiers.py

SRC_V, TGT_V = 11, 13


def make_model(norm_first: bool = False, dropout: float = 0.0, seed: int = 0, **kw) -> Transformer:
    torch.manual_seed(seed)
    cfg = TransformerConfig(SRC_V, TGT_V, d_model=16, num_heads=4, d_ff=32, num_layers=2,
                            dropout=dropout, max_len=24, norm_first=norm_first, **kw)
    return Transformer(cfg).double()


def make_batch(seed: int = 1) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, SRC_V, (3, 7), generator=g)
    valid = torch.tensor([7, 4, 2])
    src[1, 4:] = 0
    src[2, 2:] = 0
    tgt = torch.randint(3, TGT_V, (3, 6), generator=g)
    tgt[:, 0] = 1
    return src, valid, tgt


# ---------------------------------------------------------------- building blocks


def test_ffn_and_addnorm_formulas() -> None:
    torch.manual_seed(0)
    ffn = PositionWiseFFN(6, 10).double()
    x = torch.randn(2, 3, 6, dtype=torch.double)
    expected = torch.clamp(x @ ffn.dense1.weight.T + ffn.dense1.bias, min=0) @ ffn.dense2.weight.T + ffn.dense2.bias
    torch.testing.assert_close(ffn(x), expected)

    addnorm = AddNorm(6).double()
    with torch.no_grad():
        addnorm.norm.weight.uniform_(0.5, 1.5)
        addnorm.norm.bias.uniform_(-0.5, 0.5)
    y = torch.randn(2, 3, 6, dtype=torch.double)
    z = x + y
    normed = (z - z.mean(-1, keepdim=True)) / torch.sqrt(z.var(-1, unbiased=False, keepdim=True) + 1e-5)
    torch.testing.assert_close(addnorm(x, y), normed * addnorm.norm.weight + addnorm.norm.bias)
    with pytest.raises(ValueError, match="same shape"):
        addnorm(x, y[:, :2])
    # given the sub-layer instead of its output: post-norm applies it to X, pre-norm to norm(X)
    torch.testing.assert_close(addnorm(x, ffn), addnorm(x, ffn(x)))
    pre = AddNorm(6, norm_first=True).double()
    pre.load_state_dict(addnorm.state_dict())
    torch.testing.assert_close(pre(x, ffn), x + ffn(addnorm.norm(x)))
    with pytest.raises(ValueError, match="needs the sub-layer"):
        pre(x, y)


@pytest.mark.parametrize("norm_first", [False, True])
def test_blocks_run_through_addnorm(norm_first: bool) -> None:
    # The module lesson 7a builds is the one that runs: every sub-layer of both blocks, in both
    # norm orders and in cached decoding, goes through AddNorm.forward. A forward hook that
    # changes AddNorm's output must change the block's output, and it is called once per sub-layer.
    torch.manual_seed(0)
    enc = TransformerEncoderBlock(8, 2, 16, norm_first=norm_first).double().eval()
    dec = TransformerDecoderBlock(8, 2, 16, norm_first=norm_first).double().eval()
    x, memory = torch.randn(2, 4, 8, dtype=torch.double), torch.randn(2, 3, 8, dtype=torch.double)
    cross = KVCache()
    cross.update(0, *dec.cross_attention.project_key_value(memory, memory))
    runs = {"encoder": lambda: enc(x), "decoder": lambda: dec(x, memory),
            "decoder step": lambda: dec.step(x[:, :1], KVCache(), cross)}
    blocks = {"encoder": enc, "decoder": dec, "decoder step": dec}
    for name, run in runs.items():
        plain = run()
        calls: list[str] = []
        addnorms = [(n, m) for n, m in blocks[name].named_modules() if isinstance(m, AddNorm)]
        assert [n for n, _ in addnorms] == (["addnorm1", "addnorm2"] if name == "encoder"
                                            else ["addnorm1", "addnorm2", "addnorm3"])
        hooks = [m.register_forward_hook(lambda mod, args, out, n=n: (calls.append(n), out + 1.0)[1])
                 for n, m in addnorms]
        shifted = run()
        for h in hooks:
            h.remove()
        assert calls == [n for n, _ in addnorms], name
        assert (shifted - plain).abs().amax() > 0.1, name  # what AddNorm returns is what the block returns


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("use_mask", [False, True])
def test_encoder_block_matches_torch(norm_first: bool, use_mask: bool) -> None:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 4, 40, dropout=0.0, batch_first=True,
                                       norm_first=norm_first).double()
    with torch.no_grad():  # non-trivial LayerNorm parameters, so a swapped norm would show
        for norm in (layer.norm1, layer.norm2):
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.uniform_(-0.5, 0.5)
    block = TransformerEncoderBlock.from_torch(layer)
    assert block.norm_first == norm_first
    x = torch.randn(3, 5, 16, dtype=torch.double)
    mask = torch.tensor([[False] * 5, [False] * 3 + [True] * 2, [False] + [True] * 4]) if use_mask else None
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    ours, theirs = block(x1, None if mask is None else ~mask), layer(x2, src_key_padding_mask=mask)
    torch.testing.assert_close(ours, theirs)
    weights = torch.randn_like(ours)
    (ours * weights).sum().backward()
    (theirs * weights).sum().backward()
    torch.testing.assert_close(x1.grad, x2.grad)
    att, sa = block.attention, layer.self_attn
    g_q, g_k, g_v = sa.in_proj_weight.grad.chunk(3)
    b_q, b_k, b_v = sa.in_proj_bias.grad.chunk(3)
    pairs = [(att.q_proj.weight, g_q), (att.k_proj.weight, g_k), (att.v_proj.weight, g_v),
             (att.q_proj.bias, b_q), (att.v_proj.bias, b_v),
             (att.out_proj.weight, sa.out_proj.weight.grad),
             (block.ffn.dense1.weight, layer.linear1.weight.grad),
             (block.ffn.dense2.bias, layer.linear2.bias.grad),
             (block.addnorm1.norm.weight, layer.norm1.weight.grad),
             (block.addnorm2.norm.bias, layer.norm2.bias.grad)]
    for mine, ref_grad in pairs:
        torch.testing.assert_close(mine.grad, ref_grad)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_block_matches_torch(norm_first: bool) -> None:
    torch.manual_seed(0)
    layer = nn.TransformerDecoderLayer(16, 4, 40, dropout=0.0, batch_first=True,
                                       norm_first=norm_first).double()
    with torch.no_grad():
        for norm in (layer.norm1, layer.norm2, layer.norm3):
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.uniform_(-0.5, 0.5)
    block = TransformerDecoderBlock.from_torch(layer)
    x = torch.randn(3, 6, 16, dtype=torch.double, requires_grad=True)
    memory = torch.randn(3, 5, 16, dtype=torch.double, requires_grad=True)
    padding = torch.tensor([[False] * 5, [False] * 3 + [True] * 2, [False] + [True] * 4])
    future = nn.Transformer.generate_square_subsequent_mask(6, dtype=torch.double)
    ours = block(x, memory, ~padding)
    theirs = layer(x, memory, tgt_mask=future, tgt_is_causal=True, memory_key_padding_mask=padding)
    torch.testing.assert_close(ours, theirs)
    w = torch.randn_like(ours)
    grads = torch.autograd.grad((ours * w).sum(), [x, memory, block.cross_attention.k_proj.weight])
    ref = torch.autograd.grad((theirs * w).sum(), [x, memory, layer.multihead_attn.in_proj_weight])
    torch.testing.assert_close(grads[0], ref[0])
    torch.testing.assert_close(grads[1], ref[1])
    torch.testing.assert_close(grads[2], ref[2].chunk(3)[1])


def test_from_torch_rejects_gelu() -> None:
    layer = nn.TransformerEncoderLayer(8, 2, 16, activation="gelu", batch_first=True)
    with pytest.raises(ValueError, match="relu"):
        TransformerEncoderBlock.from_torch(layer)
    with pytest.raises(ValueError, match="relu"):
        TransformerDecoderBlock.from_torch(nn.TransformerDecoderLayer(8, 2, 16, activation="gelu"))


# ---------------------------------------------------------------- the whole model


def test_shapes_and_attention_maps() -> None:
    model = make_model().eval()  # the maps are recorded in evaluation mode
    src, valid, tgt = make_batch()
    logits = model(src, valid, tgt)
    assert logits.shape == (3, 6, TGT_V)
    maps = model.attention_maps()
    assert [tuple(w.shape) for w in maps["encoder_self"]] == [(3, 4, 7, 7)] * 2
    assert [tuple(w.shape) for w in maps["decoder_self"]] == [(3, 4, 6, 6)] * 2
    assert [tuple(w.shape) for w in maps["cross"]] == [(3, 4, 6, 7)] * 2
    for w in maps["encoder_self"] + maps["decoder_self"] + maps["cross"]:
        torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:-1], dtype=w.dtype))
    for w in maps["decoder_self"]:  # causal: nothing above the diagonal
        assert torch.all(w.triu(diagonal=1) == 0)
        assert torch.all(w.masked_select(torch.ones(6, 6, dtype=torch.bool).tril()) > 0)


def test_attention_weights_are_recorded_in_eval_only_unless_asked() -> None:
    model = make_model()  # training mode: the fused kernel, no weights formed
    src, valid, tgt = make_batch()
    model(src, valid, tgt)
    assert model.attention_maps() == {"encoder_self": [], "decoder_self": [], "cross": []}
    model.set_record_attention(True)  # always, training included
    trained = model(src, valid, tgt)
    assert [len(ws) for ws in model.attention_maps().values()] == [2, 2, 2]
    model.set_record_attention(False)  # never, evaluation included
    model.eval()
    evaluated = model(src, valid, tgt)
    assert all(ws == [] for ws in model.attention_maps().values())
    torch.testing.assert_close(trained, evaluated)  # dropout 0: recording changes no output
    model.set_record_attention(None)  # back to the default: evaluation mode only
    model(src, valid, tgt)
    assert [len(ws) for ws in model.attention_maps().values()] == [2, 2, 2]


def test_attention_is_zero_on_padded_source() -> None:
    model = make_model().eval()
    src, valid, tgt = make_batch()
    model(src, valid, tgt)
    maps = model.attention_maps()
    padded = torch.arange(7)[None, :] >= valid[:, None]  # (B, S)
    for w in maps["cross"] + maps["encoder_self"]:
        assert torch.all(w.masked_select(padded[:, None, None, :]) == 0)
        assert torch.all(w.masked_select(~padded[:, None, None, :]) > 0)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("train", [True, False])
def test_decoder_is_causal_in_train_and_eval(norm_first: bool, train: bool) -> None:
    model = make_model(norm_first).train(train)
    src, valid, tgt = make_batch()
    k = 3
    changed = tgt.clone()
    changed[:, k:] = (changed[:, k:] + 5) % TGT_V
    a, b = model(src, valid, tgt), model(src, valid, changed)
    torch.testing.assert_close(a[:, :k], b[:, :k], rtol=0, atol=1e-12)
    assert (a[:, k:] - b[:, k:]).abs().amax() > 1e-3


def test_padded_source_tokens_change_nothing() -> None:
    model = make_model().eval()
    src, valid, tgt = make_batch()
    noisy = src.clone()
    noisy[1, 4:] = torch.tensor([5, 6, 7])
    noisy[2, 2:] = 9
    torch.testing.assert_close(model(src, valid, tgt), model(noisy, valid, tgt), rtol=0, atol=1e-12)
    real = src.clone()
    real[1, 0] = 4 if src[1, 0] != 4 else 5
    assert (model(src, valid, tgt)[1] - model(real, valid, tgt)[1]).abs().amax() > 1e-3


@pytest.mark.parametrize("norm_first", [False, True])
def test_cached_decode_steps_equal_forward(norm_first: bool) -> None:
    model = make_model(norm_first).eval()
    src, valid, tgt = make_batch()
    with torch.no_grad():
        full = model(src, valid, tgt)
        state = model.encode(src, valid)
        steps = []
        for i in range(tgt.shape[1]):
            logits, state = model.decode_step(tgt[:, i], state)
            steps.append(logits)
            assert state.cache.keys[0].shape == (3, 4, i + 1, 4)  # one cached key per token
    torch.testing.assert_close(torch.stack(steps, dim=1), full, rtol=0, atol=1e-10)
    assert model.last_attention_weights.shape == (3, 2, 4, 7)  # (B, layers, H, S): one tensor


def test_reorder_state_then_step_equals_forward_on_reordered_batch() -> None:
    model = make_model().eval()
    src, valid, tgt = make_batch()
    index = torch.tensor([2, 0, 0, 1])
    with torch.no_grad():
        full = model(src[index], valid[index], tgt[index])
        state = model.encode(src, valid)
        logits0, state = model.decode_step(tgt[:, 0], state)
        state = model.reorder_state(state, index)
        rest = [logits0[index]]
        for i in range(1, tgt.shape[1]):
            logits, state = model.decode_step(tgt[index, i], state)
            rest.append(logits)
    torch.testing.assert_close(torch.stack(rest, dim=1), full, rtol=0, atol=1e-10)


def test_decoder_block_step_in_chunks() -> None:
    torch.manual_seed(0)
    block = TransformerDecoderBlock(8, 2, 16, norm_first=True).double().eval()
    x, memory = torch.randn(2, 5, 8, dtype=torch.double), torch.randn(2, 4, 8, dtype=torch.double)
    full = block(x, memory)
    cache, cross = KVCache(), KVCache()
    cross.update(0, *block.cross_attention.project_key_value(memory, memory))
    first = block.step(x[:, :3], cache, cross)
    second = block.step(x[:, 3:], cache, cross)  # two new queries after three cached positions
    torch.testing.assert_close(torch.cat([first, second], dim=1), full)
    assert len(cache) == 5


def test_decode_step_leaves_the_old_state_valid() -> None:
    # the cache grows in place, but decode_step hands back a new one: the state passed in can
    # be stepped again (as beam search and the decoding tests do) with the same result
    model = make_model().eval()
    src, valid, tgt = make_batch()
    with torch.no_grad():
        _, state = model.decode_step(tgt[:, 0], model.encode(src, valid))
        first, after = model.decode_step(tgt[:, 1], state)
        again, _ = model.decode_step(tgt[:, 1], state)
    assert len(state.cache) == 1 and len(after.cache) == 2
    torch.testing.assert_close(first, again, rtol=0, atol=0)


def test_positions_are_encoded() -> None:
    # Attention alone is blind to order: without positional encoding, a target of identical
    # tokens would give identical logits at every position, and a permuted source the same output.
    model = make_model().eval()
    src, valid, _ = make_batch()
    same = torch.full((3, 5), 7)
    logits = model(src, valid, same)
    assert (logits[:, 1:] - logits[:, :1]).abs().amax() > 1e-3
    swapped = src.clone()
    swapped[0, [0, 1]] = src[0, [1, 0]]
    assert src[0, 0] != src[0, 1]
    assert (model(swapped, valid, same)[0] - logits[0]).abs().amax() > 1e-3


def test_post_norm_and_pre_norm_differ() -> None:
    post, pre = make_model(False), make_model(True)
    pre_params = dict(pre.named_parameters())
    for name, p in post.named_parameters():
        assert torch.equal(p, pre_params[name]), name  # same weights: only the wiring differs
    src, valid, tgt = make_batch()
    assert (post(src, valid, tgt) - pre(src, valid, tgt)).abs().amax() > 1e-2


def test_tied_embeddings_share_the_matrix() -> None:
    tied, untied = make_model(tie_embeddings=True), make_model()
    assert tied.output.weight is tied.tgt_embedding.weight
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert count(untied) - count(tied) == TGT_V * 16


def test_clear_errors() -> None:
    with pytest.raises(ValueError, match="divisible by num_heads"):
        TransformerConfig(10, 10, d_model=30, num_heads=4)
    model = make_model()
    src, valid, tgt = make_batch()
    with pytest.raises(ValueError, match="max_len"):
        model(torch.ones(1, 25, dtype=torch.long), torch.tensor([25]), tgt[:1])
    with pytest.raises(ValueError, match="max_len"):
        model(src, valid, torch.ones(3, 30, dtype=torch.long))
    with pytest.raises(ValueError, match=r"\(B, S\)"):
        model(src.double(), valid, tgt)
    with pytest.raises(ValueError, match=r"src_valid_lens must have shape \(B,\)"):
        model(src, valid[:2], tgt)
    state = model.encode(src, valid)
    with pytest.raises(ValueError, match=r"prev_tokens must have shape \(B,\)"):
        model.decode_step(tgt[:2, 0], state)
    state.cache.update(0, *(torch.zeros(3, 4, 24, 4, dtype=torch.double),) * 2)  # 24 positions cached
    with pytest.raises(ValueError, match="max_len"):
        model.decode_step(tgt[:, 0], state)


def _reverse_task(n: int, gen: torch.Generator) -> tuple[torch.Tensor, ...]:
    lens = torch.randint(2, 6, (n,), generator=gen)
    src = torch.zeros(n, 5, dtype=torch.long)
    tgt_in = torch.zeros(n, 6, dtype=torch.long)
    tgt_out = torch.zeros(n, 6, dtype=torch.long)
    for i, length in enumerate(lens.tolist()):
        seq = torch.randint(4, 10, (length,), generator=gen)
        src[i, :length] = seq
        tgt_in[i, 0], tgt_in[i, 1:length + 1] = 1, seq.flip(0)
        tgt_out[i, :length], tgt_out[i, length] = seq.flip(0), 2
    return src, lens, tgt_in, tgt_out


@pytest.mark.slow  # trains a Transformer to overfit (about 1.5 s of CPU each): the slow tier, not fast
@pytest.mark.parametrize("norm_first", [False, True])
def test_tiny_reverse_task_overfits(norm_first: bool) -> None:
    torch.manual_seed(0)
    src, lens, tgt_in, tgt_out = _reverse_task(32, torch.Generator().manual_seed(0))
    model = Transformer(TransformerConfig(10, 10, d_model=32, num_heads=4, d_ff=64, num_layers=2,
                                          dropout=0.0, max_len=8, norm_first=norm_first))
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    losses = []
    for _ in range(50):
        loss = F.cross_entropy(model(src, lens, tgt_in).transpose(1, 2), tgt_out, ignore_index=0)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[0] > 1.5 and losses[-1] < 0.15, (losses[0], losses[-1])
    out = greedy_decode(model, src, lens, bos_id=1, eos_id=2, max_len=7)
    correct = sum(o == src[i, : lens[i]].flip(0).tolist() for i, o in enumerate(out))
    assert correct >= 30
