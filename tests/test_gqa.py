"""Tests for course_lib.gqa: grouped-query attention against MHA and PyTorch's enable_gqa."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from course_lib.gpt import GPT, GPTConfig
from course_lib.multihead import KVCache
from course_lib.gqa import GroupedQueryAttention, kv_cache_bytes_per_token, repeat_kv
from course_lib.multihead import MultiHeadAttention, split_heads

TIER = "fast"  # course_tools/tiers.py

F64 = torch.float64


def test_repeat_kv_order():
    x = torch.arange(2 * 3, dtype=F64).reshape(1, 3, 2, 1)  # heads 0, 1, 2
    out = repeat_kv(x, 2)
    assert out.shape == (1, 6, 2, 1)
    assert [int(out[0, h, 0, 0]) // 2 for h in range(6)] == [0, 0, 1, 1, 2, 2]  # copies adjacent
    torch.testing.assert_close(out, x.repeat_interleave(2, dim=1))
    assert repeat_kv(x, 1) is x


def test_groups_of_one_equal_multihead():
    mha = MultiHeadAttention(24, 4, dtype=F64)
    gqa = GroupedQueryAttention.from_multihead(mha)
    assert gqa.num_kv_heads == 4
    x, mem = torch.randn(2, 7, 24, dtype=F64), torch.randn(2, 9, 24, dtype=F64)
    torch.testing.assert_close(gqa(x, mem, mem), mha(x, mem, mem)[0], rtol=0, atol=1e-12)
    real = torch.tensor([[True] * 9, [True] * 5 + [False] * 4])
    torch.testing.assert_close(gqa(x, mem, mem, real_keys=real), mha(x, mem, mem, real_keys=real)[0])
    torch.testing.assert_close(gqa(x, x, x, is_causal=True), mha(x, x, x, is_causal=True)[0])


@pytest.mark.parametrize("heads, kv_heads", [(6, 3), (6, 2), (6, 1), (4, 4)])
def test_equals_pytorch_enable_gqa(heads, kv_heads):
    torch.manual_seed(1)
    gqa = GroupedQueryAttention(24, heads, kv_heads).double()
    x = torch.randn(2, 8, 24, dtype=F64)
    q = split_heads(gqa.q_proj(x), heads)  # (B, H, T, D)
    k = split_heads(gqa.k_proj(x), kv_heads)  # (B, G, T, D)
    v = split_heads(gqa.v_proj(x), kv_heads)
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    ref = gqa.out_proj(y.transpose(1, 2).reshape(2, 8, 24))
    torch.testing.assert_close(gqa(x, x, x, is_causal=True), ref)
    assert k.shape[1] == kv_heads


def test_parameters_and_cache_size():
    mha, gqa, mqa = (GroupedQueryAttention(64, 8, g, bias=False) for g in (8, 2, 1))
    assert sum(p.numel() for p in mha.parameters()) == 4 * 64 * 64
    assert sum(p.numel() for p in gqa.parameters()) == 2 * 64 * 64 + 2 * 64 * 2 * 8
    assert sum(p.numel() for p in mqa.parameters()) == 2 * 64 * 64 + 2 * 64 * 8
    assert kv_cache_bytes_per_token(12, 12, 64) == 2 * 12 * 12 * 64 * 4
    assert kv_cache_bytes_per_token(12, 4, 64, torch.float16) == 2 * 12 * 4 * 64 * 2
    # measured on the course's GPT: the cache grows by exactly the predicted bytes per token
    config = GPTConfig(vocab_size=11, block_size=32, n_layer=3, n_head=4, n_embd=32)
    model = GPT(config).eval()
    cache = KVCache()
    with torch.no_grad():
        model(torch.randint(11, (1, 10)), cache=cache)
    measured = sum(t.numel() * t.element_size() for t in cache.keys + cache.values)
    assert measured == 10 * kv_cache_bytes_per_token(3, 4, 8)


@pytest.mark.parametrize("rotary", [False, True])
def test_cached_decoding_equals_full_pass(rotary):
    torch.manual_seed(2)
    gqa = GroupedQueryAttention(16, 4, 2, rotary=rotary, rotary_max_len=32).double().eval()
    x = torch.randn(2, 9, 16, dtype=F64)
    full = gqa(x, x, x, is_causal=True)
    cache = KVCache()
    steps = [gqa(x[:, :5], x[:, :5], x[:, :5], is_causal=True, cache=cache)]
    for t in range(5, 9):
        steps.append(gqa(x[:, t: t + 1], x[:, t: t + 1], x[:, t: t + 1], is_causal=True, cache=cache))
    torch.testing.assert_close(torch.cat(steps, dim=1), full)
    assert cache.keys[0].shape == (2, 2, 9, 4)  # G = 2 heads cached, not H = 4


def test_cached_decoding_with_two_rotary_layers():
    # each layer reads its own number of cached positions (layer 0 is updated before layer 1 runs)
    torch.manual_seed(4)
    layers = [GroupedQueryAttention(16, 4, 2, rotary=True, rotary_max_len=32).double().eval() for _ in range(2)]

    def stack(x, cache=None):
        for i, layer in enumerate(layers):
            x = x + layer(x, x, x, is_causal=True, cache=cache, layer=i)
        return x

    x = torch.randn(1, 7, 16, dtype=F64)
    cache = KVCache()
    steps = [stack(x[:, :3], cache)] + [stack(x[:, t: t + 1], cache) for t in range(3, 7)]
    torch.testing.assert_close(torch.cat(steps, dim=1), stack(x))


def test_rotary_makes_scores_shift_invariant():
    torch.manual_seed(3)
    gqa = GroupedQueryAttention(16, 2, 1, rotary=True).double()
    x = torch.randn(1, 6, 16, dtype=F64)
    # the same tokens later in the sequence (after 3 others) give the same outputs with a
    # causal mask... only if nothing before them is visible, so compare without the prefix:
    prefix = torch.randn(1, 3, 16, dtype=F64)
    real = torch.ones(1, 9, dtype=torch.bool)
    real[:, :3] = False  # the prefix is padding
    shifted = gqa(torch.cat([prefix, x], 1), torch.cat([prefix, x], 1), torch.cat([prefix, x], 1),
                  real_keys=real)[:, 3:]
    torch.testing.assert_close(shifted, gqa(x, x, x))


def test_gradcheck_and_errors():
    gqa = GroupedQueryAttention(8, 4, 2).double()
    x = torch.randn(1, 3, 8, dtype=F64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: gqa(t, t, t, is_causal=True), (x,))
    with pytest.raises(ValueError, match="divisible by num_kv_heads"):
        GroupedQueryAttention(24, 6, 4)
    with pytest.raises(ValueError, match=r"\(B, L, E=8\)"):
        gqa(torch.randn(3, 8), x, x)


def test_records_attention_weights_like_every_attention_module():
    # the HeadsAttention contract: per-head weights (B, H, L, S) recorded in evaluation mode,
    # None in training (fused kernel); G = H gives MultiHeadAttention's weights
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4).double().eval()
    gqa = GroupedQueryAttention.from_multihead(mha).eval()
    x = torch.randn(2, 5, 16, dtype=F64)
    real = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    gqa(x, x, x, real_keys=real)
    _, expected = mha(x, x, x, real_keys=real, average_attn_weights=False)
    assert gqa.attention_weights is not None and gqa.attention_weights.shape == (2, 4, 5, 5)
    torch.testing.assert_close(gqa.attention_weights, expected, rtol=0, atol=1e-12)
    assert torch.all(gqa.attention_weights[1, :, :, 3:] == 0)  # padded keys: exactly zero weight
    gqa.train()(x, x, x)
    assert gqa.attention_weights is None
