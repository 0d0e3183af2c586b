"""Tests for course_lib.masking: mask conversions, causal masks and the masked softmax."""

from __future__ import annotations

import pytest
import torch

from course_lib.masking import (
    causal_may_attend,
    combine_may_attend,
    masked_softmax,
    softmax_may_attend,
    valid_lens_to_may_attend,
    valid_lens_to_real_keys,
)


TIER = "fast"  # course_tools/tiers.py


@pytest.fixture(scope="module")
def d2l():
    from course_lib.d2l_compat import import_d2l

    return import_d2l()


def _brute_force_keep(valid_lens: torch.Tensor, num_queries: int, num_keys: int) -> torch.Tensor:
    batch = valid_lens.shape[0]
    keep = torch.zeros(batch, num_queries, num_keys, dtype=torch.bool)
    for b in range(batch):
        for i in range(num_queries):
            length = int(valid_lens[b] if valid_lens.dim() == 1 else valid_lens[b, i])
            for j in range(num_keys):
                keep[b, i, j] = j < length
    return keep


# ---------------------------------------------------------------- conversions

@pytest.mark.parametrize("valid_lens", [torch.tensor([0, 2, 5]), torch.tensor([[1, 3], [5, 0], [2, 2]])])
def test_valid_lens_to_may_attend_matches_brute_force(valid_lens):
    keep = valid_lens_to_may_attend(valid_lens, 2, 5)
    assert keep.dtype == torch.bool and keep.shape == (3, 2, 5)
    assert torch.equal(keep, _brute_force_keep(valid_lens, 2, 5))


def test_real_keys_is_the_per_sequence_may_attend():
    valid_lens = torch.tensor([3, 1, 4, 0])
    real = valid_lens_to_real_keys(valid_lens, 4)
    assert real.shape == (4, 4) and real.dtype == torch.bool
    assert torch.equal(real, valid_lens_to_may_attend(valid_lens, 1, 4)[:, 0])
    assert torch.equal(real[0], torch.tensor([True, True, True, False]))  # False = padding


@pytest.mark.parametrize("valid_lens, message", [
    (torch.tensor([1.0, 2.0]), "integer tensor"),
    (torch.tensor([1, 6]), r"\[0, K=5\]"),
    (torch.tensor([-1, 2]), r"\[0, K=5\]"),
    (torch.tensor([[1, 2, 3], [1, 2, 3]]), r"\(B, Q\) must have shape \(2, 2\)"),
    (torch.ones(2, 2, 2, dtype=torch.long), r"\(B,\)=\(2,\) or \(B, Q\)=\(2, 2\)"),
])
def test_valid_lens_to_may_attend_errors_name_the_shape(valid_lens, message):
    with pytest.raises(ValueError, match=message):
        valid_lens_to_may_attend(valid_lens, 2, 5)


def test_real_keys_needs_per_sequence_lengths():
    with pytest.raises(ValueError, match=r"must have shape \(B,\)"):
        valid_lens_to_real_keys(torch.tensor([[1, 2]]), 3)


# ---------------------------------------------------------------- causal mask

def test_causal_may_attend_square_and_rectangular():
    assert torch.equal(causal_may_attend(3), torch.tensor([[1, 0, 0], [1, 1, 0], [1, 1, 1]], dtype=torch.bool))
    # K > Q: the 2 queries are the last 2 of 5 positions (cached generation)
    expected = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    assert torch.equal(causal_may_attend(2, 5), expected)
    # the last Q rows of the full (K, K) mask
    assert torch.equal(causal_may_attend(3, 7), causal_may_attend(7)[-3:])
    with pytest.raises(ValueError, match="num_keys >= num_queries"):
        causal_may_attend(4, 2)


# ---------------------------------------------------------------- masked softmax

def test_small_example_zeros_beyond_each_valid_length():
    # a (2, 2, 4) example: zeros beyond each valid length, rows summing to one
    scores = torch.rand(2, 2, 4, generator=torch.Generator().manual_seed(1))
    for valid_lens in (torch.tensor([2, 3]), torch.tensor([[1, 3], [2, 4]])):
        weights = masked_softmax(scores, valid_lens)
        lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None].expand(2, 2)
        for b in range(2):
            for i in range(2):
                n = int(lens[b, i])
                assert torch.all(weights[b, i, n:] == 0)
                assert torch.all(weights[b, i, :n] > 0)
                torch.testing.assert_close(weights[b, i, :n], torch.softmax(scores[b, i, :n], dim=0))
        torch.testing.assert_close(weights.sum(-1), torch.ones(2, 2))


