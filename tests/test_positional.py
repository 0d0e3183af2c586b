"""Tests for course_lib.positional: the sinusoidal table, its shift property, the modules."""

from __future__ import annotations

import math

import pytest
import torch

from course_lib.positional import (
    LearnedPositionalEmbedding,
    PositionalEncoding,
    shift_matrix,
    sinusoidal_encoding,
)

TIER = "fast"  # course_tools/tiers.py

F64 = torch.float64


@pytest.fixture(scope="module")
def d2l():
    from course_lib.d2l_compat import import_d2l

    return import_d2l()


def _formula(num_positions: int, embed_dim: int) -> torch.Tensor:
    """PE(p, 2i) = sin(p / 10000^(2i/E)), PE(p, 2i+1) = cos(p / 10000^(2i/E)), one entry at a time."""
    table = torch.empty(num_positions, embed_dim, dtype=F64)
    for p in range(num_positions):
        for j in range(embed_dim):
            angle = p / 10000 ** ((j - j % 2) / embed_dim)
            table[p, j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
    return table


@pytest.mark.parametrize("embed_dim", [4, 16, 7])  # odd E: the last feature is a sine alone
def test_table_matches_formula(embed_dim):
    table = sinusoidal_encoding(50, embed_dim, dtype=F64)
    assert table.shape == (50, embed_dim) and table.dtype == F64
    torch.testing.assert_close(table, _formula(50, embed_dim), rtol=0, atol=1e-12)
    assert sinusoidal_encoding(50, embed_dim).dtype == torch.float32


def test_table_properties():
    table = sinusoidal_encoding(200, 32, dtype=F64)
    assert torch.equal(table[0, 0::2], torch.zeros(16, dtype=F64))  # sin(0)
    assert torch.equal(table[0, 1::2], torch.ones(16, dtype=F64))  # cos(0)
    # every (sin, cos) pair lies on the unit circle
    torch.testing.assert_close(table[:, 0::2] ** 2 + table[:, 1::2] ** 2, torch.ones(200, 16, dtype=F64))
    # distinct positions get distinct codes
    assert torch.cdist(table, table).add(torch.eye(200, dtype=F64)).min() > 0.1


def test_table_errors():
    with pytest.raises(ValueError, match="must be positive"):
        sinusoidal_encoding(0, 8)
    with pytest.raises(ValueError, match="must be positive"):
        sinusoidal_encoding(8, 0)


@pytest.mark.slow  # a parity test against d2l: importing d2l (pandas, its plotting) costs about 0.6 s of CPU
def test_vs_d2l_positional_encoding(d2l):
    # d2l builds its table in float32, hence the tolerance; positions < 100 keep its rounding small
    theirs = d2l.PositionalEncoding(32, 0.0, max_len=100).eval()
    ours = PositionalEncoding(32, 0.0, max_len=100).eval()
    torch.testing.assert_close(ours.P, theirs.P, rtol=0, atol=1e-5)
    x = torch.randn(2, 60, 32)
    torch.testing.assert_close(ours(x), theirs(x), rtol=0, atol=1e-5)


def test_module_adds_the_table_and_offset():
    pe = PositionalEncoding(8, max_len=20)
    x = torch.randn(3, 5, 8)
    table = sinusoidal_encoding(20, 8)
    torch.testing.assert_close(pe(x), x + table[:5])
    torch.testing.assert_close(pe(x, offset=7), x + table[7:12])
    # decoding one step at a time with offsets equals encoding the whole sequence
    steps = torch.cat([pe(x[:, t:t + 1], offset=t) for t in range(5)], dim=1)
    torch.testing.assert_close(steps, pe(x))


def test_module_errors():
    pe = PositionalEncoding(8, max_len=10)
    with pytest.raises(ValueError, match="exceed max_len=10"):
        pe(torch.zeros(1, 11, 8))
    with pytest.raises(ValueError, match="exceed max_len=10"):
        pe(torch.zeros(1, 4, 8), offset=7)
    with pytest.raises(ValueError, match=r"\(B, T, E=8\)"):
        pe(torch.zeros(4, 8))
    with pytest.raises(ValueError, match=r"\(B, T, E=8\)"):
        pe(torch.zeros(1, 4, 6))


def test_odd_embed_dim_module():
    pe = PositionalEncoding(7, max_len=30)
    x = torch.zeros(2, 30, 7)
    torch.testing.assert_close(pe(x)[0], _formula(30, 7).float())


def test_table_is_a_buffer_not_a_parameter():
    pe = PositionalEncoding(8, dropout=0.1, max_len=16)
    assert "P" in dict(pe.named_buffers())
    assert list(pe.parameters()) == []
    assert pe.P.shape == (1, 16, 8)
    assert "P" not in pe.state_dict()  # non-persistent: rebuilt, not saved
    pe = pe.to(F64)
    assert pe.P.dtype == F64
    x = torch.randn(2, 4, 8, dtype=F64)
    assert pe.eval()(x).dtype == F64


def test_dropout_only_in_training():
    pe = PositionalEncoding(16, dropout=0.5, max_len=10)
    x = torch.randn(4, 10, 16)
    torch.testing.assert_close(pe.eval()(x), x + sinusoidal_encoding(10, 16))
    torch.manual_seed(0)
    out = pe.train()(x)
    assert (out == 0).float().mean() > 0.3


@pytest.mark.parametrize("shift", [1, 3, 17, -5])
def test_shift_matrix_moves_positions(shift):
    embed_dim = 16
    table = sinusoidal_encoding(80, embed_dim, dtype=F64)
    M = shift_matrix(shift, embed_dim)
    assert M.shape == (embed_dim, embed_dim) and M.dtype == F64
    start = max(0, -shift)
    positions = torch.arange(start, 80 - max(shift, 0))
    # PE(p + k) = M_k PE(p) for every p, with the same M_k
    torch.testing.assert_close(table[positions + shift], table[positions] @ M.T, rtol=0, atol=1e-10)
    # a rotation: orthogonal, and it does not depend on p (built without knowing any position)
    torch.testing.assert_close(M @ M.T, torch.eye(embed_dim, dtype=F64))


def test_shift_matrices_compose():
    torch.testing.assert_close(shift_matrix(3, 8) @ shift_matrix(4, 8), shift_matrix(7, 8))
    torch.testing.assert_close(shift_matrix(0, 8), torch.eye(8, dtype=F64))
    with pytest.raises(ValueError, match="even embed_dim"):
        shift_matrix(1, 7)


def test_learned_positional_embedding():
    torch.manual_seed(0)
    lpe = LearnedPositionalEmbedding(max_len=12, embed_dim=6)
    assert [name for name, _ in lpe.named_parameters()] == ["embedding.weight"]
    x = torch.randn(2, 5, 6, requires_grad=True)
    out = lpe(x, offset=3)
    assert out.shape == (2, 5, 6)
    torch.testing.assert_close(out, x + lpe.embedding.weight[3:8])
    out.sum().backward()
    grad = lpe.embedding.weight.grad
    torch.testing.assert_close(grad[3:8], torch.full((5, 6), 2.0))  # summed over the batch of 2
    assert torch.all(grad[:3] == 0) and torch.all(grad[8:] == 0)  # unused positions get none
    torch.testing.assert_close(x.grad, torch.ones(2, 5, 6))
    with pytest.raises(ValueError, match="exceed max_len=12"):
        lpe(torch.zeros(1, 13, 6))
    with pytest.raises(ValueError, match=r"\(B, T, E=6\)"):
        lpe(torch.zeros(1, 3, 5))
