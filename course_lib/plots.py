"""Figures for the course: attention heatmaps, positional encodings, kernel regression, curves.

Shape letters: Q queries (heatmap rows), K keys (heatmap columns), H heads, R rows of a
grid (e.g. layers), C columns of a grid (e.g. heads), T positions, E model size, N points.

Every function *returns* a ``matplotlib.figure.Figure`` and never calls ``plt.show()``,
so it works headless (Agg) and in tests. Figures are created with ``plt.subplots``: in
Jupyter they appear by themselves at the end of the cell. Write ``fig = f(...)`` or end
the line with ``;`` — a bare ``f(...)`` as the cell's last line shows the figure twice
(once as the cell's value, once by the inline backend). Functions that draw a single
panel accept ``ax=`` to draw into an existing axes; they then return ``ax.figure``.

Inputs may be torch tensors (detached and moved to the CPU here) or anything
``numpy.asarray`` accepts. Wrong dimensions and label lists of the wrong length raise
``ValueError`` naming the expected shape or length.

Heatmap convention (the one used throughout the course): rows are queries, columns are
keys, so row i shows how query i spreads its attention over the keys and sums to one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

__all__ = [
    "attention_heatmap",
    "attention_grid",
    "positional_encoding_plot",
    "positional_encoding_heatmap",
    "plot_kernel_regression",
    "plot_curves",
    "plot_history",
]


def _figure_of(ax: Axes) -> Figure:
    """The top-level Figure that holds ``ax`` (also when ``ax`` sits in a SubFigure)."""
    fig = ax.get_figure(root=True)
    if not isinstance(fig, Figure):
        raise ValueError("ax is not attached to a matplotlib Figure")
    return fig


def _to_numpy(x: Any, name: str) -> np.ndarray:
    """A float numpy copy of a tensor or array-like (tensors are detached and moved to CPU)."""
    if hasattr(x, "detach"):  # torch.Tensor, without importing torch here
        x = x.detach().cpu()
        if hasattr(x, "float") and not x.dtype.is_floating_point:
            x = x.float()
        x = x.numpy()
    try:
        return np.asarray(x, dtype=float)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be numeric (a tensor or an array-like), got {type(x).__name__}") from err


def _check_labels(labels: Sequence[Any] | None, expected: int, name: str, what: str) -> list[str] | None:
    if labels is None:
        return None
    labels = [str(label) for label in labels]
    if len(labels) != expected:
        raise ValueError(f"{name} must have {expected} entries (one per {what}), got {len(labels)}")
    return labels


def _draw_heatmap(ax: Axes, w: np.ndarray, *, query_labels: list[str] | None, key_labels: list[str] | None,
                  cmap: str, vmin: float, vmax: float, annotate: bool, fmt: str,
                  xlabel: str | None, ylabel: str | None) -> Any:
    """Draw one (Q, K) heatmap on ``ax``; return the image (for a colorbar)."""
    num_q, num_k = w.shape
    image = ax.imshow(w, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest")
    ax.set_xticks(np.arange(num_k))
    ax.set_yticks(np.arange(num_q))
    if key_labels is not None:
        ax.set_xticklabels(key_labels, rotation=90)
    if query_labels is not None:
        ax.set_yticklabels(query_labels)
    if xlabel:
        ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    if annotate:
        middle = vmin + (vmax - vmin) / 2
        for i in range(num_q):
            for j in range(num_k):
                ax.text(j, i, format(w[i, j], fmt), ha="center", va="center", fontsize=8,
                        color="white" if w[i, j] > middle else "black")
    return image


def _colour_range(w: np.ndarray, vmin: float | None, vmax: float | None) -> tuple[float, float]:
    """Default colour range: from 0 (or the minimum if negative) to the maximum."""
    finite = w[np.isfinite(w)]
    lo = float(min(0.0, finite.min())) if finite.size else 0.0
    hi = float(finite.max()) if finite.size else 1.0
    lo = lo if vmin is None else vmin
    hi = hi if vmax is None else vmax
    if hi <= lo:  # a constant map (e.g. all zeros) still needs a non-empty range
        hi = lo + 1.0
    return lo, hi


def attention_heatmap(
    weights: Any,
    *,
    query_labels: Sequence[Any] | None = None,
    key_labels: Sequence[Any] | None = None,
    title: str | None = None,
    ax: Axes | None = None,
    cmap: str = "Reds",
    annotate: bool = False,
    fmt: str = ".2f",
    colorbar: bool = True,
    vmin: float | None = None,
    vmax: float | None = None,
    xlabel: str = "keys",
    ylabel: str = "queries",
    figsize: tuple[float, float] | None = None,
) -> Figure:
    """Heatmap of one attention matrix: rows are queries, columns are keys.

    Args:
        weights: (Q, K) attention weights (tensor or array). A leading axis of size 1
            (e.g. a batch of one) is squeezed away.
        query_labels: Q row labels (e.g. target tokens); default positions 0..Q-1.
        key_labels: K column labels (e.g. source tokens), drawn rotated; default 0..K-1.
        title: axes title.
        ax: draw into this axes instead of a new figure.
        cmap: matplotlib colour map.
        annotate: write each weight in its cell (with format ``fmt``).
        colorbar: add a colour bar.
        vmin, vmax: colour range; default from min(0, smallest weight) to the largest.
        xlabel, ylabel: axis names.
        figsize: size of a new figure; default grows with Q and K.

    Returns:
        The figure holding the heatmap.

    Shape:
        weights (Q, K) or (1, ..., 1, Q, K); query_labels Q; key_labels K.
    """
    w = _to_numpy(weights, "weights")
    while w.ndim > 2 and w.shape[0] == 1:
        w = w[0]
    if w.ndim != 2:
        raise ValueError(f"weights must have shape (Q, K), got {w.shape}; "
                         "use attention_grid for several heads (H, Q, K) or layers (R, C, Q, K)")
    num_q, num_k = w.shape
    q_labels = _check_labels(query_labels, num_q, "query_labels", "row of weights, Q")
    k_labels = _check_labels(key_labels, num_k, "key_labels", "column of weights, K")
    lo, hi = _colour_range(w, vmin, vmax)
    if ax is None:
        size = figsize or (max(3.0, 0.45 * num_k + 1.8), max(2.5, 0.4 * num_q + 1.2))
        fig, ax = plt.subplots(figsize=size, layout="constrained")
    else:
        fig = _figure_of(ax)
    image = _draw_heatmap(ax, w, query_labels=q_labels, key_labels=k_labels, cmap=cmap, vmin=lo, vmax=hi,
                          annotate=annotate, fmt=fmt, xlabel=xlabel, ylabel=ylabel)
    if title:
        ax.set_title(title)
    if colorbar:
        fig.colorbar(image, ax=ax, shrink=0.8)
    return fig


def attention_grid(
    weights: Any,
    *,
    query_labels: Sequence[Any] | None = None,
    key_labels: Sequence[Any] | None = None,
    titles: Sequence[str] | None = None,
    ncols: int | None = None,
    suptitle: str | None = None,
    cmap: str = "Reds",
    colorbar: bool = True,
    vmin: float | None = None,
    vmax: float | None = None,
    xlabel: str = "keys",
    ylabel: str = "queries",
    panel_size: float = 2.6,
) -> Figure:
    """One heatmap per head (H, Q, K) or per layer and head (R, C, Q, K), one colour scale.

    All panels share the same colour range (and a single colour bar), so colours compare
    across heads. Token labels are set on every panel; the tick labels are shown on the
    left column (queries) and on the lowest panel of each column (keys).

    Args:
        weights: (H, Q, K) — laid out in rows of ``ncols`` panels — or (R, C, Q, K) —
            an R x C grid, e.g. layers x heads.
        query_labels: Q row labels shared by all panels.
        key_labels: K column labels shared by all panels.
        titles: one title per panel (H, or R*C in row-major order); default "head h" or
            "layer r, head c" (counting from 1).
        ncols: panels per row for (H, Q, K) input; default min(H, 4). Not allowed with
            (R, C, Q, K) input, whose layout is fixed.
        suptitle: title of the whole figure.
        cmap, colorbar, vmin, vmax, xlabel, ylabel: as in :func:`attention_heatmap`.
        panel_size: width and height of each panel in inches.

    Returns:
        The figure; ``fig.axes`` lists the panels row by row, then the colour bar.

    Shape:
        weights (H, Q, K) or (R, C, Q, K); query_labels Q; key_labels K.
    """
    w = _to_numpy(weights, "weights")
    if w.ndim == 3:
        heads = w.shape[0]
        ncols = min(heads, 4) if ncols is None else ncols
        if ncols <= 0:
            raise ValueError(f"ncols must be positive, got {ncols}")
        nrows = -(-heads // ncols)
        panels = w
        default_titles = [f"head {h + 1}" for h in range(heads)]
    elif w.ndim == 4:
        if ncols is not None:
            raise ValueError("ncols applies to (H, Q, K) weights only; (R, C, Q, K) weights are drawn "
                             "as an R x C grid")
        nrows, ncols = w.shape[:2]
        panels = w.reshape(nrows * ncols, *w.shape[2:])  # (R*C, Q, K)
        default_titles = [f"layer {r + 1}, head {c + 1}" for r in range(nrows) for c in range(ncols)]
    else:
        raise ValueError(f"weights must have shape (H, Q, K) or (R, C, Q, K), got {w.shape}; "
                         "use attention_heatmap for a single (Q, K) matrix")
    count, num_q, num_k = panels.shape
    q_labels = _check_labels(query_labels, num_q, "query_labels", "query, Q")
    k_labels = _check_labels(key_labels, num_k, "key_labels", "key, K")
    if titles is not None and len(titles) != count:
        raise ValueError(f"titles must have {count} entries (one per panel), got {len(titles)}")
    titles = list(titles) if titles is not None else default_titles
    lo, hi = _colour_range(panels, vmin, vmax)

    fig, axes = plt.subplots(nrows, ncols, squeeze=False, layout="constrained",
                             figsize=(panel_size * ncols + (1.0 if colorbar else 0.0), panel_size * nrows))
    flat = list(axes.flat)
    image = None
    for index, ax in enumerate(flat):
        if index >= count:
            ax.remove()  # the unused tail of the last row
            continue
        row, col = divmod(index, ncols)
        is_bottom = index + ncols >= count
        image = _draw_heatmap(ax, panels[index], query_labels=q_labels, key_labels=k_labels, cmap=cmap,
                              vmin=lo, vmax=hi, annotate=False, fmt=".2f",
                              xlabel=xlabel if is_bottom else None, ylabel=ylabel if col == 0 else None)
        ax.tick_params(labelbottom=is_bottom, labelleft=col == 0)
        ax.set_title(titles[index])
    if suptitle:
        fig.suptitle(suptitle)
    if colorbar and image is not None:
        fig.colorbar(image, ax=flat[:count], shrink=0.8)
    return fig


def _check_table(table: Any) -> np.ndarray:
    t = _to_numpy(table, "table")
    while t.ndim > 2 and t.shape[0] == 1:  # e.g. PositionalEncoding.P of shape (1, T, E)
        t = t[0]
    if t.ndim != 2:
        raise ValueError(f"table must have shape (T, E) (positions x features), got {t.shape}")
    return t


def positional_encoding_plot(
    table: Any,
    *,
    columns: Sequence[int] = (6, 7, 8, 9),
    title: str | None = None,
    ax: Axes | None = None,
    figsize: tuple[float, float] = (6.0, 3.0),
) -> Figure:
    """Curves of a few encoding features (columns of the table) against position.

    Args:
        table: (T, E) encodings (or (1, T, E), e.g. ``PositionalEncoding.P``).
        columns: which features to draw; each must be in [0, E).
        title: axes title.
        ax: draw into this axes instead of a new figure.
        figsize: size of a new figure.

    Returns:
        The figure; one line per column, labelled "col j".

    Shape:
        table (T, E).
    """
    t = _check_table(table)
    num_pos, embed = t.shape
    columns = list(columns)
    if not columns:
        raise ValueError("columns must name at least one feature")
    bad = [c for c in columns if not 0 <= c < embed]
    if bad:
        raise ValueError(f"columns must lie in [0, E={embed}), got {bad}")
    if ax is None:
        fig, ax = plt.subplots(figsize=figsize, layout="constrained")
    else:
        fig = _figure_of(ax)
    positions = np.arange(num_pos)
    for c in columns:
        ax.plot(positions, t[:, c], label=f"col {c}")
    ax.set_xlabel("position")
    ax.set_ylabel("encoding value")
    ax.legend(loc="upper right", fontsize=8)
    if title:
        ax.set_title(title)
    return fig


def positional_encoding_heatmap(
    table: Any,
    *,
    title: str | None = None,
    ax: Axes | None = None,
    cmap: str = "RdBu_r",
    colorbar: bool = True,
    figsize: tuple[float, float] = (6.0, 4.0),
) -> Figure:
    """Heatmap of a positional encoding table: rows are positions, columns are features.

    Low features (left) oscillate fast along the positions, high features slowly — the
    binary-counter-like pattern of the sinusoidal encoding. The colour range is
    symmetric around 0.

    Args:
        table: (T, E) encodings (or (1, T, E)).
        title: axes title.
        ax: draw into this axes instead of a new figure.
        cmap: a diverging colour map.
        colorbar: add a colour bar.
        figsize: size of a new figure.

    Returns:
        The figure holding the heatmap.

    Shape:
        table (T, E).
    """
    t = _check_table(table)
    if ax is None:
        fig, ax = plt.subplots(figsize=figsize, layout="constrained")
    else:
        fig = _figure_of(ax)
    finite = np.abs(t[np.isfinite(t)])
    bound = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
    image = ax.imshow(t, cmap=cmap, vmin=-bound, vmax=bound, aspect="auto", interpolation="nearest")
    ax.set_xlabel("encoding dimension")
    ax.set_ylabel("position")
    if title:
        ax.set_title(title)
    if colorbar:
        fig.colorbar(image, ax=ax, shrink=0.8)
    return fig


def _as_vector(x: Any, name: str) -> np.ndarray:
    v = _to_numpy(x, name)
    if v.ndim == 2 and 1 in v.shape:  # (N, 1) or (1, N) column/row vectors
        v = v.reshape(-1)
    if v.ndim != 1:
        raise ValueError(f"{name} must be 1-D (N,), got shape {v.shape}")
    return v


def plot_kernel_regression(
    x_train: Any,
    y_train: Any,
    x_test: Any,
    y_true: Any,
    y_pred: Any | Mapping[str, Any],
    *,
    title: str | None = None,
    ax: Axes | None = None,
    figsize: tuple[float, float] = (6.0, 3.5),
) -> Figure:
    """Nadaraya-Watson style regression: training points, the true function, predictions.

    Args:
        x_train, y_train: the N noisy training pairs (drawn as dots).
        x_test, y_true: the M test inputs and the noise-free function there (a line).
        y_pred: the M predictions (a dashed line), or a mapping {name: M predictions}
            to compare several kernels / widths in one plot.
        title: axes title.
        ax: draw into this axes instead of a new figure.
        figsize: size of a new figure.

    Returns:
        The figure, with a legend.

    Shape:
        x_train (N,), y_train (N,), x_test (M,), y_true (M,), y_pred (M,) or {name: (M,)}.
    """
    xs, ys = _as_vector(x_train, "x_train"), _as_vector(y_train, "y_train")
    xt, yt = _as_vector(x_test, "x_test"), _as_vector(y_true, "y_true")
    if len(xs) != len(ys):
        raise ValueError(f"y_train must have N={len(xs)} entries like x_train, got {len(ys)}")
    if len(yt) != len(xt):
        raise ValueError(f"y_true must have M={len(xt)} entries like x_test, got {len(yt)}")
    preds = dict(y_pred) if isinstance(y_pred, Mapping) else {"prediction": y_pred}
    if not preds:
        raise ValueError("y_pred must hold at least one prediction")
    curves = {}
    for name, pred in preds.items():
        p = _as_vector(pred, f"y_pred[{name!r}]")
        if len(p) != len(xt):
            raise ValueError(f"y_pred[{name!r}] must have M={len(xt)} entries like x_test, got {len(p)}")
        curves[name] = p
    if ax is None:
        fig, ax = plt.subplots(figsize=figsize, layout="constrained")
    else:
        fig = _figure_of(ax)
    ax.plot(xs, ys, "o", alpha=0.5, markersize=4, label="training data")
    ax.plot(xt, yt, "-", color="black", label="truth")
    for name, p in curves.items():
        ax.plot(xt, p, "--", label=name)
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title)
    return fig


def plot_curves(
    curves: Mapping[str, Any],
    *,
    xlabel: str = "epoch",
    ylabel: str = "loss",
    logy: bool = False,
    title: str | None = None,
    ax: Axes | None = None,
    figsize: tuple[float, float] = (5.0, 3.0),
) -> Figure:
    """Line plot of named sequences (e.g. training and validation loss per epoch).

    Args:
        curves: {name: sequence of values}; value n is drawn at x = n + 1.
        xlabel, ylabel: axis names.
        logy: logarithmic y axis (values must then be positive).
        title: axes title.
        ax: draw into this axes instead of a new figure.
        figsize: size of a new figure.

    Returns:
        The figure, with one labelled line per entry.

    Shape:
        each curve (N_name,); the curves may have different lengths.
    """
    if not isinstance(curves, Mapping) or not curves:
        raise ValueError("curves must be a non-empty mapping {name: sequence of values}")
    values = {name: _as_vector(v, f"curves[{name!r}]") for name, v in curves.items()}
    for name, v in values.items():
        if v.size == 0:
            raise ValueError(f"curves[{name!r}] is empty")
        if logy and np.any(v[np.isfinite(v)] <= 0):
            raise ValueError(f"logy=True needs positive values, curves[{name!r}] has values <= 0")
    if ax is None:
        fig, ax = plt.subplots(figsize=figsize, layout="constrained")
    else:
        fig = _figure_of(ax)
    for name, v in values.items():
        ax.plot(np.arange(1, len(v) + 1), v, marker="o" if len(v) <= 30 else None, markersize=3, label=name)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logy:
        ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title)
    return fig


def plot_history(history: Any, *, figsize: tuple[float, float] | None = None) -> Figure:
    """Draw a :class:`course_lib.training.History`; returns the Figure.

    Left: loss per step (faint) and per epoch (at the step where each epoch ended), with
    the validation loss. Right (only if a metric was recorded): the metric per epoch.
    """
    from matplotlib.ticker import MaxNLocator

    ncols = 2 if history.val_metric else 1
    fig, axes = plt.subplots(1, ncols, figsize=figsize or (5.0 * ncols, 3.5), squeeze=False)
    ax = axes[0, 0]
    if history.step_loss:
        ax.plot(range(1, len(history.step_loss) + 1), history.step_loss, alpha=0.3, label="train (step)")
    if history.epoch_loss:
        ends = np.cumsum(history.epoch_steps)
        ax.plot(ends, history.epoch_loss, "o-", label="train (epoch mean)")
        if history.val_loss:
            ax.plot(ends[: len(history.val_loss)], history.val_loss, "s-", label="validation")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.legend()
    if history.val_metric:
        ax2 = axes[0, 1]
        ax2.plot(range(1, len(history.val_metric) + 1), history.val_metric, "o-")
        ax2.set_xlabel("epoch")
        ax2.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax2.set_ylabel(history.metric_name)
    fig.tight_layout()
    plt.close(fig)  # the caller displays it; avoid a second copy in notebooks
    return fig