def test_masked_keys_get_exactly_zero_and_masked_scores_do_not_matter():
    gen = torch.Generator().manual_seed(0)
    scores = torch.randn(3, 4, 6, dtype=torch.float64, generator=gen)
    valid_lens = torch.tensor([[6, 1, 3, 2], [4, 4, 4, 4], [2, 5, 1, 6]])
    weights = masked_softmax(scores, valid_lens)
    keep = valid_lens_to_may_attend(valid_lens, 4, 6)
    assert torch.all(weights[~keep] == 0.0)  # exactly zero, not merely small
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 4, dtype=torch.float64))
    # huge or random scores at masked positions change nothing
    noisy = scores.masked_fill(~keep, 1e30)
    assert torch.equal(masked_softmax(noisy, valid_lens), weights)
    noisy = torch.where(keep, scores, torch.randn(3, 4, 6, dtype=torch.float64, generator=gen) * 100)
    torch.testing.assert_close(masked_softmax(noisy, valid_lens), weights, rtol=0, atol=1e-15)


def test_fully_masked_rows_are_all_zero():
    scores = torch.randn(2, 3, 4)
    weights = masked_softmax(scores, torch.tensor([[0, 2, 4], [0, 0, 1]]))
    assert torch.equal(weights[0, 0], torch.zeros(4))
    assert torch.equal(weights[1, :2], torch.zeros(2, 4))
    assert torch.isfinite(weights).all()
    torch.testing.assert_close(weights[0, 1:].sum(-1), torch.ones(2))


def test_no_valid_lens_is_plain_softmax():
    scores = torch.randn(2, 3, 4, dtype=torch.float64)
    torch.testing.assert_close(masked_softmax(scores), torch.softmax(scores, -1))
    # full valid lengths mask nothing
    torch.testing.assert_close(masked_softmax(scores, torch.tensor([4, 4])), torch.softmax(scores, -1))


@pytest.mark.slow  # a parity test against d2l: importing d2l (pandas, its plotting) costs about 0.6 s of CPU
@pytest.mark.parametrize("valid_lens", [torch.tensor([2, 3, 1]), torch.tensor([[1, 3], [2, 4], [4, 1]])])
def test_parity_with_d2l_masked_softmax(d2l, valid_lens):
    scores = torch.randn(3, 2, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    ours = masked_softmax(scores, valid_lens)
    theirs = d2l.masked_softmax(scores.clone(), valid_lens)  # d2l writes into its input
    torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)


def test_gradcheck():
    scores = torch.randn(2, 3, 5, dtype=torch.float64, requires_grad=True)
    for valid_lens in (torch.tensor([3, 5]), torch.tensor([[1, 2, 5], [0, 4, 3]])):
        assert torch.autograd.gradcheck(lambda s: masked_softmax(s, valid_lens), (scores,))
    # masked positions receive no gradient
    valid_lens = torch.tensor([2, 4])
    masked_softmax(scores, valid_lens)[..., :2].sum().backward()  # any loss
    assert scores.grad is not None
    assert torch.all(scores.grad[0, :, 2:] == 0)


@pytest.mark.parametrize("scores, valid_lens, message", [
    (torch.randn(2, 4), torch.tensor([1, 2]), r"shape \(B, Q, K\)"),
    (torch.randn(2, 3, 4), torch.tensor([1, 2, 3]), r"\(B,\)=\(2,\) or \(B, Q\)=\(2, 3\)"),
    (torch.randn(2, 3, 4), torch.tensor(2), r"\(B,\)=\(2,\)"),
    (torch.randn(2, 3, 4), torch.tensor([[1, 2], [1, 2]]), r"\(B, Q\) must have shape \(2, 3\)"),
    (torch.randn(2, 3, 4), torch.tensor([1, 5]), r"\[0, K=4\]"),
])
def test_masked_softmax_errors(scores, valid_lens, message):
    with pytest.raises(ValueError, match=message):
        masked_softmax(scores, valid_lens)


