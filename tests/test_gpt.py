"""Tests for course_lib.gpt: causal self-attention, KV cache, sampling, generation, masked LM."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_lib.gpt import (
    GPT,
    CausalSelfAttention,
    GPTConfig,
    KVCache,
    MaskedLM,
    MaskedLMConfig,
    mask_tokens,
    sample_next,
)

TIER = "fast"  # course_tools/tiers.py

V = 20


def make_gpt(block_size: int = 8, dropout: float = 0.0, seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    model = GPT(GPTConfig(V, block_size=block_size, n_layer=2, n_head=4, n_embd=16, dropout=dropout))
    with torch.no_grad():  # larger weights than GPT's 0.02 init, so that differences show
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0, 0.3)
    return model.double()


def tokens(b: int, t: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, V, (b, t), generator=torch.Generator().manual_seed(seed))


# ---------------------------------------------------------------- model


def test_shapes_and_initial_loss() -> None:
    torch.manual_seed(0)
    model = GPT(GPTConfig(V, block_size=8, n_layer=2, n_head=4, n_embd=16))
    idx = tokens(3, 8)
    logits, loss = model(idx)
    assert logits.shape == (3, 8, V) and loss is None
    assert model.lm_head.weight is model.wte.weight
    _, loss = model(idx, tokens(3, 8, seed=2))
    assert abs(loss.item() - math.log(V)) < 0.15  # small init: nearly uniform predictions
    logits, loss = make_gpt()(idx, tokens(3, 8, seed=2))
    torch.testing.assert_close(loss, F.cross_entropy(logits.reshape(-1, V), tokens(3, 8, seed=2).reshape(-1)))


def test_causal_self_attention_matches_torch_mha() -> None:
    torch.manual_seed(0)
    attn = CausalSelfAttention(GPTConfig(V, n_head=4, n_embd=16)).double()
    mha = nn.MultiheadAttention(16, 4, batch_first=True).double()
    with torch.no_grad():
        mha.in_proj_weight.copy_(attn.c_attn.weight)
        mha.in_proj_bias.copy_(attn.c_attn.bias.normal_())
        mha.out_proj.weight.copy_(attn.c_proj.weight)
        mha.out_proj.bias.copy_(attn.c_proj.bias.normal_())
    x = torch.randn(2, 6, 16, dtype=torch.double)
    future = torch.ones(6, 6, dtype=torch.bool).triu(diagonal=1)  # nn.MultiheadAttention: True = masked out
    expected, expected_w = mha(x, x, x, attn_mask=future, average_attn_weights=False)
    attn.record_attention = True
    torch.testing.assert_close(attn(x), expected)
    torch.testing.assert_close(attn.attention_weights, expected_w)


@pytest.mark.parametrize("prompt", [1, 3])
def test_written_out_attention_equals_the_fused_call(prompt: int) -> None:
    # CausalSelfAttention holds softmax(QK^T / sqrt(D)) V written out (when it records the
    # weights) and F.scaled_dot_product_attention (when not): the two agree in float64, without
    # a cache, with a prompt of several positions then one, and with several new positions
    # after cached ones (the offset mask).
    torch.manual_seed(0)
    attn = CausalSelfAttention(GPTConfig(V, n_head=4, n_embd=16)).double().eval()
    x = torch.randn(2, 7, 16, dtype=torch.double)
    outputs = {}
    for flag in (True, False):
        attn.record_attention = flag
        cache = KVCache()
        parts = [attn(x[:, :prompt], cache), attn(x[:, prompt:prompt + 1], cache), attn(x[:, prompt + 1:], cache)]
        outputs[flag] = (attn(x), torch.cat(parts, dim=1))
        assert (attn.attention_weights is not None) == flag
    for written, fused in zip(outputs[True], outputs[False]):
        torch.testing.assert_close(written, fused, rtol=0, atol=1e-12)
    torch.testing.assert_close(outputs[True][1], outputs[True][0], rtol=0, atol=1e-12)


def test_gpt_attention_takes_the_path_every_multihead_module_shares(monkeypatch) -> None:
    # one place computes multi-head attention and records its weights (multihead.attend_heads):
    # GPT's layers call it instead of a copy of their own
    import course_lib.gpt as gpt_module

    calls = []
    shared = gpt_module.attend_heads

    def spy(module, *args, **kwargs):
        calls.append(module)
        return shared(module, *args, **kwargs)

    monkeypatch.setattr(gpt_module, "attend_heads", spy)
    model = make_gpt().eval()
    model(tokens(2, 5))
    assert calls == [block.attn for block in model.layers()]
    assert all(isinstance(module, CausalSelfAttention) for module in calls)


@pytest.mark.parametrize("train", [True, False])
def test_future_tokens_change_no_earlier_logits(train: bool) -> None:
    model = make_gpt().train(train)
    idx = tokens(2, 8)
    changed = idx.clone()
    changed[:, 5:] = (changed[:, 5:] + 3) % V
    a, _ = model(idx)
    b, _ = model(changed)
    torch.testing.assert_close(a[:, :5], b[:, :5], rtol=0, atol=1e-12)
    assert (a[:, 5:] - b[:, 5:]).abs().amax() > 1e-3
    model.set_record_attention()
    model(idx)
    for w in model.attention_maps():
        assert w.shape == (2, 4, 8, 8) and torch.all(w.triu(diagonal=1) == 0)
    model.generate(idx[:, :2], 3)  # generation never records, and leaves the setting as it was
    assert model.attention_maps() == []  # the maps belong to the last pass, which recorded none
    assert all(block.attn.record_attention is True for block in model.layers())
    model.set_record_attention(None)  # the default: evaluation mode only
    model.train()
    model(idx)
    assert model.attention_maps() == []


def test_cache_equals_full_forward() -> None:
    model = make_gpt().eval()
    idx = tokens(3, 8)
    full, _ = model(idx)
    cache = KVCache()
    parts = [model(idx[:, :3], cache=cache)[0]]
    assert len(cache) == 3 and cache.keys[1].shape == (3, 4, 3, 4)
    for t in range(3, 8):  # then one token at a time, as in generation
        parts.append(model(idx[:, t:t + 1], cache=cache)[0])
    assert len(cache) == 8
    torch.testing.assert_close(torch.cat(parts, dim=1), full, rtol=0, atol=1e-10)
    with pytest.raises(ValueError, match="block_size"):
        model(idx[:, :1], cache=cache)


@pytest.mark.parametrize("top_k", [None, 4])
def test_cached_generation_equals_uncached(top_k: int | None) -> None:
    model = make_gpt(block_size=8, dropout=0.1).train()
    prompt = tokens(2, 3)
    # 3 + 9 tokens > block_size: the window slides, which the cached path must handle too
    runs = [model.generate(prompt, 9, top_k=top_k, use_cache=use_cache,
                           generator=torch.Generator().manual_seed(5)) for use_cache in (True, False)]
    assert runs[0].shape == (2, 12)
    assert torch.equal(runs[0][:, :3], prompt)
    assert torch.equal(runs[0], runs[1])
    assert model.training  # generate() restores the mode it found
    other = model.generate(prompt, 9, top_k=top_k, generator=torch.Generator().manual_seed(6))
    assert not torch.equal(other, runs[0])  # the generator matters


def test_generation_uses_the_cache() -> None:
    model = make_gpt(block_size=16).eval()
    seen: list[int] = []
    model.blocks[0].register_forward_pre_hook(lambda m, args: seen.append(args[0].shape[1]))
    model.generate(tokens(1, 4), 5)
    assert seen == [4, 1, 1, 1, 1]
    seen.clear()
    model.generate(tokens(1, 4), 3, use_cache=False)
    assert seen == [4, 5, 6]


# ---------------------------------------------------------------- sampling


def test_greedy_limits() -> None:
    logits = torch.randn(5, 30, generator=torch.Generator().manual_seed(0))
    argmax = logits.argmax(dim=-1)
    assert torch.equal(sample_next(logits, top_k=1), argmax)
    assert torch.equal(sample_next(logits, temperature=0.0), argmax)
    assert torch.equal(sample_next(logits, temperature=1e-4, generator=torch.Generator().manual_seed(1)), argmax)


def test_top_k_keeps_exactly_k_candidates() -> None:
    g = torch.Generator().manual_seed(0)
    logits = torch.tensor([[0.0, 3.0, 1.0, 2.0, -1.0, 2.5]]).repeat(4000, 1)
    samples = sample_next(logits, top_k=3, generator=g)
    assert set(samples.tolist()) == {1, 3, 5}
    ties = torch.zeros(4000, 6)  # all equal: still exactly k candidates
    assert len(set(sample_next(ties, top_k=2, generator=g).tolist())) == 2
    assert len(set(sample_next(logits, top_k=100, generator=g).tolist())) == 6


@pytest.mark.parametrize("temperature", [1.0, 2.0, 0.5])
def test_sample_frequencies_follow_tempered_softmax(temperature: float) -> None:
    logits = torch.tensor([1.0, 0.0, -1.0, 0.5])
    n = 20000
    samples = sample_next(logits.repeat(n, 1), temperature=temperature, generator=torch.Generator().manual_seed(0))
    freq = torch.bincount(samples, minlength=4).double() / n
    expected = torch.softmax(logits.double() / temperature, dim=0)
    assert torch.all((freq - expected).abs() < 4 * torch.sqrt(expected * (1 - expected) / n) + 1e-3)


def test_sampling_errors() -> None:
    with pytest.raises(ValueError, match="temperature"):
        sample_next(torch.zeros(1, 3), temperature=-1.0)
    with pytest.raises(ValueError, match="top_k"):
        sample_next(torch.zeros(1, 3), top_k=0)
    with pytest.raises(ValueError, match=r"\(B, V\)"):
        sample_next(torch.zeros(3))
    with pytest.raises(ValueError, match="divisible"):
        GPTConfig(V, n_head=3, n_embd=16)
    with pytest.raises(ValueError, match="block_size"):
        make_gpt(block_size=8)(tokens(1, 9))


@pytest.mark.slow  # trains a GPT 50 steps: the slow tier, not fast
def test_tiny_text_overfits() -> None:
    text = "attention is all you need. "
    chars = sorted(set(text))
    data = torch.tensor([chars.index(c) for c in text * 3])
    torch.manual_seed(0)
    model = GPT(GPTConfig(len(chars), block_size=16, n_layer=2, n_head=4, n_embd=32))
    starts = torch.arange(0, len(data) - 17, 2)
    x = torch.stack([data[s:s + 16] for s in starts])
    y = torch.stack([data[s + 1:s + 17] for s in starts])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(50):
        _, loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.25  # not 0: a window's first characters are ambiguous ("n" of "attention" or "need")
    out = model.generate(x[:1, :8], 30, top_k=1)[0]
    assert "".join(chars[i] for i in out.tolist()) == (text * 3)[:38]


# ---------------------------------------------------------------- BERT-style masked LM


def test_mask_tokens_follows_the_80_10_10_rule() -> None:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, 50, (300, 200), generator=g)
    ids[:, -20:] = 0  # padding is never selected
    ids[:, 0] = 1
    mask_id = 50
    inputs, labels = mask_tokens(ids, mask_id, 0.15, g, vocab_size=51)
    selected = labels != -100
    assert not selected[:, -20:].any() and not selected[:, 0].any()
    assert torch.equal(labels[selected], ids[selected])
    assert torch.equal(inputs[~selected], ids[~selected])
    assert abs(selected.float().mean().item() / (179 / 200) - 0.15) < 0.01
    n = selected.sum().item()
    masked = (inputs == mask_id) & selected
    kept = (inputs == ids) & selected
    assert abs(masked.sum().item() / n - 0.8) < 0.02
    # a random replacement can by chance equal the original token (1 time in 47)
    assert abs(kept.sum().item() / n - (0.1 + 0.1 / 47)) < 0.015
    replaced = selected & ~masked & ~kept
    assert inputs[replaced].min() >= 3 and inputs[replaced].max() < mask_id
    again = mask_tokens(ids, mask_id, 0.15, torch.Generator().manual_seed(7), vocab_size=51)
    same = mask_tokens(ids, mask_id, 0.15, torch.Generator().manual_seed(7), vocab_size=51)
    assert torch.equal(again[0], same[0]) and torch.equal(again[1], same[1])


def test_masked_lm_is_bidirectional_and_ignores_padding() -> None:
    torch.manual_seed(0)
    model = MaskedLM(MaskedLMConfig(V, max_len=10, d_model=16, num_heads=4, d_ff=32)).double().eval()
    ids = tokens(2, 10)
    valid = torch.tensor([10, 6])
    logits, _ = model(ids, valid)
    later = ids.clone()
    later[:, 5] = (later[:, 5] + 1) % V
    assert (model(later, valid)[0][:, :5] - logits[:, :5]).abs().amax() > 1e-3  # GPT would not change
    padded = ids.clone()
    padded[1, 6:] = 0
    torch.testing.assert_close(model(padded, valid)[0][1, :6], logits[1, :6], rtol=0, atol=1e-12)
    labels = torch.full_like(ids, -100)
    labels[0, 3], labels[1, 2] = 4, 7
    _, loss = model(ids, valid, labels)
    expected = -(torch.log_softmax(logits[0, 3], -1)[4] + torch.log_softmax(logits[1, 2], -1)[7]) / 2
    torch.testing.assert_close(loss, expected)
