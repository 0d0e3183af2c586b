"""Nadaraya-Watson kernel regression: attention pooling with a fixed or learnable kernel.

Shape letters: Q queries, K keys (= training points), Dv value size.

Given training pairs (x_i, y_i) -- keys x_i and values y_i -- the Nadaraya-Watson
estimator predicts at a query x

    f(x) = sum_i alpha(x, x_i) y_i,   alpha(x, x_i) = k(u_i) / sum_j k(u_j),
    u_i = (x - x_i) / width,

a weighted average of the values whose weights depend on how close the query is to
each key. The weights are non-negative and sum to one over the keys: they are attention
weights, and the estimator is attention pooling with a hand-chosen scoring rule.

With the Gaussian kernel k(u) = exp(-u^2 / 2) the weights are exactly
``softmax(-(x - x_i)^2 / (2 width^2))`` over the keys. D2L writes the same model with a
learnable factor ``w`` that *multiplies* the distance, ``softmax(-((x - x_i) w)^2 / 2)``,
so ``width = 1 / |w|``.

Kernels with compact support (boxcar, Epanechnikov) give a query with no key inside its
window a row of zeros, and 0 / 0 is undefined. What happens then is chosen with
``empty=``: ``"nearest"`` (default) puts all the weight on the nearest key(s) -- the same
answer the Gaussian gives as width -> 0 -- ``"nan"`` returns NaN weights (handy for
plotting the gaps) and ``"raise"`` raises a ValueError.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor, nn

from course_lib.masking import REMOVED, reject_old_mask_names

__all__ = [
    "gaussian_kernel",
    "boxcar_kernel",
    "epanechnikov_kernel",
    "KERNELS",
    "nadaraya_watson_weights",
    "nadaraya_watson",
    "NadarayaWatsonRegression",
    "leave_one_out_mse",
    "fit_width",
    "target_function",
    "KernelRegressionData",
    "make_kernel_regression_data",
]

Kernel = Callable[[Tensor], Tensor]
EmptyRow = Literal["nearest", "nan", "raise"]


def gaussian_kernel(u: Tensor) -> Tensor:
    """Gaussian kernel exp(-u^2 / 2) (unnormalised: the constant cancels in the weights).

    Shape:
        any -> same shape.
    """
    return torch.exp(-0.5 * u**2)


def boxcar_kernel(u: Tensor) -> Tensor:
    """Boxcar (uniform) kernel: 1 where |u| <= 1, else 0.

    Shape:
        any -> same shape.
    """
    return (u.abs() <= 1).to(u.dtype if u.is_floating_point() else torch.get_default_dtype())


def epanechnikov_kernel(u: Tensor) -> Tensor:
    """Epanechnikov kernel 3/4 (1 - u^2) where |u| <= 1, else 0.

    Shape:
        any -> same shape.
    """
    return 0.75 * torch.clamp(1 - u**2, min=0)


KERNELS: dict[str, Kernel] = {
    "gaussian": gaussian_kernel,
    "boxcar": boxcar_kernel,
    "epanechnikov": epanechnikov_kernel,
}


def _check_width(width: float | Tensor) -> None:
    if isinstance(width, Tensor):
        if width.numel() != 1:
            raise ValueError(f"width must be a scalar, got a tensor of shape {tuple(width.shape)}")
        w = width.detach()
        bad = not bool(w > 0) or not bool(torch.isfinite(w))
    else:
        bad = not (width > 0) or math.isinf(width)
    if bad:
        raise ValueError(f"width must be a finite positive number, got {float(width.detach()) if isinstance(width, Tensor) else width}")


def _check_points(queries: Tensor, keys: Tensor) -> None:
    if queries.dim() != 1 or keys.dim() != 1:
        raise ValueError(f"queries must have shape (Q,) and keys shape (K,) (scalar features); got "
                         f"{tuple(queries.shape)} and {tuple(keys.shape)}")
    if keys.shape[0] == 0:
        raise ValueError("keys must contain at least one point, got shape (0,)")


def _resolve_kernel(kernel: str | Kernel) -> Kernel:
    if callable(kernel):
        return kernel
    if kernel not in KERNELS:
        raise ValueError(f"unknown kernel {kernel!r}; choose one of {sorted(KERNELS)} or pass a function")
    return KERNELS[kernel]


def _nearest_weights(sq_dist: Tensor) -> Tensor:
    """One-hot (ties shared equally) on the nearest key(s) of each row. (Q, K) -> (Q, K)."""
    nearest = (sq_dist == sq_dist.min(dim=-1, keepdim=True).values).to(sq_dist.dtype)
    return nearest / nearest.sum(dim=-1, keepdim=True)


def nadaraya_watson_weights(
    queries: Tensor,
    keys: Tensor,
    *,
    kernel: str | Kernel = "gaussian",
    width: float | Tensor = 1.0,
    may_attend: Tensor | None = None,
    empty: EmptyRow = "nearest",
    attn_mask: object = REMOVED,
) -> Tensor:
    """Attention weights alpha(q, k) = k((q - k) / width) / sum_k' k((q - k') / width).

    The Gaussian is computed as a softmax of -(q - k)^2 / (2 width^2) after subtracting each
    row's smallest squared distance, so it stays finite for any width > 0 (a tiny width gives
    nearest-neighbour weights instead of 0 / 0).

    Args:
        queries: (Q,) points where the regression is evaluated.
        keys: (K,) training inputs.
        kernel: a name from :data:`KERNELS` or a function of u = (q - k) / width returning
            non-negative values.
        width: kernel width (bandwidth), > 0; a scalar tensor may carry gradients.
        may_attend: optional boolean (Q, K), True = the query may attend to the key
            (:mod:`course_lib.masking`). Used for leave-one-out: ``~torch.eye(K, dtype=bool)``.
        empty: what a row with no key inside the kernel's support gets: ``"nearest"`` (all
            weight on the nearest allowed key, ties shared), ``"nan"`` or ``"raise"``.

    Returns:
        (Q, K) weights, non-negative, each row summing to one (unless ``empty="nan"``).

    Shape:
        queries (Q,), keys (K,) -> (Q, K)
    """
    reject_old_mask_names("nadaraya_watson_weights", attn_mask=attn_mask)
    _check_points(queries, keys)
    _check_width(width)
    if empty not in ("nearest", "nan", "raise"):
        raise ValueError(f"empty must be 'nearest', 'nan' or 'raise', got {empty!r}")
    if may_attend is not None:
        if may_attend.dtype != torch.bool or tuple(may_attend.shape) != (queries.shape[0], keys.shape[0]):
            raise ValueError(f"may_attend must be a boolean (Q, K) = ({queries.shape[0]}, {keys.shape[0]}) "
                             f"tensor, got {may_attend.dtype} of shape {tuple(may_attend.shape)}")
        if not bool(may_attend.any(dim=-1).all()):
            raise ValueError("may_attend leaves a query with no key it may attend to")

    diff = queries[:, None] - keys[None, :]  # (Q, K)
    sq_dist = diff**2
    allowed_sq_dist = sq_dist if may_attend is None else sq_dist.masked_fill(~may_attend, float("inf"))

    if kernel == "gaussian" or kernel is gaussian_kernel:
        # Shift by the row minimum (softmax is shift-invariant); divide twice because
        # width**2 underflows to 0 for tiny widths. Masked keys are filled after the
        # division so that no inf ever meets the width in the backward pass.
        shifted = sq_dist - allowed_sq_dist.min(dim=-1, keepdim=True).values.detach()
        logits = -0.5 * (shifted / width) / width  # (Q, K)
        if may_attend is not None:
            logits = logits.masked_fill(~may_attend, float("-inf"))
        return torch.softmax(logits, dim=-1)

    scores = _resolve_kernel(kernel)(diff / width)
    if may_attend is not None:
        scores = scores.masked_fill(~may_attend, 0.0)
    if bool((scores < 0).any()):
        raise ValueError("the kernel returned negative values; attention weights must be non-negative")
    total = scores.sum(dim=-1, keepdim=True)  # (Q, 1)
    dead = total == 0
    if not bool(dead.any()):
        return scores / total
    if empty == "raise":
        rows = dead.squeeze(-1).nonzero().squeeze(-1).tolist()
        raise ValueError(f"queries at rows {rows} have no key within the kernel window "
                         f"(width={float(width)}); widen the kernel or pass empty='nearest'/'nan'")
    safe = scores / total.masked_fill(dead, 1.0)
    fallback = _nearest_weights(allowed_sq_dist) if empty == "nearest" else torch.full_like(scores, float("nan"))
    return torch.where(dead, fallback, safe)


def nadaraya_watson(
    queries: Tensor,
    keys: Tensor,
    values: Tensor,
    *,
    kernel: str | Kernel = "gaussian",
    width: float | Tensor = 1.0,
    may_attend: Tensor | None = None,
    empty: EmptyRow = "nearest",
    attn_mask: object = REMOVED,
) -> Tensor:
    """Nadaraya-Watson prediction f(q) = sum_k alpha(q, k) v_k.

    Args:
        queries: (Q,).
        keys: (K,).
        values: (K,) or (K, Dv) targets of the training points.
        kernel, width, may_attend, empty: as in :func:`nadaraya_watson_weights`.

    Returns:
        (Q,) if values is (K,), else (Q, Dv).

    Shape:
        queries (Q,), keys (K,), values (K,) or (K, Dv) -> (Q,) or (Q, Dv)
    """
    if values.dim() not in (1, 2) or values.shape[0] != keys.shape[0]:
        raise ValueError(f"values must have shape (K,) or (K, Dv) with K={keys.shape[0]} "
                         f"(one per key), got {tuple(values.shape)}")
    weights = nadaraya_watson_weights(queries, keys, kernel=kernel, width=width,
                                      may_attend=may_attend, empty=empty, attn_mask=attn_mask)
    return weights @ values.to(weights.dtype)


class NadarayaWatsonRegression(nn.Module):
    """Nadaraya-Watson regression whose kernel width is learned.

    The width is kept positive by learning its logarithm: ``width = exp(log_width)``. D2L's
    parametric version learns a factor ``w`` multiplying the distance instead; the two
    describe the same model with ``width = 1 / |w|``.

    Why training needs leave-one-out: if the training points are also the keys, every point
    can attend to *itself*. Shrinking the width then puts all the weight on the point itself
    and reproduces its label exactly, so the training loss goes to 0 as width -> 0 and the
    model memorises the noise. Masking each point's own key (``may_attend=~eye``) fixes this:
    each point must be predicted from its neighbours, and the loss has a minimum at a useful
    width. (D2L avoids the collapse by removing the query's own pair from its keys.)

    Args:
        init_width: starting width (> 0).
        kernel: a kernel name or function (the default Gaussian is smooth in the width).

    Shape:
        queries (Q,), keys (K,), values (K,) or (K, Dv) -> (Q,) or (Q, Dv).
        After a forward pass, ``attention_weights`` holds the (Q, K) weights, detached.
    """

    def __init__(self, init_width: float = 1.0, kernel: str | Kernel = "gaussian") -> None:
        super().__init__()
        _check_width(init_width)
        _resolve_kernel(kernel)
        self.kernel = kernel
        self.log_width = nn.Parameter(torch.tensor(math.log(init_width)))
        self.attention_weights: Tensor | None = None

    @property
    def width(self) -> Tensor:
        """The current kernel width, exp(log_width) (a scalar tensor)."""
        return self.log_width.exp()

    def forward(self, queries: Tensor, keys: Tensor, values: Tensor,
                may_attend: Tensor | None = None, *, attn_mask: object = REMOVED) -> Tensor:
        if values.dim() not in (1, 2) or values.shape[0] != keys.shape[0]:
            raise ValueError(f"values must have shape (K,) or (K, Dv) with K={keys.shape[0]}, "
                             f"got {tuple(values.shape)}")
        width = self.width.to(queries.dtype)
        weights = nadaraya_watson_weights(queries, keys, kernel=self.kernel, width=width,
                                          may_attend=may_attend, attn_mask=attn_mask)  # (Q, K)
        self.attention_weights = weights.detach()
        return weights @ values.to(weights.dtype)


def leave_one_out_mse(model: NadarayaWatsonRegression, x: Tensor, y: Tensor) -> Tensor:
    """Mean squared error of predicting each training point from all the *other* points.

    Args:
        model: the regression model.
        x: (K,) training inputs (used as queries and as keys).
        y: (K,) training targets.

    Returns:
        A scalar tensor (differentiable with respect to the width).
    """
    if x.dim() != 1 or y.shape != x.shape:
        raise ValueError(f"x and y must both have shape (K,), got {tuple(x.shape)} and {tuple(y.shape)}")
    if x.shape[0] < 2:
        raise ValueError("leave-one-out needs at least 2 training points")
    others = ~torch.eye(x.shape[0], dtype=torch.bool, device=x.device)  # (K, K)
    return ((model(x, x, y, may_attend=others) - y) ** 2).mean()


def fit_width(model: NadarayaWatsonRegression, x: Tensor, y: Tensor, *, steps: int = 100,
              lr: float = 0.1, leave_one_out: bool = True) -> list[float]:
    """Fit the model's width on training points by gradient descent (Adam on log_width).

    Args:
        model: the regression model; its ``log_width`` is updated in place.
        x: (K,) training inputs.
        y: (K,) training targets.
        steps: number of full-batch steps.
        lr: Adam learning rate.
        leave_one_out: mask each point's own key (see :class:`NadarayaWatsonRegression`).
            With False the loss keeps falling as the width shrinks toward 0.

    Returns:
        The loss before each step (length ``steps``).
    """
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    losses: list[float] = []
    for _ in range(steps):
        optimizer.zero_grad()
        if leave_one_out:
            loss = leave_one_out_mse(model, x, y)
        else:
            loss = ((model(x, x, y) - y) ** 2).mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def target_function(x: Tensor) -> Tensor:
    """The regression target f(x) = 2 sin(x) + x^0.8 (defined for x >= 0)."""
    return 2 * torch.sin(x) + x**0.8


@dataclass
class KernelRegressionData:
    """Training points (noisy) and a sorted test grid with the noise-free truth."""

    x_train: Tensor  # (K,) sorted
    y_train: Tensor  # (K,)
    x_test: Tensor  # (Q,) sorted grid
    y_test: Tensor  # (Q,) f(x_test), no noise


def make_kernel_regression_data(n_train: int = 50, n_test: int = 50, noise: float = 0.5,
                                seed: int = 0, low: float = 0.0, high: float = 5.0) -> KernelRegressionData:
    """Noisy samples of :func:`target_function` on [low, high].

    Args:
        n_train: number of training points, drawn uniformly and sorted.
        n_test: number of test points on an evenly spaced grid over [low, high].
        noise: standard deviation of the Gaussian noise added to the training targets.
        seed: seed of a private generator (the global RNG is not touched).
        low, high: the interval (low >= 0 since x^0.8 needs x >= 0).

    Returns:
        A :class:`KernelRegressionData` of float32 tensors.
    """
    if n_train < 1 or n_test < 1:
        raise ValueError(f"n_train and n_test must be >= 1, got {n_train} and {n_test}")
    if noise < 0:
        raise ValueError(f"noise is a standard deviation and must be >= 0, got {noise}")
    if not 0 <= low < high:
        raise ValueError(f"need 0 <= low < high, got low={low}, high={high}")
    gen = torch.Generator().manual_seed(seed)
    x_train, _ = torch.sort(low + (high - low) * torch.rand(n_train, generator=gen))
    y_train = target_function(x_train) + noise * torch.randn(n_train, generator=gen)
    x_test = torch.linspace(low, high, n_test)
    return KernelRegressionData(x_train, y_train, x_test, target_function(x_test))
