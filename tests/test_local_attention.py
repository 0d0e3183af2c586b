"""Tests for course_lib.local_attention: sliding-window masks, banded tiled attention, path length."""

from __future__ import annotations

import pytest
import torch

from course_lib.flash import count_tiles
from course_lib.local_attention import layers_to_connect, sliding_window_attention, sliding_window_may_attend
from course_lib.masking import causal_may_attend
from course_lib.scoring import scaled_dot_product_attention

TIER = "fast"  # course_tools/tiers.py

F64 = torch.float64


def test_mask_by_definition():
    mask = sliding_window_may_attend(6, 3)
    expected = torch.tensor([[i - 3 < j <= i for j in range(6)] for i in range(6)])
    assert torch.equal(mask, expected)
    assert torch.equal(sliding_window_may_attend(5, 9, num_keys=9), causal_may_attend(5, 9))  # window >= K: causal
    assert int(sliding_window_may_attend(50, 4).sum(-1).max()) == 4
    assert torch.equal(sliding_window_may_attend(3, 2, num_keys=5), torch.tensor(
        [[False, True, True, False, False], [False, False, True, True, False], [False, False, False, True, True]]))


@pytest.mark.parametrize("window", [1, 3, 8, 40])
@pytest.mark.parametrize("block_size", [1, 4, 7])
def test_banded_tiling_equals_masked_reference(window, block_size):
    q, k, v = (torch.randn(2, 2, 21, 6, dtype=F64) for _ in range(3))
    ref, _ = scaled_dot_product_attention(q, k, v, may_attend=sliding_window_may_attend(21, window))
    torch.testing.assert_close(sliding_window_attention(q, k, v, window, block_size=block_size), ref, rtol=0, atol=1e-12)


def test_banded_tiling_with_cached_keys():
    q = torch.randn(1, 1, 4, 6, dtype=F64)
    k, v = torch.randn(1, 1, 15, 6, dtype=F64), torch.randn(1, 1, 15, 6, dtype=F64)
    ref, _ = scaled_dot_product_attention(q, k, v, may_attend=sliding_window_may_attend(4, 5, num_keys=15))
    torch.testing.assert_close(sliding_window_attention(q, k, v, 5, block_size=3), ref)


def test_cost_grows_linearly():
    tiles = [count_tiles(n, n, 16, window=64)[0] for n in (1024, 2048, 4096)]
    # T / block rows of tiles, each w / block + 1 tiles wide: exactly linear in T
    assert tiles == [n // 16 * (64 // 16 + 1) - 4 * 5 // 2 for n in (1024, 2048, 4096)]
    assert count_tiles(4096, 4096, 16, is_causal=True)[0] > 20 * tiles[2]


@pytest.mark.parametrize("window", [2, 3, 5])
def test_layers_to_connect_matches_mask_powers(window):
    n = 20
    step = sliding_window_may_attend(n, window).double()
    reach, layers = step.clone(), 1
    for distance in range(1, n):
        while reach[distance, 0] == 0:  # does output `distance` depend on input 0 yet?
            reach, layers = (step @ reach).clamp(max=1), layers + 1
        assert layers == layers_to_connect(distance, window), (distance, window)


@pytest.mark.slow  # 0.21 s of CPU (a fast test stays under 0.1 s: course_tools/tiers.py)
def test_gradcheck_and_errors():
    q, k, v = (torch.randn(1, 1, 6, 3, dtype=F64, requires_grad=True) for _ in range(3))
    assert torch.autograd.gradcheck(lambda a, b, c: sliding_window_attention(a, b, c, 3, block_size=2), (q, k, v))
    with pytest.raises(ValueError, match="window"):
        sliding_window_may_attend(4, 0)
    with pytest.raises(ValueError, match="only sees itself"):
        layers_to_connect(3, 1)
