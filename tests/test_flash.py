"""Tests for course_lib.flash: the online softmax and tiled (FlashAttention-style) attention,
in float64 against plain attention and PyTorch's F.scaled_dot_product_attention."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from course_lib.flash import (count_tiles, flash_attention, flash_attention_backward, flash_attention_forward,
                              online_softmax, online_softmax_update, tiled_attention)
from course_lib.masking import causal_may_attend
from course_lib.scoring import scaled_dot_product_attention

TIER = "fast"  # course_tools/tiers.py

F64 = torch.float64


def _qkv(batch=2, heads=3, num_q=13, num_k=13, d=8, dv=5):
    return (torch.randn(batch, heads, num_q, d, dtype=F64), torch.randn(batch, heads, num_k, d, dtype=F64),
            torch.randn(batch, heads, num_k, dv, dtype=F64))


@pytest.mark.parametrize("block_size", [1, 3, 7, 100])
def test_online_softmax_equals_softmax(block_size):
    x = torch.randn(4, 6, 23, dtype=F64) * 5
    torch.testing.assert_close(online_softmax(x, block_size), torch.softmax(x, dim=-1), rtol=0, atol=1e-12)


def test_online_softmax_does_not_overflow():
    x = torch.tensor([[1000.0, 999.0, -5.0, 1000.0]], dtype=torch.float32)
    naive = torch.exp(x) / torch.exp(x).sum(-1, keepdim=True)  # exp(1000) = inf: NaN
    assert torch.isnan(naive[0, [0, 1, 3]]).all()
    torch.testing.assert_close(online_softmax(x, 1), torch.softmax(x, dim=-1))


def test_online_softmax_masked_entries_and_rows():
    x = torch.randn(3, 9, dtype=F64)
    x[0, 4:] = float("-inf")
    x[2] = float("-inf")
    out = online_softmax(x, 2)
    assert not torch.isnan(out).any()
    assert torch.equal(out[2], torch.zeros(9, dtype=F64))  # no key: all zero
    assert torch.equal(out[0, 4:], torch.zeros(5, dtype=F64))
    torch.testing.assert_close(out[:2], torch.softmax(x[:2], dim=-1))


def test_online_softmax_update_rescales():
    m, l = torch.tensor([[2.0]], dtype=F64), torch.tensor([[3.0]], dtype=F64)
    new_m, new_l, corr = online_softmax_update(m, l, torch.tensor([[5.0, 1.0]], dtype=F64))
    assert new_m.item() == 5.0
    torch.testing.assert_close(corr, torch.exp(torch.tensor([[-3.0]], dtype=F64)))
    torch.testing.assert_close(new_l, 3 * math.exp(-3) + 1 + torch.exp(torch.tensor([[-4.0]], dtype=F64)))
    first_m, first_l, first_corr = online_softmax_update(torch.tensor([[-math.inf]], dtype=F64),
                                                         torch.zeros(1, 1, dtype=F64),
                                                         torch.tensor([[-math.inf]], dtype=F64))
    assert first_l.item() == 0.0 and first_corr.item() == 0.0 and math.isinf(first_m.item())


@pytest.mark.parametrize("block_size", [1, 4, 5, 13, 64])
def test_tile_size_never_changes_the_result(block_size):
    q, k, v = _qkv()
    ref, _ = scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(tiled_attention(q, k, v, block_size=block_size), ref, rtol=0, atol=1e-12)
    torch.testing.assert_close(tiled_attention(q, k, v, block_size=block_size), F.scaled_dot_product_attention(q, k, v))


@pytest.mark.parametrize("num_q, num_k", [(13, 13), (5, 17), (1, 9)])
@pytest.mark.parametrize("block_size", [1, 4, 6])
def test_causal_tiling_equals_causal_reference(num_q, num_k, block_size):
    q, k, v = _qkv(num_q=num_q, num_k=num_k)
    ref, _ = scaled_dot_product_attention(q, k, v, causal_may_attend(num_q, num_k))
    torch.testing.assert_close(tiled_attention(q, k, v, is_causal=True, block_size=block_size), ref, rtol=0, atol=1e-12)
    if num_q == num_k:  # PyTorch's is_causal aligns to the top-left corner: the same only for Q = K
        torch.testing.assert_close(tiled_attention(q, k, v, is_causal=True, block_size=block_size),
                                   F.scaled_dot_product_attention(q, k, v, is_causal=True))


def test_padding_and_float_masks():
    q, k, v = _qkv(num_q=7, num_k=11)
    lens = torch.tensor([11, 4])
    keep = (torch.arange(11)[None, :] < lens[:, None])[:, None, None, :]  # (B, 1, 1, K)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    torch.testing.assert_close(tiled_attention(q, k, v, may_attend=keep, block_size=3), ref)
    bias = torch.randn(7, 11, dtype=F64)
    torch.testing.assert_close(tiled_attention(q, k, v, attn_bias=bias, block_size=4),
                               F.scaled_dot_product_attention(q, k, v, attn_mask=bias))
    # padded keys change nothing
    k2, v2 = k.clone(), v.clone()
    k2[1, :, 4:], v2[1, :, 4:] = 100.0, -100.0
    torch.testing.assert_close(tiled_attention(q, k2, v2, may_attend=keep, block_size=3), ref)


def test_fully_masked_rows_give_zero():
    q, k, v = _qkv(num_q=4, num_k=6)
    keep = torch.ones(4, 6, dtype=torch.bool)
    keep[2] = False
    out = tiled_attention(q, k, v, may_attend=keep, block_size=2)
    ref, _ = scaled_dot_product_attention(q, k, v, may_attend=keep)
    assert not torch.isnan(out).any()
    assert torch.equal(out[..., 2, :], torch.zeros_like(out[..., 2, :]))
    torch.testing.assert_close(out, ref)


def test_causal_tiles_are_skipped_and_counted():
    assert count_tiles(8, 8, 2) == (16, 16)
    assert count_tiles(8, 8, 2, is_causal=True) == (10, 16)  # n (n + 1) / 2 of the n x n tiles, n = 4
    n = 64
    assert count_tiles(n * 16, n * 16, 16, is_causal=True) == (n * (n + 1) // 2, n * n)
    # the skipped tiles are not looked at: NaN values there would poison the output otherwise
    # (a computed-then-masked tile gives weight 0 times NaN = NaN)
    q, k, v = _qkv(num_q=8, num_k=8)
    k_bad, v_bad = k.clone(), v.clone()
    k_bad[..., 6:, :], v_bad[..., 6:, :] = float("nan"), float("nan")  # only queries 6, 7 may see these
    out = tiled_attention(q, k_bad, v_bad, is_causal=True, block_size=2)
    assert not torch.isnan(out[..., :6, :]).any()
    torch.testing.assert_close(out[..., :6, :], tiled_attention(q, k, v, is_causal=True)[..., :6, :])
    masked_after = scaled_dot_product_attention(q, k_bad, v_bad, causal_may_attend(8))[0]
    assert torch.isnan(masked_after[..., :6, :]).all()  # what skipping avoids


def test_float32_close_to_float64():
    q, k, v = _qkv(num_q=40, num_k=40)
    out32 = tiled_attention(q.float(), k.float(), v.float(), is_causal=True, block_size=8)
    assert out32.dtype == torch.float32
    torch.testing.assert_close(out32.double(), tiled_attention(q, k, v, is_causal=True), rtol=1e-4, atol=1e-5)


@pytest.mark.slow  # 0.76 s of CPU (a fast test stays under 0.1 s: course_tools/tiers.py)
def test_gradcheck():
    q, k, v = (t.requires_grad_() for t in _qkv(batch=1, heads=2, num_q=5, num_k=5, d=3, dv=2))
    assert torch.autograd.gradcheck(lambda a, b, c: tiled_attention(a, b, c, block_size=2), (q, k, v))
    assert torch.autograd.gradcheck(lambda a, b, c: tiled_attention(a, b, c, is_causal=True, block_size=2), (q, k, v))
    x = torch.randn(3, 7, dtype=F64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: online_softmax(t, 3), (x,))


def test_errors():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="block_size"):
        tiled_attention(q, k, v, block_size=0)
    with pytest.raises(ValueError, match="K >= Q"):
        tiled_attention(q, k[..., :3, :], v[..., :3, :], is_causal=True)
    with pytest.raises(ValueError, match="expected query"):
        tiled_attention(q, k[..., :3], v)
    with pytest.raises(ValueError, match="window"):
        tiled_attention(q, k, v, window=0)


# --- FlashAttention's backward pass -----------------------------------------------------------


def _plain_attention(q, k, v, is_causal=False):
    """softmax(Q K^T / sqrt(D) + causal mask) V written out, for autograd to differentiate."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if is_causal:
        scores = scores.masked_fill(~causal_may_attend(q.shape[-2], k.shape[-2]), float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("num_q, num_k", [(13, 13), (5, 17), (1, 9)])
@pytest.mark.parametrize("block_size", [1, 3, 4, 13, 64])
def test_flash_gradients_equal_autograd(is_causal, num_q, num_k, block_size):
    torch.manual_seed(num_q * 100 + block_size)
    q, k, v = (t.requires_grad_() for t in _qkv(num_q=num_q, num_k=num_k))
    out = flash_attention(q, k, v, is_causal=is_causal, block_size=block_size)
    ref = _plain_attention(q, k, v, is_causal)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-12)
    grad_out = torch.randn_like(out)
    mine = torch.autograd.grad(out, (q, k, v), grad_out)
    theirs = torch.autograd.grad(ref, (q, k, v), grad_out)
    for name, a, b in zip("QKV", mine, theirs):
        assert a.shape == b.shape, name
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12, msg=f"gradient of {name}")


