"""Tests for course_lib.pooling (Nadaraya-Watson attention pooling)."""

from __future__ import annotations

import math

import pytest
import torch

from course_lib.pooling import (
    KERNELS,
    NadarayaWatsonRegression,
    boxcar_kernel,
    epanechnikov_kernel,
    fit_width,
    gaussian_kernel,
    leave_one_out_mse,
    make_kernel_regression_data,
    nadaraya_watson,
    nadaraya_watson_weights,
    target_function,
)

TIER = "fast"  # course_tools/tiers.py

DT = torch.float64


def _points(q: int = 7, k: int = 11, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    queries = 5 * torch.rand(q, generator=gen, dtype=DT)
    keys = 5 * torch.rand(k, generator=gen, dtype=DT)
    values = torch.randn(k, generator=gen, dtype=DT)
    return queries, keys, values


def _brute_force(queries, keys, values, kernel, width):
    """Double loop over queries and keys, in Python floats."""
    out = []
    for q in queries.tolist():
        ks = [kernel(torch.tensor((q - k) / width, dtype=DT)).item() for k in keys.tolist()]
        total = sum(ks)
        out.append(sum(w * v for w, v in zip(ks, values.tolist())) / total)
    return torch.tensor(out, dtype=DT)


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_weights_are_a_distribution_and_match_brute_force(name):
    queries, keys, values = _points()
    width = 3.0  # wide enough that every query has keys in its window
    weights = nadaraya_watson_weights(queries, keys, kernel=name, width=width)
    assert weights.shape == (7, 11)
    assert (weights >= 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(7, dtype=DT))
    pred = nadaraya_watson(queries, keys, values, kernel=name, width=width)
    torch.testing.assert_close(pred, _brute_force(queries, keys, values, KERNELS[name], width))


def test_gaussian_equals_softmax_of_negative_squared_distance():
    queries, keys, _ = _points()
    for width in (0.3, 1.0, 2.5):
        expected = torch.softmax(-((queries[:, None] - keys[None, :]) ** 2) / (2 * width**2), dim=-1)
        torch.testing.assert_close(nadaraya_watson_weights(queries, keys, width=width), expected)
    # D2L's learnable factor w multiplies the distance: width = 1 / w
    w = 1.7
    d2l = torch.softmax(-(((queries[:, None] - keys[None, :]) * w) ** 2) / 2, dim=-1)
    torch.testing.assert_close(nadaraya_watson_weights(queries, keys, width=1 / w), d2l)


def test_kernel_shapes_and_support():
    u = torch.linspace(-2, 2, 401, dtype=DT)
    inside = u.abs() <= 1
    assert torch.equal(boxcar_kernel(u), inside.to(DT))
    epa = epanechnikov_kernel(u)
    assert (epa[~inside] == 0).all()
    torch.testing.assert_close(epa[inside], 0.75 * (1 - u[inside] ** 2))
    torch.testing.assert_close(gaussian_kernel(u), torch.exp(-u**2 / 2))
    # the Epanechnikov kernel is a density: integral over [-1, 1] is 1
    fine = torch.linspace(-1, 1, 20001, dtype=DT)
    assert abs(torch.trapezoid(epanechnikov_kernel(fine), fine).item() - 1) < 1e-6


@pytest.mark.parametrize("name", ["boxcar", "epanechnikov"])
def test_compact_kernels_give_zero_weight_outside_the_window(name):
    queries, keys, _ = _points(q=20, k=30)
    width = 0.8
    weights = nadaraya_watson_weights(queries, keys, kernel=name, width=width, empty="nan")
    far = (queries[:, None] - keys[None, :]).abs() >= width  # Epanechnikov is 0 at |u| = 1 too
    alive = ~torch.isnan(weights).any(-1)
    assert alive.any()
    assert (weights[alive][far[alive]] == 0).all()


def test_empty_window_policies():
    queries = torch.tensor([0.0, 10.0], dtype=DT)  # 10 is far from every key
    keys = torch.tensor([0.0, 0.5, 1.0, 2.0], dtype=DT)
    values = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=DT)
    for name in ("boxcar", "epanechnikov"):
        nearest = nadaraya_watson_weights(queries, keys, kernel=name, width=0.6)
        torch.testing.assert_close(nearest[1], torch.tensor([0.0, 0.0, 0.0, 1.0], dtype=DT))
        torch.testing.assert_close(nearest.sum(-1), torch.ones(2, dtype=DT))
        assert nearest[0, 0] > 0 and nearest[0, 2] == 0  # the live row is untouched
        nan = nadaraya_watson(queries, keys, values, kernel=name, width=0.6, empty="nan")
        assert not torch.isnan(nan[0]) and torch.isnan(nan[1])
        with pytest.raises(ValueError, match="no key within the kernel window"):
            nadaraya_watson_weights(queries, keys, kernel=name, width=0.6, empty="raise")
    # ties at equal distance share the weight
    tie = nadaraya_watson_weights(torch.tensor([5.0], dtype=DT), torch.tensor([4.0, 6.0, 0.0], dtype=DT),
                                  kernel="boxcar", width=0.5)
    torch.testing.assert_close(tie, torch.tensor([[0.5, 0.5, 0.0]], dtype=DT))


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_tiny_width_is_nearest_neighbour(name):
    queries, keys, values = _points(q=15, k=9, seed=3)
    nearest = (queries[:, None] - keys[None, :]).abs().argmin(dim=-1)
    pred = nadaraya_watson(queries, keys, values, kernel=name, width=1e-6)
    torch.testing.assert_close(pred, values[nearest])
    # even an absurdly small width stays finite for the Gaussian (no 0 / 0)
    assert torch.isfinite(nadaraya_watson(queries, keys, values, width=1e-200)).all()


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_huge_width_is_the_mean(name):
    queries, keys, values = _points()
    pred = nadaraya_watson(queries, keys, values, kernel=name, width=1e6)
    torch.testing.assert_close(pred, values.mean().expand(7))


