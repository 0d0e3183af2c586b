"""Training: a masked loss and a small training loop with history.

Shape letters: B batch, L target length, T language-model sequence length,
V vocabulary size.

The loop (:func:`fit`) is deliberately plain: for each batch, ``loss_fn(model, batch)``,
``backward``, clip the gradient norm, ``optimizer.step()``. It records numbers and never
draws; call :meth:`History.plot` afterwards (it draws with :mod:`course_lib.plots`).
(D2L redraws its figure during training, which costs more time than the training itself
on small models.) Checkpoints are in :mod:`course_lib.checkpoints`.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import random
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "set_seed",
    "setup_lesson",
    "LessonSetup",
    "eval_mode",
    "masked_cross_entropy",
    "d2l_masked_softmax_ce",
    "seq2seq_loss",
    "lm_loss",
    "count_tokens",
    "move_to_device",
    "TrainConfig",
    "Checkpoint",
    "History",
    "fit",
    "evaluate_loss",
]


# --------------------------------------------------------------------------- seeding and modes


def set_seed(seed: int, strict: bool = False) -> None:
    """Seed Python's, NumPy's and PyTorch's random generators.

    Also turns off cuDNN autotuning and asks cuDNN for deterministic kernels (free on
    CPU, cheap on GPU). On CPU that is enough for identical runs.

    Args:
        seed: the seed.
        strict: also call ``torch.use_deterministic_algorithms(True, warn_only=True)``,
            a global switch that warns about every operation without a deterministic
            version (useful on GPU, noisy elsewhere).
    """
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    if strict:
        torch.use_deterministic_algorithms(True, warn_only=True)


class LessonSetup(NamedTuple):
    """What :func:`setup_lesson` returns: the training seed and the device."""

    seed: int
    device: torch.device


def setup_lesson(precision: int = 4) -> LessonSetup:
    """The first cell of every lesson: ``SEED, device = setup_lesson()``.

    Seeds Python, NumPy and PyTorch with 0 (:func:`set_seed`), so that the lesson's examples
    are the same on every run, and prints tensors with ``precision`` decimals, never in
    scientific notation. Chinese text in figures (the Chinese edition, issue 23) is drawn with
    an installed CJK font as matplotlib's fallback (:func:`course_lib.fonts.use_cjk_font`;
    Latin text keeps its font).

    Returns:
        The training seed, from the environment variable ``COURSE_SEED`` (default 0; the
        lessons train with it, and benchmarks/bench_lesson_seeds.py runs them with others),
        and the device, from ``COURSE_DEVICE`` (default ``"cpu"``: the lessons are sized for
        a laptop CPU and their committed outputs come from one; ``COURSE_DEVICE=cuda`` runs
        them on a GPU).
    """
    set_seed(0)
    torch.set_printoptions(precision=precision, sci_mode=False)
    # torch.utils.benchmark (lessons 6 and 9) imports torch.utils.cpp_extension, which warns on
    # stderr on machines with a CUDA toolkit but no CUDA runtime: irrelevant to a lesson, and it
    # would make the committed notebooks differ from a run on such a machine.
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    from course_lib.fonts import use_cjk_font
    use_cjk_font()
    return LessonSetup(int(os.environ.get("COURSE_SEED", "0")), torch.device(os.environ.get("COURSE_DEVICE", "cpu")))


@contextmanager
def eval_mode(model: Any) -> Iterator[Any]:
    """Put ``model`` in evaluation mode (dropout off) for the ``with`` block, then restore
    its train/eval mode, even if the block raises. Gradients are not switched off: add
    ``torch.no_grad()`` where none are needed. (A model without ``eval``/``train``
    methods, e.g. a plain object implementing the decoding interface, is left alone.)"""
    was_training = bool(getattr(model, "training", False))
    if hasattr(model, "eval"):
        model.eval()
    try:
        yield model
    finally:
        if hasattr(model, "train"):
            model.train(was_training)


# --------------------------------------------------------------------------- losses


def _real_token_mask(targets: Tensor, valid_lens: Tensor | None, pad_id: int) -> Tensor:
    if valid_lens is None:
        return targets != pad_id
    if valid_lens.dim() != 1 or valid_lens.shape[0] != targets.shape[0]:
        raise ValueError(
            f"valid_lens must have shape (B,) = ({targets.shape[0]},), got {tuple(valid_lens.shape)}"
        )
    positions = torch.arange(targets.shape[1], device=targets.device)
    return positions.unsqueeze(0) < valid_lens.to(targets.device).unsqueeze(1)  # (B, L)


def _check_lm_shapes(logits: Tensor, targets: Tensor) -> None:
    if logits.dim() != 3:
        raise ValueError(f"logits must have shape (B, L, V), got {tuple(logits.shape)}")
    if targets.shape != logits.shape[:2]:
        raise ValueError(
            f"targets must have shape (B, L) = {tuple(logits.shape[:2])} to match the logits, "
            f"got {tuple(targets.shape)}"
        )


def masked_cross_entropy(
    logits: Tensor,
    targets: Tensor,
    valid_lens: Tensor | None = None,
    pad_id: int = 0,
    label_smoothing: float = 0.0,
    reduction: str = "mean",
) -> Tensor:
    """Cross-entropy over the real (non-padding) target tokens only.

    Padded positions are removed *before* the loss is computed, so whatever the model
    outputs there (even ``inf`` or ``nan``) changes neither the loss nor any gradient.

    With ``reduction="mean"`` the result is the mean over real tokens of the whole batch,
    ``sum(loss over real tokens) / number of real tokens``: every token weighs the same,
    whatever the length of its sentence. D2L's ``MaskedSoftmaxCELoss`` (reproduced in
    :func:`d2l_masked_softmax_ce`) instead averages each row over all ``L`` positions,
    padding zeros included, then over rows, so a short sentence in a long padded batch
    gets a smaller loss and a smaller gradient than the same sentence alone.

    Args:
        logits: unnormalized scores.
        targets: target token ids.
        valid_lens: number of real tokens per row (positions ``j < valid_lens[b]`` count).
            If None, the real tokens are those ``!= pad_id``.
        pad_id: the padding id (used only when ``valid_lens`` is None).
        label_smoothing: as in ``F.cross_entropy``.
        reduction: ``"mean"`` (per real token), ``"sum"``, ``"per_sequence"`` (``(B,)``,
            the mean over each row's real tokens; 0 for an empty row) or ``"none"``
            (``(B, L)`` with 0 at padded positions).

    Returns:
        A scalar, or a ``(B,)`` / ``(B, L)`` tensor as ``reduction`` says.

    Shape:
        logits ``(B, L, V)``, targets ``(B, L)``, valid_lens ``(B,)``.
    """
    _check_lm_shapes(logits, targets)
    mask = _real_token_mask(targets, valid_lens, pad_id)  # (B, L) True = real token
    token_loss = F.cross_entropy(
        logits[mask], targets[mask], reduction="none", label_smoothing=label_smoothing
    )  # (N,) for the N real tokens
    if reduction == "mean":
        return token_loss.sum() / mask.sum().clamp(min=1)
    if reduction == "sum":
        return token_loss.sum()
    full = logits.new_zeros(targets.shape).masked_scatter(mask, token_loss)  # (B, L)
    if reduction == "none":
        return full
    if reduction == "per_sequence":
        return full.sum(dim=1) / mask.sum(dim=1).clamp(min=1)
    raise ValueError(
        f"reduction must be 'mean', 'sum', 'per_sequence' or 'none', got {reduction!r}"
    )


def d2l_masked_softmax_ce(logits: Tensor, targets: Tensor, valid_lens: Tensor) -> Tensor:
    """D2L's ``MaskedSoftmaxCELoss``, for comparison: per row, padding zeros included.

    Row ``b`` gets ``sum(loss over its first valid_lens[b] tokens) / L``: the division is
    by the padded length ``L``, not by the number of real tokens. Taking ``.mean()`` of
    the result is not the per-token mean of :func:`masked_cross_entropy` unless every
    row is full. Unlike :func:`masked_cross_entropy`, padded logits still enter the
    computation (multiplied by 0), so a ``nan`` there poisons the loss.

    Args:
        logits: unnormalized scores.
        targets: target token ids.
        valid_lens: number of real tokens per row.

    Returns:
        The loss per row.

    Shape:
        logits ``(B, L, V)``, targets ``(B, L)``, valid_lens ``(B,)`` -> ``(B,)``.
    """
    _check_lm_shapes(logits, targets)
    weights = _real_token_mask(targets, valid_lens, pad_id=0).to(logits.dtype)  # (B, L)
    unweighted = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")  # (B, L)
    return (unweighted * weights).mean(dim=1)


def seq2seq_loss(model: nn.Module, batch: Any, pad_id: int = 0, label_smoothing: float = 0.0) -> Tensor:
    """Teacher-forced loss of a seq2seq model on a ``Seq2SeqBatch``, per real target token.

    Calls ``model(batch.src, batch.src_valid_lens, batch.tgt_in)`` and compares the logits
    with ``batch.tgt_out`` over its first ``batch.tgt_valid_lens`` positions.

    Args:
        model: a model with ``forward(src, src_valid_lens, tgt_in) -> logits (B, L, V)``.
        batch: an object with ``src, src_valid_lens, tgt_in, tgt_out, tgt_valid_lens``.
        pad_id: padding id (used if the batch has no ``tgt_valid_lens``).
        label_smoothing: as in ``F.cross_entropy``.

    Returns:
        The scalar mean loss over real target tokens.
    """
    logits = model(batch.src, batch.src_valid_lens, batch.tgt_in)
    valid = getattr(batch, "tgt_valid_lens", None)
    return masked_cross_entropy(
        logits, batch.tgt_out, valid, pad_id=pad_id, label_smoothing=label_smoothing
    )


def lm_loss(model: nn.Module, batch: tuple[Tensor, Tensor]) -> Tensor:
    """Next-token loss of a language model on a batch ``(x, y)``, y = x shifted by one.

    Args:
        model: ``model(x)`` returns logits ``(B, T, V)`` (or a tuple whose first item is).
        batch: ``(x, y)``, both ``(B, T)`` long tensors.

    Returns:
        The scalar mean cross-entropy over all ``B * T`` positions (LM batches have no
        padding).
    """
    x, y = batch
    out = model(x)
    logits = out[0] if isinstance(out, tuple) else out
    _check_lm_shapes(logits, y)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))  # (B*T, V)


def count_tokens(batch: Any) -> int | None:
    """Number of target tokens in a batch, for throughput figures.

    ``Seq2SeqBatch``-like objects: ``tgt_valid_lens.sum()``; ``(x, y)`` tuples:
    ``y.numel()``; anything else: None (no throughput is recorded).
    """
    valid = getattr(batch, "tgt_valid_lens", None)
    if isinstance(valid, Tensor):
        return int(valid.sum())
    if isinstance(batch, (tuple, list)) and len(batch) == 2 and isinstance(batch[1], Tensor):
        return int(batch[1].numel())
    return None


def move_to_device(batch: Any, device: torch.device | str) -> Any:
    """Move every tensor in a batch (tensor, tuple, list, dict or dataclass) to ``device``."""
    if isinstance(batch, Tensor):
        return batch.to(device)
    if dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        changes = {f.name: move_to_device(getattr(batch, f.name), device) for f in dataclasses.fields(batch)}
        return dataclasses.replace(batch, **changes)
    if isinstance(batch, tuple):
        return type(batch)(*(move_to_device(b, device) for b in batch)) if hasattr(batch, "_fields") \
            else tuple(move_to_device(b, device) for b in batch)
    if isinstance(batch, list):
        return [move_to_device(b, device) for b in batch]
    if isinstance(batch, dict):
        return {k: move_to_device(v, device) for k, v in batch.items()}
    return batch


# --------------------------------------------------------------------------- the loop


@dataclass
class TrainConfig:
    """Hyperparameters of :func:`fit`.

    Attributes:
        epochs: passes over the training data.
        lr: learning rate of the Adam optimizer :func:`fit` creates when none is given
            (ignored when you pass an optimizer).
        clip_grad_norm: clip the global gradient norm to this (None or 0: no clipping).
        log_every: print the mean loss every this many steps (0: never print). Printing
            ends up in committed notebook outputs, so lessons leave it at 0.
        seed: if not None, :func:`set_seed` is called before training (affects dropout
            and data shuffling, not the already initialized weights).
        device: where the model and batches go.
        progress: show a ``tqdm.auto`` progress bar (True), hide it (False), or let tqdm
            decide (None: hidden when the output is not a terminal).
        max_seconds: stop after the step during which this much time has passed since
            :func:`fit` started, validation included (lessons can say "train for 60 s").
            The epoch cut short is still recorded and validated. None: no limit.
        max_steps: stop after this many optimizer steps. None: no limit.
        checkpoint_every: call :func:`fit`'s ``on_checkpoint`` after every this many
            optimizer steps (steps ``k, 2k, ...``; 0: never).
    """

    epochs: int = 10
    lr: float = 1e-3
    clip_grad_norm: float | None = 1.0
    log_every: int = 0
    seed: int | None = 0
    device: str = "cpu"
    progress: bool | None = True
    max_seconds: float | None = None
    max_steps: int | None = None
    checkpoint_every: int = 0

    def __post_init__(self) -> None:
        if self.epochs < 0:
            raise ValueError(f"epochs must be >= 0, got {self.epochs}")
        if self.lr <= 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if self.log_every < 0:
            raise ValueError(f"log_every must be >= 0, got {self.log_every}")
        if self.checkpoint_every < 0:
            raise ValueError(f"checkpoint_every must be >= 0, got {self.checkpoint_every}")


@dataclass(frozen=True)
class Checkpoint:
    """One call of :func:`fit`'s ``on_checkpoint``: where training was, and what it returned.

    Attributes:
        step: optimizer steps done so far.
        epoch: the epoch the step belongs to (1-based).
        train_seconds: wall time spent training so far: :func:`fit`'s time minus the
            time of validation and of earlier checkpoint calls.
        train_cpu_seconds: CPU time of the process (``time.process_time``, all its
            threads) spent training so far, measured the same way.
        value: what ``on_checkpoint`` returned (e.g. a validation BLEU).
    """

    step: int
    epoch: int
    train_seconds: float
    train_cpu_seconds: float
    value: float


class _TrainClock:
    """Wall and process CPU time since a start, minus the intervals spent in :meth:`paused`."""

    def __init__(self) -> None:
        self.wall0, self.cpu0 = time.perf_counter(), time.process_time()
        self.paused_wall, self.paused_cpu = 0.0, 0.0

    def train_seconds(self) -> float:
        return time.perf_counter() - self.wall0 - self.paused_wall

    def train_cpu_seconds(self) -> float:
        return time.process_time() - self.cpu0 - self.paused_cpu

    @contextmanager
    def paused(self) -> Iterator[None]:
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.paused_wall += time.perf_counter() - wall
            self.paused_cpu += time.process_time() - cpu


@dataclass
class History:
    """What :func:`fit` measured. Lists indexed by step or by epoch.

    Attributes:
        step_loss: training loss of every optimizer step.
        grad_norm: global gradient norm before clipping, every step (only when clipping).
        epoch_loss: mean training loss of each epoch (weighted by tokens when known).
        val_loss: validation loss after each epoch (if validation data was given).
        val_metric: the ``val_metric`` value after each epoch (if given).
        metric_name: label of ``val_metric`` for plots.
        epoch_seconds: wall time of each epoch (training only, not validation).
        epoch_steps: optimizer steps in each epoch (the last one may be cut short).
        tokens_per_second: training throughput of each epoch (if tokens can be counted).
        steps: optimizer steps done.
        seconds: total wall time of :func:`fit`.
        train_seconds: wall time of training only (without validation and checkpoint calls).
        train_cpu_seconds: process CPU time of training only (``time.process_time``).
        checkpoints: one :class:`Checkpoint` per ``on_checkpoint`` call.
        stopped_early: why training stopped before ``epochs`` ("max_seconds", "max_steps")
            or None.
    """

    step_loss: list[float] = field(default_factory=list)
    grad_norm: list[float] = field(default_factory=list)
    epoch_loss: list[float] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    val_metric: list[float] = field(default_factory=list)
    metric_name: str = "metric"
    epoch_seconds: list[float] = field(default_factory=list)
    tokens_per_second: list[float] = field(default_factory=list)
    epoch_steps: list[int] = field(default_factory=list)
    steps: int = 0
    seconds: float = 0.0
    train_seconds: float = 0.0
    train_cpu_seconds: float = 0.0
    checkpoints: list[Checkpoint] = field(default_factory=list)
    stopped_early: str | None = None

    def plot(self, *, figsize: tuple[float, float] | None = None) -> Figure:
        """Draw the losses (and the validation metric, if any): :func:`course_lib.plots.plot_history`."""
        from course_lib.plots import plot_history

        return plot_history(self, figsize=figsize)


def evaluate_loss(
    model: nn.Module,
    data: Iterable[Any],
    loss_fn: Callable[[nn.Module, Any], Tensor],
    device: str | torch.device = "cpu",
) -> float:
    """Mean loss over a dataset, without gradients and in eval mode.

    Batches are weighted by their token count (:func:`count_tokens`) when it is known,
    so the result is a per-token mean like the training loss; otherwise each batch
    weighs the same. The model's train/eval mode is restored afterwards.

    Args:
        model: the model.
        data: an iterable of batches.
        loss_fn: ``loss_fn(model, batch) -> scalar``.
        device: where batches go.

    Returns:
        The mean loss.
    """
    total, weight = 0.0, 0.0
    with eval_mode(model), torch.no_grad():
        for batch in data:
            batch = move_to_device(batch, device)
            n = count_tokens(batch)
            w = float(n) if n is not None else 1.0
            total += float(loss_fn(model, batch)) * w
            weight += w
    if weight == 0:
        raise ValueError("evaluate_loss got no batches")
    return total / weight


def fit(
    model: nn.Module,
    train_data: Iterable[Any],
    loss_fn: Callable[[nn.Module, Any], Tensor],
    config: TrainConfig | None = None,
    *,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler: Any | None = None,
    val_data: Iterable[Any] | None = None,
    val_metric: Callable[[nn.Module], float] | None = None,
    metric_name: str = "metric",
    tokens_fn: Callable[[Any], int | None] = count_tokens,
    on_checkpoint: Callable[[nn.Module, int], float] | None = None,
) -> History:
    """Train ``model`` and return its :class:`History`.

    Each step: ``loss = loss_fn(model, batch)``, backward, clip the gradient norm to
    ``config.clip_grad_norm``, ``optimizer.step()``, then ``scheduler.step()`` if given.
    After each epoch: the validation loss on ``val_data`` and ``val_metric(model)``, in
    eval mode (the model is put back in train mode for the next epoch).

    Args:
        model: any ``nn.Module``; moved to ``config.device``.
        train_data: an iterable of batches, re-iterated every epoch (e.g. a DataLoader).
        loss_fn: ``loss_fn(model, batch) -> scalar``, e.g. :func:`seq2seq_loss`,
            :func:`lm_loss`, or a ``functools.partial`` of them.
        config: hyperparameters (defaults: ``TrainConfig()``).
        optimizer: the optimizer; default ``Adam(model.parameters(), lr=config.lr)``.
        scheduler: an optional learning-rate scheduler stepped after every step.
        val_data: optional validation batches, scored with ``loss_fn`` after each epoch.
        val_metric: optional ``val_metric(model) -> float`` called after each epoch
            (e.g. BLEU on a validation set).
        metric_name: the metric's label in :meth:`History.plot`.
        tokens_fn: counts the tokens of a batch for throughput (None: not counted).
        on_checkpoint: ``on_checkpoint(model, step) -> float``, called after every
            ``config.checkpoint_every`` optimizer steps, in eval mode and without gradients
            (e.g. BLEU on a validation set; it may also save the weights). Its value, the
            step and the training time so far (wall and CPU, its own calls and validation
            excluded) are appended to ``history.checkpoints`` as a :class:`Checkpoint`.
            It must not consume the global random generators if training is to stay the
            same with and without it (greedy decoding and losses in eval mode do not).

    Returns:
        The history. Training stops early (and says why in ``history.stopped_early``)
        when ``config.max_seconds`` or ``config.max_steps`` is reached.
    """
    from tqdm.auto import tqdm

    config = config or TrainConfig()
    if config.seed is not None:
        set_seed(config.seed)
    device = torch.device(config.device)
    model.to(device)
    if optimizer is None:
        optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
    if config.checkpoint_every and on_checkpoint is None:
        raise ValueError("checkpoint_every is set but no on_checkpoint was given")
    history = History(metric_name=metric_name)
    bar = tqdm(total=_planned_steps(train_data, config), unit="step", leave=True,
               disable=(None if config.progress is None else not config.progress))
    clock = _TrainClock()
    start = clock.wall0
    try:
        for epoch in range(config.epochs):
            _train_epoch(model, train_data, loss_fn, optimizer, scheduler, config, device, tokens_fn,
                         history, bar, epoch, start, clock, on_checkpoint)
            with clock.paused():
                if val_data is not None:
                    history.val_loss.append(evaluate_loss(model, val_data, loss_fn, device))
                if val_metric is not None:
                    with eval_mode(model), torch.no_grad():
                        history.val_metric.append(float(val_metric(model)))
            if history.stopped_early:
                break
    finally:
        bar.close()
        history.train_seconds, history.train_cpu_seconds = clock.train_seconds(), clock.train_cpu_seconds()
        history.seconds = history.train_seconds + clock.paused_wall
    return history


def _planned_steps(train_data: Iterable[Any], config: TrainConfig) -> int | None:
    """Steps :func:`fit` will take, for the progress bar (None if the data has no length)."""
    try:
        total = len(train_data) * config.epochs  # type: ignore[arg-type]
    except TypeError:
        return None
    return total if config.max_steps is None else min(total, config.max_steps)


def _train_epoch(model: nn.Module, train_data: Iterable[Any], loss_fn: Callable[[nn.Module, Any], Tensor],
                 optimizer: torch.optim.Optimizer, scheduler: Any | None, config: TrainConfig,
                 device: torch.device, tokens_fn: Callable[[Any], int | None] | None,
                 history: History, bar: Any, epoch: int, start: float, clock: _TrainClock,
                 on_checkpoint: Callable[[nn.Module, int], float] | None) -> None:
    """One pass over ``train_data`` (or up to the step limit); appends to ``history``."""
    model.train()
    epoch_start = time.perf_counter()
    loss_sum, weight_sum, tokens, epoch_steps = 0.0, 0.0, 0, 0
    tokens_known = True
    for batch in train_data:
        batch = move_to_device(batch, device)
        loss = loss_fn(model, batch)
        if not torch.isfinite(loss):
            raise FloatingPointError(f"loss became {loss.item()} at step {history.steps + 1}; try a "
                                     "smaller lr or gradient clipping")
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if config.clip_grad_norm:
            history.grad_norm.append(float(nn.utils.clip_grad_norm_(model.parameters(), config.clip_grad_norm)))
        optimizer.step()
        if scheduler is not None:
            scheduler.step()

        value = float(loss.detach())
        n_tok = tokens_fn(batch) if tokens_fn is not None else None
        tokens_known = tokens_known and n_tok is not None
        w = float(n_tok) if n_tok else 1.0
        loss_sum, weight_sum, tokens = loss_sum + value * w, weight_sum + w, tokens + (n_tok or 0)
        epoch_steps += 1
        history.steps += 1
        history.step_loss.append(value)
        bar.update(1)
        bar.set_postfix(epoch=epoch + 1, loss=f"{value:.3f}", refresh=False)
        if config.log_every and history.steps % config.log_every == 0:
            window = history.step_loss[-config.log_every:]
            print(f"step {history.steps:6d}  epoch {epoch + 1}  loss {sum(window) / len(window):.4f}")
        if on_checkpoint is not None and config.checkpoint_every and history.steps % config.checkpoint_every == 0:
            wall, cpu = clock.train_seconds(), clock.train_cpu_seconds()
            with clock.paused(), eval_mode(model), torch.no_grad():
                value = float(on_checkpoint(model, history.steps))
            history.checkpoints.append(Checkpoint(history.steps, epoch + 1, wall, cpu, value))
        if config.max_steps is not None and history.steps >= config.max_steps:
            history.stopped_early = "max_steps"
        elif config.max_seconds is not None and time.perf_counter() - start >= config.max_seconds:
            history.stopped_early = "max_seconds"
        if history.stopped_early:
            break

    if epoch_steps == 0:
        raise ValueError("train_data produced no batches")
    seconds = time.perf_counter() - epoch_start
    history.epoch_seconds.append(seconds)
    history.epoch_loss.append(loss_sum / weight_sum)
    history.epoch_steps.append(epoch_steps)
    if tokens_known and tokens > 0:
        history.tokens_per_second.append(tokens / max(seconds, 1e-9))