@pytest.mark.slow  # 0.39 s of CPU in its costliest case (a fast test stays under 0.1 s: course_tools/tiers.py)
@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("block_size", [1, 2, 3])
def test_flash_gradcheck(is_causal, block_size):
    q, k, v = (t.requires_grad_() for t in _qkv(batch=1, heads=2, num_q=4, num_k=5, d=3, dv=2))
    assert torch.autograd.gradcheck(lambda a, b, c: flash_attention(a, b, c, is_causal=is_causal,
                                                                    block_size=block_size), (q, k, v))


def test_flash_forward_returns_the_row_logsumexp():
    q, k, v = _qkv(num_q=7, num_k=10)
    for is_causal in (False, True):
        out, lse = flash_attention_forward(q, k, v, is_causal=is_causal, block_size=3)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if is_causal:
            scores = scores.masked_fill(~causal_may_attend(7, 10), float("-inf"))
        assert lse.shape == (2, 3, 7)
        torch.testing.assert_close(lse, torch.logsumexp(scores, dim=-1), rtol=0, atol=1e-12)
        torch.testing.assert_close(out, tiled_attention(q, k, v, is_causal=is_causal, block_size=3), rtol=0, atol=1e-12)
        # the probabilities are exp(S - L): what the backward pass recomputes
        torch.testing.assert_close(torch.exp(scores - lse[..., None]), torch.softmax(scores, dim=-1))


