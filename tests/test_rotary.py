"""Tests for course_lib.rotary: the rotation, the relative-position property, both pairings."""

from __future__ import annotations

import math

import pytest
import torch

from course_lib.positional import shift_matrix, sinusoidal_encoding
from course_lib.rotary import RotaryEmbedding, apply_rotary, rotary_cos_sin, rotary_frequencies

TIER = "fast"  # course_tools/tiers.py

F64 = torch.float64


def _rotate_by_hand(x: torch.Tensor, position: float, interleaved: bool) -> torch.Tensor:
    """One vector, one pair at a time with a 2 x 2 rotation matrix."""
    d = x.shape[-1]
    out = x.clone()
    for i in range(d // 2):
        a, b = (2 * i, 2 * i + 1) if interleaved else (i, i + d // 2)
        angle = position * 10000.0 ** (-2 * i / d)
        rot = torch.tensor([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]], dtype=F64)
        out[[a, b]] = rot @ x[[a, b]]
    return out


@pytest.mark.parametrize("interleaved", [False, True])
def test_matches_pairwise_rotation(interleaved):
    x = torch.randn(7, 8, dtype=F64)
    cos, sin = rotary_cos_sin(7, 8, dtype=F64)
    got = apply_rotary(x, cos, sin, interleaved=interleaved)
    for p in range(7):
        torch.testing.assert_close(got[p], _rotate_by_hand(x[p], p, interleaved), rtol=0, atol=1e-12)
    torch.testing.assert_close(got.norm(dim=-1), x.norm(dim=-1))  # rotations keep lengths


def test_pairings_differ_except_for_two_features():
    x = torch.randn(5, 8, dtype=F64)
    cos, sin = rotary_cos_sin(5, 8, dtype=F64)
    assert not torch.allclose(apply_rotary(x, cos, sin), apply_rotary(x, cos, sin, interleaved=True))
    # halves = interleaved after permuting features (i, i + D/2) next to each other
    perm = torch.tensor([0, 4, 1, 5, 2, 6, 3, 7])
    torch.testing.assert_close(apply_rotary(x, cos, sin)[:, perm], apply_rotary(x[:, perm], cos, sin, interleaved=True))
    y = torch.randn(5, 2, dtype=F64)  # D = 2: one pair, both conventions coincide
    c2, s2 = rotary_cos_sin(5, 2, dtype=F64)
    torch.testing.assert_close(apply_rotary(y, c2, s2), apply_rotary(y, c2, s2, interleaved=True))


@pytest.mark.parametrize("interleaved", [False, True])
def test_score_depends_only_on_relative_position(interleaved):
    q, k = torch.randn(16, dtype=F64), torch.randn(16, dtype=F64)
    positions = torch.arange(40)
    cos, sin = rotary_cos_sin(positions, 16, dtype=F64)
    rq = apply_rotary(q.expand(40, 16), cos, sin, interleaved=interleaved)  # q at every position
    rk = apply_rotary(k.expand(40, 16), cos, sin, interleaved=interleaved)
    scores = rq @ rk.T  # scores[m, n] = q_m . k_n
    for offset in range(-39, 40):  # constant along each diagonal n - m = offset
        diag = torch.diagonal(scores, offset=offset)
        torch.testing.assert_close(diag, diag[:1].expand_as(diag), rtol=0, atol=1e-10)
    assert torch.diagonal(scores, 0)[0] != torch.diagonal(scores, 3)[0]  # but it does depend on n - m
    torch.testing.assert_close(scores[0, 0], q @ k)  # position 0 is not rotated


def test_link_with_sinusoidal_shift_matrix():
    # Rotating the (sin, cos) pair of PE(p) the other way round is RoPE's rotation: lesson 6's
    # M_k acting on (sin, cos) is the transpose of RoPE's R(k theta) acting on (x1, x2).
    d, k = 8, 5
    pe = sinusoidal_encoding(30, d, dtype=F64)
    m = shift_matrix(k, d)
    freqs = rotary_frequencies(d)
    for i, theta in enumerate(freqs):
        c, s = math.cos(k * theta), math.sin(k * theta)
        rope_block = torch.tensor([[c, -s], [s, c]], dtype=F64)
        torch.testing.assert_close(m[2 * i: 2 * i + 2, 2 * i: 2 * i + 2], rope_block.T)
    torch.testing.assert_close(pe[:25] @ m.T, pe[k:])


def test_module_buffers_offset_and_dtype():
    rope = RotaryEmbedding(8, max_len=32)
    assert [n for n, _ in rope.named_buffers()] == ["cos", "sin"] and list(rope.parameters()) == []
    assert rope.state_dict() == {}
    x = torch.randn(2, 3, 10, 8, dtype=F64)
    full = rope(x)
    torch.testing.assert_close(rope(x[..., 4:, :], offset=4), full[..., 4:, :], rtol=1e-6, atol=1e-6)
    cos, sin = rotary_cos_sin(10, 8, dtype=F64)
    torch.testing.assert_close(full, apply_rotary(x, cos, sin), rtol=1e-6, atol=1e-6)
    assert full.dtype == F64
    rope64 = RotaryEmbedding(8, max_len=32).to(F64)
    assert rope64.cos.dtype == F64


def test_gradcheck():
    x = torch.randn(2, 5, 6, dtype=F64, requires_grad=True)
    cos, sin = rotary_cos_sin(5, 6, dtype=F64)
    for interleaved in (False, True):
        assert torch.autograd.gradcheck(lambda t: apply_rotary(t, cos, sin, interleaved=interleaved), (x,))


def test_errors():
    with pytest.raises(ValueError, match="even"):
        rotary_frequencies(7)
    cos, sin = rotary_cos_sin(4, 8)
    with pytest.raises(ValueError, match=r"\(T, D/2\)"):
        apply_rotary(torch.randn(5, 8), cos, sin)
    with pytest.raises(ValueError, match="max_len"):
        RotaryEmbedding(8, max_len=4)(torch.randn(1, 6, 8))


def test_rotary_and_sinusoidal_frequencies_are_one_formula() -> None:
    # RoPE rotates pair i by the angle of lesson 6's sinusoidal pair i: one function computes both
    import course_lib.rotary as rotary
    from course_lib.positional import sinusoidal_frequencies

    assert rotary.sinusoidal_frequencies is sinusoidal_frequencies
    torch.testing.assert_close(rotary_frequencies(8), sinusoidal_frequencies(8), rtol=0, atol=0)
    torch.testing.assert_close(sinusoidal_frequencies(6, base=100.0),
                               torch.tensor([100.0 ** (-2 * i / 6) for i in range(3)], dtype=torch.float64))