def test_combine_may_attend_keeps_the_pairs_every_mask_allows():
    real = torch.tensor([[True, True, False], [True, False, False]])[:, None, None, :]  # (B, 1, 1, K)
    past = causal_may_attend(2, 3)  # (Q, K)
    assert combine_may_attend(None, None) is None
    combined = combine_may_attend(real, None, past)
    assert combined is not None and combined.dtype == torch.bool and combined.shape == (2, 1, 2, 3)
    assert torch.equal(combined, real & past)
    with pytest.raises(TypeError, match="boolean tensor .True = may attend.*attn_bias"):
        combine_may_attend(real, torch.zeros(2, 3))


def test_softmax_may_attend_adds_the_bias_and_forbids_minus_inf():
    scores = torch.randn(2, 3, dtype=torch.float64)
    bias = torch.tensor([[0.5, -1.0, float("-inf")], [0.0, 0.0, 0.0]], dtype=torch.float64)
    allowed = torch.tensor([[True, True, True], [False, True, True]])
    weights = softmax_may_attend(scores, allowed, bias)
    expected = torch.softmax((scores + bias).masked_fill(~allowed, float("-inf")), dim=-1)
    torch.testing.assert_close(weights, expected, rtol=0, atol=1e-15)
    with pytest.raises(TypeError, match="attn_bias .* must be a float tensor"):
        softmax_may_attend(scores, None, allowed)


# ---------------------------------------------------------------- polarity in the names

def test_old_polarity_free_names_fail_with_the_name_to_use():
    # a learner's code from an older notebook must not silently get the other polarity
    import course_lib as cl
    from course_lib.masking import RenamedError

    for old, new in (("causal_mask", "causal_may_attend"), ("valid_lens_to_mask", "valid_lens_to_may_attend"),
                     ("valid_lens_to_key_padding_mask", "valid_lens_to_real_keys"),
                     ("sliding_window_mask", "sliding_window_may_attend")):
        with pytest.raises(RenamedError, match=f"use {new}"):
            getattr(cl, old)
    with pytest.raises(ImportError, match="use causal_may_attend"):
        from course_lib.masking import causal_mask  # noqa: F401
    with pytest.raises(ImportError, match="use sliding_window_may_attend"):
        from course_lib.local_attention import sliding_window_mask  # noqa: F401


def test_mixing_the_two_polarities_gets_a_clear_error():
    # the trap: nn.MultiheadAttention's attn_mask reads True as "masked out", SDPA's as "may
    # attend"; handing the course's causal mask to an attn_mask= once gave anti-causal weights
    import course_lib as cl
    from course_lib.gqa import GroupedQueryAttention
    from course_lib.pooling import nadaraya_watson_weights
    from course_lib.transformer import TransformerDecoderBlock, TransformerEncoderBlock

    x = torch.randn(2, 4, 8)
    past, real = cl.causal_may_attend(4), torch.ones(2, 4, dtype=torch.bool)
    mha = cl.MultiHeadAttention(8, 2)
    with pytest.raises(TypeError, match=r"no longer takes attn_mask=.*may_attend="):
        mha(x, x, x, attn_mask=past)
    with pytest.raises(TypeError, match=r"no longer takes key_padding_mask=.*real_keys=~key_padding_mask"):
        mha(x, x, x, key_padding_mask=~real)
    with pytest.raises(TypeError):  # a mask passed by position, where PyTorch's module reads key_padding_mask
        mha(x, x, x, ~real)
    with pytest.raises(TypeError, match="may_attend must be a boolean tensor"):
        mha(x, x, x, may_attend=past.float())
    q = torch.randn(2, 4, 3)
    for call in (lambda: cl.scaled_dot_product_attention(q, q, q, attn_mask=past),
                 lambda: cl.tiled_attention(q, q, q, attn_mask=past),
                 lambda: GroupedQueryAttention(8, 2, 1)(x, x, x, key_padding_mask=~real),
                 lambda: TransformerEncoderBlock(8, 2, 16)(x, key_padding_mask=~real),
                 lambda: TransformerDecoderBlock(8, 2, 16)(x, x, memory_key_padding_mask=~real),
                 lambda: nadaraya_watson_weights(torch.randn(4), torch.randn(4), attn_mask=past)):
        with pytest.raises(TypeError, match="no longer takes .*Pass"):
            call()
    # the new spelling gives causal weights: the last row attends everywhere, the first to key 0
    mha.eval()
    _, weights = mha(x, x, x, may_attend=past)
    assert torch.all(weights.masked_select(~past.expand_as(weights)) == 0)
    assert torch.all(weights[:, 3] > 0) and torch.allclose(weights[:, 0, 0], torch.ones(2))