def test_vector_values_and_custom_kernel():
    queries, keys, values = _points()
    many = torch.stack([values, 2 * values, -values], dim=1)  # (K, 3)
    out = nadaraya_watson(queries, keys, many, width=0.7)
    assert out.shape == (7, 3)
    one = nadaraya_watson(queries, keys, values, width=0.7)
    torch.testing.assert_close(out, torch.stack([one, 2 * one, -one], dim=1))
    # a callable kernel is used as given (the Gaussian passed as a function takes the same path)
    triangle = nadaraya_watson_weights(queries, keys, kernel=lambda u: torch.clamp(1 - u.abs(), min=0), width=4.0)
    torch.testing.assert_close(triangle.sum(-1), torch.ones(7, dtype=DT))
    torch.testing.assert_close(nadaraya_watson_weights(queries, keys, kernel=gaussian_kernel, width=0.7),
                               nadaraya_watson_weights(queries, keys, width=0.7))


def test_may_attend_excludes_keys():
    x = torch.tensor([0.0, 1.0, 2.0, 3.0], dtype=DT)
    others = ~torch.eye(4, dtype=torch.bool)
    for name in sorted(KERNELS):
        w = nadaraya_watson_weights(x, x, kernel=name, width=1.5, may_attend=others)
        assert (w.diagonal() == 0).all()
        torch.testing.assert_close(w.sum(-1), torch.ones(4, dtype=DT))
    # with a tiny width each point copies its nearest *other* neighbour
    w = nadaraya_watson_weights(x, x, width=1e-3, may_attend=others)
    torch.testing.assert_close(w[0], torch.tensor([0.0, 1.0, 0.0, 0.0], dtype=DT))