def test_flash_saves_nothing_of_size_q_times_k():
    num_q, num_k = 64, 48
    q, k, v = (t.requires_grad_() for t in _qkv(batch=1, heads=1, num_q=num_q, num_k=num_k, d=4, dv=4))

    def saved_shapes(fn):
        shapes = []
        with torch.autograd.graph.saved_tensors_hooks(lambda t: shapes.append(tuple(t.shape)) or t, lambda t: t):
            fn(q, k, v).sum()
        return shapes

    plain = saved_shapes(_plain_attention)
    flash = saved_shapes(lambda a, b, c: flash_attention(a, b, c, block_size=16))
    assert (1, 1, num_q, num_k) in plain  # autograd keeps the probabilities of plain attention
    assert sorted(flash) == sorted([(1, 1, num_q, 4), (1, 1, num_k, 4), (1, 1, num_k, 4), (1, 1, num_q, 4),
                                    (1, 1, num_q)])  # Q, K, V, O and L only


def test_flash_backward_function_directly():
    q, k, v = _qkv(num_q=6, num_k=6)
    out, lse = flash_attention_forward(q, k, v, is_causal=True, block_size=4)
    grad_out = torch.randn_like(out)
    grads = flash_attention_backward(grad_out, q, k, v, out, lse, is_causal=True, block_size=2)  # any tile size
    qr, kr, vr = (t.clone().requires_grad_() for t in (q, k, v))
    ref = torch.autograd.grad(_plain_attention(qr, kr, vr, True), (qr, kr, vr), grad_out)
    for a, b in zip(grads, ref):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


def test_flash_causal_backward_skips_tiles_above_the_diagonal():
    # keys and values that only the last queries may see are NaN: the outputs and the gradients of
    # the queries before them stay finite (those tiles are never recomputed)
    q, k, v = _qkv(batch=1, heads=1, num_q=8, num_k=8)
    k[..., 6:, :], v[..., 6:, :] = float("nan"), float("nan")
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    out = flash_attention(q, k, v, is_causal=True, block_size=2)
    grad_out = torch.zeros_like(out)
    grad_out[..., :6, :] = 1.0  # a loss on the first 6 outputs only
    dq, _, _ = torch.autograd.grad(out, (q, k, v), grad_out)
    assert torch.isfinite(out[..., :6, :]).all() and torch.isfinite(dq[..., :6, :]).all()


def test_flash_float32_and_errors():
    q, k, v = (t.float().requires_grad_() for t in _qkv(num_q=20, num_k=20))
    out = flash_attention(q, k, v, is_causal=True, block_size=8)
    assert out.dtype == torch.float32
    out.sum().backward()
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    _plain_attention(q64, k64, v64, True).sum().backward()
    torch.testing.assert_close(q.grad.double(), q64.grad, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="block_size"):
        flash_attention(q, k, v, block_size=0)
    with pytest.raises(ValueError, match="K >= Q"):
        flash_attention(q, k[..., :3, :], v[..., :3, :], is_causal=True)
    with pytest.raises(ValueError, match="same leading"):
        flash_attention(q, k[:1], v[:1])
