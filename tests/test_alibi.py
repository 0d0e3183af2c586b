"""Tests for course_lib.alibi: ALiBi's slopes and bias (Press et al., 2022), alone and in GQA."""

from __future__ import annotations

import math

import pytest
import torch

from course_lib.alibi import ALiBi, alibi_bias, alibi_slopes
from course_lib.gqa import GroupedQueryAttention
from course_lib.multihead import KVCache, split_heads

TIER = "fast"  # course_tools/tiers.py

F64 = torch.float64


@pytest.mark.slow  # 0.89 s of CPU (a fast test stays under 0.1 s: course_tools/tiers.py)
def test_slopes_are_the_papers_geometric_sequence():
    # the paper's values for 8 heads: 1/2, 1/4, ..., 1/256
    torch.testing.assert_close(alibi_slopes(8), torch.tensor([2.0 ** -k for k in range(1, 9)], dtype=F64))
    for heads in (1, 2, 4, 16, 6):
        slopes = alibi_slopes(heads)
        ratios = slopes[1:] / slopes[:-1]
        torch.testing.assert_close(ratios, torch.full_like(ratios, 2.0 ** (-8 / heads)))  # geometric
        assert math.isclose(float(slopes[0]), 2.0 ** (-8 / heads)) and math.isclose(float(slopes[-1]), 2.0 ** -8)
    with pytest.raises(ValueError, match="num_heads must be positive"):
        alibi_slopes(0)


def test_bias_is_minus_slope_times_distance():
    bias = alibi_bias(2, 4, dtype=F64)  # (H, Q, K)
    slopes = alibi_slopes(2)
    for h in range(2):
        for i in range(4):
            for j in range(4):
                assert float(bias[h, i, j]) == pytest.approx(-float(slopes[h]) * abs(i - j))
    # cached decoding: the queries are the last Q positions, so the rows are the last rows of the square bias
    torch.testing.assert_close(alibi_bias(2, 3, 7, dtype=F64), alibi_bias(2, 7, dtype=F64)[:, -3:])
    with pytest.raises(ValueError, match="num_keys >= num_queries"):
        alibi_bias(2, 5, 3)


def test_softmax_depends_only_on_the_distance_and_a_shift_changes_nothing():
    # ALiBi is relative: adding the same offset to every position leaves the bias unchanged,
    # and a row's bias differs from -m * distance only by a constant, which the softmax ignores
    module = ALiBi(4)
    assert module.slopes.dtype == torch.float32 and not module.slopes.requires_grad
    assert "slopes" not in module.state_dict()  # fixed by the formula: nothing to load or train
    torch.testing.assert_close(module(5, 9)[:, :, 4:], module(5, 5))
    scores = torch.randn(4, 5, 5)
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    weights = torch.softmax((scores + module(5)).masked_fill(~causal, float("-inf")), dim=-1)
    equal_scores = torch.softmax(module(5).masked_fill(~causal, float("-inf")), dim=-1)
    # with equal content scores, the nearer key always gets more weight (steeper for larger slopes)
    assert torch.all(equal_scores[:, 4, 1:] > equal_scores[:, 4, :-1])
    assert torch.all(weights.sum(-1) - 1 < 1e-6)


def test_gqa_with_alibi_adds_the_bias_to_its_scores_and_caches_consistently():
    torch.manual_seed(0)
    gqa = GroupedQueryAttention(16, 4, 2, alibi=True).double().eval()
    gqa.record_attention = True
    x = torch.randn(2, 6, 16, dtype=F64)
    out = gqa(x, x, x, is_causal=True)
    # by hand: softmax(q k^T / sqrt(D) + bias, causal) v
    q = split_heads(gqa.q_proj(x), 4)
    k = split_heads(gqa.k_proj(x), 2).repeat_interleave(2, dim=1)
    v = split_heads(gqa.v_proj(x), 2).repeat_interleave(2, dim=1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(4) + alibi_bias(4, 6, dtype=F64)
    scores = scores.masked_fill(~torch.ones(6, 6, dtype=torch.bool).tril(), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    torch.testing.assert_close(gqa.attention_weights, weights)
    expected = gqa.out_proj((weights @ v).transpose(1, 2).reshape(2, 6, 16))
    torch.testing.assert_close(out, expected)
    # the fused path (no weights) gives the same output
    gqa.record_attention = False
    torch.testing.assert_close(gqa(x, x, x, is_causal=True), out)
    # step by step with a cache: the new query sits at position t, its bias row is that of position t
    cache = KVCache()
    first = gqa(x[:, :4], x[:, :4], x[:, :4], is_causal=True, cache=cache)
    second = gqa(x[:, 4:], x[:, 4:], x[:, 4:], is_causal=True, cache=cache)
    torch.testing.assert_close(torch.cat([first, second], dim=1), out)


def test_without_alibi_the_bias_is_absent():
    torch.manual_seed(0)
    plain = GroupedQueryAttention(16, 4, 2).double().eval()
    with_alibi = GroupedQueryAttention(16, 4, 2, alibi=True).double().eval()
    with_alibi.load_state_dict(plain.state_dict())  # the same weights: the slopes are not saved
    x = torch.randn(1, 5, 16, dtype=F64)
    assert plain.alibi is None
    assert not torch.allclose(plain(x, x, x, is_causal=True), with_alibi(x, x, x, is_causal=True))
