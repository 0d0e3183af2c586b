"""Tests for course_lib.plots: labels on axes, shapes, shared colour scale, errors."""

from __future__ import annotations

import matplotlib

TIER = "fast"  # course_tools/tiers.py

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from course_lib.plots import (  # noqa: E402
    attention_grid,
    attention_heatmap,
    plot_curves,
    plot_kernel_regression,
    positional_encoding_heatmap,
    positional_encoding_plot,
)
from course_lib.positional import sinusoidal_encoding  # noqa: E402

QUERIES = ["je", "suis", "ici", "<eos>"]
KEYS = ["i", "am", "here", ".", "<eos>"]


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _weights(*shape: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    return torch.softmax(torch.randn(*shape, generator=gen), dim=-1)


def _tick_texts(labels) -> list[str]:
    return [t.get_text() for t in labels]


def _images(fig: Figure):
    return [im for ax in fig.axes for im in ax.get_images()]


def test_heatmap_labels_both_axes_and_image_data():
    w = _weights(4, 5).requires_grad_()  # a tensor that needs grad is accepted
    fig = attention_heatmap(w, query_labels=QUERIES, key_labels=KEYS, title="alignment")
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert _tick_texts(ax.get_xticklabels()) == KEYS
    assert _tick_texts(ax.get_yticklabels()) == QUERIES
    assert all(t.get_rotation() == 90 for t in ax.get_xticklabels())
    assert ax.get_xlabel() == "keys" and ax.get_ylabel() == "queries"
    assert ax.get_title() == "alignment"
    (image,) = ax.get_images()
    # rows = queries, columns = keys, values unchanged
    np.testing.assert_allclose(np.asarray(image.get_array()), w.detach().numpy(), rtol=1e-6)
    assert len(fig.axes) == 2  # heatmap + colour bar
    plt.close(fig)


def test_heatmap_accepts_numpy_batch_of_one_and_existing_axes():
    w = _weights(1, 3, 3).numpy()
    fig, ax = plt.subplots()
    out = attention_heatmap(w, ax=ax, colorbar=False, xlabel="source", ylabel="target")
    assert out is fig
    assert ax.get_images()[0].get_array().shape == (3, 3)
    assert ax.get_xlabel() == "source" and ax.get_ylabel() == "target"
    assert len(fig.axes) == 1
    plt.close(fig)


def test_heatmap_annotate_writes_every_weight():
    w = torch.tensor([[0.25, 0.75], [1.0, 0.0], [0.5, 0.5]])
    fig = attention_heatmap(w, annotate=True, colorbar=False)
    texts = sorted(t.get_text() for t in fig.axes[0].texts)
    assert texts == sorted(["0.25", "0.75", "1.00", "0.00", "0.50", "0.50"])
    plt.close(fig)


def test_heatmap_default_colour_range_starts_at_zero():
    w = torch.tensor([[0.2, 0.8], [0.4, 0.6]])
    fig = attention_heatmap(w)
    image = fig.axes[0].get_images()[0]
    assert image.get_clim() == pytest.approx((0.0, 0.8))
    plt.close(fig)
    fig = attention_heatmap(torch.zeros(2, 2))  # a constant map still draws
    lo, hi = fig.axes[0].get_images()[0].get_clim()
    assert hi > lo
    plt.close(fig)


@pytest.mark.parametrize("kwargs, message", [
    ({"query_labels": ["a", "b"]}, "query_labels must have 4 entries"),
    ({"key_labels": ["a"] * 6}, "key_labels must have 5 entries"),
])
def test_heatmap_label_count_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        attention_heatmap(_weights(4, 5), **kwargs)


def test_heatmap_wrong_dims():
    with pytest.raises(ValueError, match=r"shape \(Q, K\)"):
        attention_heatmap(_weights(2, 4, 5))
    with pytest.raises(ValueError, match=r"shape \(Q, K\)"):
        attention_heatmap(torch.ones(5))


def test_grid_heads_shared_colour_scale_and_layout():
    w = _weights(6, 4, 5)
    w[2, 1] = torch.tensor([0.0, 0.0, 1.0, 0.0, 0.0])  # the global maximum lives in one head
    fig = attention_grid(w, query_labels=QUERIES, key_labels=KEYS, ncols=4, suptitle="heads")
    images = _images(fig)
    assert len(images) == 6
    assert {im.get_clim() for im in images} == {(0.0, 1.0)}
    panels = [ax for ax in fig.axes if ax.get_images()]
    assert [ax.get_title() for ax in panels] == [f"head {h}" for h in range(1, 7)]
    for h, (ax, im) in enumerate(zip(panels, images)):
        np.testing.assert_allclose(np.asarray(im.get_array()), w[h].numpy(), rtol=1e-6)
        # token names are shown on the left column and under the lowest panel of each column
        assert _tick_texts(ax.get_xticklabels()) == (KEYS if h >= 2 else [])
        assert _tick_texts(ax.get_yticklabels()) == (QUERIES if h % 4 == 0 else [])
    # 2 rows of 4, the last two slots removed; one colour bar for all panels
    assert len(fig.axes) == 6 + 1
    assert fig.get_suptitle() == "heads"
    assert [ax.get_ylabel() for ax in panels] == ["queries", "", "", "", "queries", ""]
    assert [ax.get_xlabel() for ax in panels] == ["", "", "keys", "keys", "keys", "keys"]
    plt.close(fig)


@pytest.mark.slow  # 0.15 s of CPU (a fast test stays under 0.1 s: course_tools/tiers.py)
def test_grid_layers_by_heads_and_titles():
    w = _weights(2, 3, 4, 5)
    titles = [f"L{r}H{c}" for r in range(2) for c in range(3)]
    fig = attention_grid(w, titles=titles)
    panels = [ax for ax in fig.axes if ax.get_images()]
    assert [ax.get_title() for ax in panels] == titles
    for index, ax in enumerate(panels):
        r, c = divmod(index, 3)
        np.testing.assert_allclose(np.asarray(ax.get_images()[0].get_array()), w[r, c].numpy(), rtol=1e-6)
    lo, hi = panels[0].get_images()[0].get_clim()
    assert hi == pytest.approx(float(w.max()))
    plt.close(fig)
    fig = attention_grid(w)
    assert fig.axes[4].get_title() == "layer 2, head 2"
    plt.close(fig)


@pytest.mark.parametrize("weights, kwargs, message", [
    (_weights(4, 5), {}, r"\(H, Q, K\) or \(R, C, Q, K\)"),
    (_weights(2, 4, 5), {"titles": ["a"]}, "titles must have 2 entries"),
    (_weights(2, 4, 5), {"query_labels": QUERIES[:3]}, "query_labels must have 4 entries"),
    (_weights(2, 4, 5), {"key_labels": KEYS + ["x"]}, "key_labels must have 5 entries"),
    (_weights(2, 4, 5), {"ncols": 0}, "ncols must be positive"),
    (_weights(2, 2, 4, 5), {"ncols": 2}, "ncols applies to"),
])
def test_grid_errors(weights, kwargs, message):
    with pytest.raises(ValueError, match=message):
        attention_grid(weights, **kwargs)


def test_positional_encoding_plot_columns():
    table = sinusoidal_encoding(40, 16)
    fig = positional_encoding_plot(table[None], columns=(6, 7, 8, 9))  # (1, T, E) works
    ax = fig.axes[0]
    lines = ax.get_lines()
    assert [line.get_label() for line in lines] == ["col 6", "col 7", "col 8", "col 9"]
    for column, line in zip((6, 7, 8, 9), lines):
        np.testing.assert_allclose(line.get_xdata(), np.arange(40))
        np.testing.assert_allclose(line.get_ydata(), table[:, column].numpy(), rtol=1e-6)
    assert ax.get_xlabel() == "position"
    plt.close(fig)
    with pytest.raises(ValueError, match=r"columns must lie in \[0, E=16\)"):
        positional_encoding_plot(table, columns=(3, 16))
    with pytest.raises(ValueError, match=r"shape \(T, E\)"):
        positional_encoding_plot(torch.zeros(5))


def test_positional_encoding_heatmap():
    table = sinusoidal_encoding(30, 12)
    fig = positional_encoding_heatmap(table)
    ax = fig.axes[0]
    image = ax.get_images()[0]
    assert image.get_array().shape == (30, 12)  # rows = positions, columns = features
    lo, hi = image.get_clim()
    assert lo == pytest.approx(-hi) and hi == pytest.approx(float(table.abs().max()))
    assert ax.get_ylabel() == "position" and ax.get_xlabel() == "encoding dimension"
    plt.close(fig)
    with pytest.raises(ValueError, match=r"shape \(T, E\)"):
        positional_encoding_heatmap(torch.zeros(2, 3, 4))


def test_kernel_regression_plot():
    x = torch.linspace(0, 5, 20)
    xt = torch.linspace(0, 5, 30)
    truth = 2 * torch.sin(xt) + xt ** 0.8
    fig = plot_kernel_regression(x, 2 * torch.sin(x), xt, truth, {"gaussian": truth + 0.1, "boxcar": truth},
                                 title="Nadaraya-Watson")
    ax = fig.axes[0]
    assert [line.get_label() for line in ax.get_lines()] == ["training data", "truth", "gaussian", "boxcar"]
    np.testing.assert_allclose(ax.get_lines()[2].get_ydata(), (truth + 0.1).numpy(), rtol=1e-6)
    assert ax.get_title() == "Nadaraya-Watson"
    plt.close(fig)
    fig = plot_kernel_regression(x.numpy(), x.numpy(), xt[:, None], truth, truth)  # (M, 1) column works
    assert fig.axes[0].get_lines()[2].get_label() == "prediction"
    plt.close(fig)


@pytest.mark.parametrize("args, message", [
    ((np.zeros(5), np.zeros(4), np.zeros(3), np.zeros(3), np.zeros(3)), "y_train must have N=5"),
    ((np.zeros(5), np.zeros(5), np.zeros(3), np.zeros(2), np.zeros(3)), "y_true must have M=3"),
    ((np.zeros(5), np.zeros(5), np.zeros(3), np.zeros(3), np.zeros(4)), r"y_pred\['prediction'\] must have M=3"),
    ((np.zeros((5, 2)), np.zeros(5), np.zeros(3), np.zeros(3), np.zeros(3)), r"x_train must be 1-D"),
])
def test_kernel_regression_errors(args, message):
    with pytest.raises(ValueError, match=message):
        plot_kernel_regression(*args)


def test_plot_curves():
    fig = plot_curves({"train": [3.0, 2.0, 1.5], "valid": torch.tensor([3.5, 2.5])}, ylabel="cross-entropy",
                      logy=True)
    ax = fig.axes[0]
    train, valid = ax.get_lines()
    assert (train.get_label(), valid.get_label()) == ("train", "valid")
    np.testing.assert_allclose(train.get_xdata(), [1, 2, 3])
    np.testing.assert_allclose(valid.get_ydata(), [3.5, 2.5])
    assert ax.get_yscale() == "log" and ax.get_ylabel() == "cross-entropy" and ax.get_xlabel() == "epoch"
    plt.close(fig)
    with pytest.raises(ValueError, match="positive"):
        plot_curves({"loss": [1.0, 0.0]}, logy=True)
    with pytest.raises(ValueError, match="non-empty mapping"):
        plot_curves({})
    with pytest.raises(ValueError, match="empty"):
        plot_curves({"loss": []})


def test_plots_are_imported_from_their_module_only():
    # no lazy re-exports in course_lib/__init__.py: one import path per plot function
    import course_lib
    from course_lib import plots

    for name in plots.__all__:
        assert callable(getattr(plots, name))
        assert name not in course_lib.__all__
        with pytest.raises(AttributeError):
            getattr(course_lib, name)
