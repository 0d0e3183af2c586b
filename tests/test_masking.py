"""Tests for course_lib.masking: mask conversions, causal masks and the masked softmax."""

from __future__ import annotations

import pytest
import torch

from course_lib.masking import (
    causal_mask,
    masked_softmax,
    merge_masks,
    valid_lens_to_key_padding_mask,
    valid_lens_to_mask,
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
def test_valid_lens_to_mask_matches_brute_force(valid_lens):
    keep = valid_lens_to_mask(valid_lens, 2, 5)
    assert keep.dtype == torch.bool and keep.shape == (3, 2, 5)
    assert torch.equal(keep, _brute_force_keep(valid_lens, 2, 5))


def test_key_padding_mask_is_negated_keep_mask():
    valid_lens = torch.tensor([3, 1, 4, 0])
    kpm = valid_lens_to_key_padding_mask(valid_lens, 4)
    assert kpm.shape == (4, 4) and kpm.dtype == torch.bool
    assert torch.equal(kpm, ~valid_lens_to_mask(valid_lens, 1, 4)[:, 0])
    assert torch.equal(kpm[0], torch.tensor([False, False, False, True]))  # True = padding


@pytest.mark.parametrize("valid_lens, message", [
    (torch.tensor([1.0, 2.0]), "integer tensor"),
    (torch.tensor([1, 6]), r"\[0, K=5\]"),
    (torch.tensor([-1, 2]), r"\[0, K=5\]"),
    (torch.tensor([[1, 2, 3], [1, 2, 3]]), r"\(B, Q\) must have shape \(2, 2\)"),
    (torch.ones(2, 2, 2, dtype=torch.long), r"\(B,\)=\(2,\) or \(B, Q\)=\(2, 2\)"),
])
def test_valid_lens_to_mask_errors_name_the_shape(valid_lens, message):
    with pytest.raises(ValueError, match=message):
        valid_lens_to_mask(valid_lens, 2, 5)


def test_key_padding_mask_needs_per_sequence_lengths():
    with pytest.raises(ValueError, match=r"must have shape \(B,\)"):
        valid_lens_to_key_padding_mask(torch.tensor([[1, 2]]), 3)


# ---------------------------------------------------------------- causal mask

def test_causal_mask_square_and_rectangular():
    assert torch.equal(causal_mask(3), torch.tensor([[1, 0, 0], [1, 1, 0], [1, 1, 1]], dtype=torch.bool))
    # K > Q: the 2 queries are the last 2 of 5 positions (cached generation)
    expected = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    assert torch.equal(causal_mask(2, 5), expected)
    # the last Q rows of the full (K, K) mask
    assert torch.equal(causal_mask(3, 7), causal_mask(7)[-3:])
    with pytest.raises(ValueError, match="num_keys >= num_queries"):
        causal_mask(4, 2)


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
    keep = valid_lens_to_mask(valid_lens, 4, 6)
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


def test_merge_masks_unites_boolean_and_adds_float_masks():
    padding = torch.tensor([[False, False, True], [False, True, True]])[:, None, None, :]  # (B, 1, 1, K)
    future = ~causal_mask(2, 3)  # (Q, K), True = masked out
    assert merge_masks(None, None, dtype=torch.float64) is None
    merged = merge_masks(padding, None, future, dtype=torch.float64)
    assert merged is not None and merged.dtype == torch.bool and merged.shape == (2, 1, 2, 3)
    assert torch.equal(merged, padding | future)
    bias = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)
    mixed = merge_masks(bias, padding, bias, dtype=torch.float64)
    assert mixed is not None and mixed.dtype == torch.float64
    torch.testing.assert_close(mixed, (2 * bias).expand(2, 1, 1, 3).masked_fill(padding, float("-inf")),
                               rtol=0, atol=0)