def test_bad_inputs_raise():
    q, k, v = _points()
    for width in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="width"):
            nadaraya_watson_weights(q, k, width=width)
    with pytest.raises(ValueError, match=r"\(Q,\)"):
        nadaraya_watson_weights(q[:, None], k)
    with pytest.raises(ValueError, match=r"\(K,\) or \(K, Dv\)"):
        nadaraya_watson(q, k, v[:-1])
    with pytest.raises(ValueError, match="unknown kernel"):
        nadaraya_watson_weights(q, k, kernel="cosine")
    with pytest.raises(ValueError, match="non-negative"):
        nadaraya_watson_weights(q, k, kernel=lambda u: -gaussian_kernel(u))
    with pytest.raises(ValueError, match=r"\(Q, K\)"):
        nadaraya_watson_weights(q, k, may_attend=torch.ones(3, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="no key it may attend to"):
        nadaraya_watson_weights(q, k, may_attend=torch.zeros(7, 11, dtype=torch.bool))
    with pytest.raises(ValueError, match="width"):
        NadarayaWatsonRegression(init_width=0.0)
    with pytest.raises(ValueError, match="noise"):
        make_kernel_regression_data(noise=-1.0)


def test_module_matches_function_and_records_weights():
    q, k, v = _points()
    model = NadarayaWatsonRegression(init_width=0.6).double()
    out = model(q, k, v)
    torch.testing.assert_close(out, nadaraya_watson(q, k, v, width=0.6))
    assert model.attention_weights is not None and model.attention_weights.shape == (7, 11)
    assert math.isclose(model.width.item(), 0.6, rel_tol=1e-6)
    # gradient of the output wrt log_width matches a float64 finite difference
    def f(log_w):
        return nadaraya_watson(q, k, v, width=log_w.exp()).sum()
    lw = torch.tensor(math.log(0.6), dtype=DT, requires_grad=True)
    assert torch.autograd.gradcheck(f, (lw,))


@pytest.mark.slow  # 0.16 s of CPU (a fast test stays under 0.1 s: course_tools/tiers.py)
def test_learned_width_lowers_leave_one_out_loss_and_no_collapse():
    data = make_kernel_regression_data()
    x, y = data.x_train.double(), data.y_train.double()
    model = NadarayaWatsonRegression(init_width=1.0).double()
    losses = fit_width(model, x, y, steps=100, lr=0.05)
    final = leave_one_out_mse(model, x, y).item()
    assert final < losses[0] - 0.1
    assert 0.05 < model.width.item() < 2.0
    # the learned width is near the best width on a grid (leave-one-out)
    grid = torch.linspace(0.05, 2.0, 100, dtype=DT)
    loo = torch.stack([leave_one_out_mse(NadarayaWatsonRegression(float(w)).double(), x, y) for w in grid])
    assert final <= loo.min().item() + 1e-3
    # without leave-one-out the width shrinks toward 0 and the training loss heads to 0
    cheat = NadarayaWatsonRegression(init_width=0.3).double()
    cheat_losses = fit_width(cheat, x, y, steps=60, lr=0.1, leave_one_out=False)
    assert cheat.width.item() < 0.1 and cheat_losses[-1] < 0.05


def test_data_generator():
    a = make_kernel_regression_data()
    b = make_kernel_regression_data()
    assert torch.equal(a.x_train, b.x_train) and torch.equal(a.y_train, b.y_train)
    assert a.x_train.shape == (50,) and a.x_test.shape == (50,)
    assert torch.all(a.x_train[1:] >= a.x_train[:-1]) and torch.all(a.x_test[1:] > a.x_test[:-1])
    assert 0 <= a.x_train.min() and a.x_train.max() <= 5 and a.x_test[0] == 0 and a.x_test[-1] == 5
    torch.testing.assert_close(a.y_test, 2 * torch.sin(a.x_test) + a.x_test**0.8)
    torch.testing.assert_close(target_function(torch.tensor([1.0])), torch.tensor([2 * math.sin(1.0) + 1.0]))
    residual = a.y_train - target_function(a.x_train)
    assert 0.3 < residual.std().item() < 0.7  # noise std 0.5
    c = make_kernel_regression_data(seed=1)
    assert not torch.equal(a.x_train, c.x_train)
    clean = make_kernel_regression_data(noise=0.0)
    torch.testing.assert_close(clean.y_train, target_function(clean.x_train))
