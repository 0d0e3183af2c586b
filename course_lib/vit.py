"""The Vision Transformer (ViT, Dosovitskiy et al., 2021) and the small models it is compared with.

Shape letters: B batch, C channels, Ih x Iw image height and width, P patch size,
N = (Ih / P) (Iw / P) number of patches, T = N (+ 1 with a class token) tokens,
E model size (d_model), H heads, F feed-forward size (d_ff), K classes.

A ViT reads an image as a sequence: cut it into P x P **patches**, flatten each one into a
vector of C P^2 pixels, and project every vector with the same linear map to E features.
From there on the model is lesson 7a's encoder, unchanged: the blocks are
:class:`course_lib.transformer.TransformerEncoderBlock` (pre-norm, as in the ViT paper).
The only image-specific parts are at the two ends:

* the **patch embedding** (:class:`PatchEmbedding`): flatten + linear, which is the same map
  as a ``nn.Conv2d(C, E, kernel_size=P, stride=P)`` whose kernels do not overlap
  (:meth:`PatchEmbedding.as_conv2d` builds that convolution with the same weights);
* the read-out: either a learned **class token** put in front of the patches, whose final
  state alone goes to the classifier (``pool="cls"``), or the mean of the patch states
  (``pool="mean"``).

Patch order: patches are numbered row by row, left to right then top to bottom (the order
of a convolution's output ``flatten(2)``); inside a patch the C P^2 pixels are flattened in
(C, P, P) order, which is the layout of a ``Conv2d`` kernel. Without position embeddings
the encoder is permutation equivariant (lesson 6), so the order is only learned through
the **learned position embeddings**, one vector per token.

Also here, for the lesson's comparison on the same data: :class:`SmallCNN` and
:class:`MLPClassifier`, models of a similar parameter count with and without the
convolution's built-in locality, :func:`load_digits_split` (scikit-learn's 8 x 8 digits,
a fixed stratified split), :func:`subsample`, :func:`split_validation` and :func:`train_classifier`
(which sets up :func:`course_lib.training.fit`, the course's one training loop).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib.training import History, TrainConfig, fit
from course_lib.transformer import TransformerEncoderBlock

__all__ = [
    "patchify",
    "unpatchify",
    "shuffle_patches",
    "PatchEmbedding",
    "ViTConfig",
    "VisionTransformer",
    "SmallCNN",
    "MLPClassifier",
    "count_parameters",
    "DigitsSplit",
    "load_digits_split",
    "subsample",
    "split_validation",
    "train_classifier",
    "accuracy",
]


# -- patches


def _check_images(images: Tensor, patch_size: int) -> None:
    if images.dim() != 4:
        raise ValueError(f"images must have shape (B, C, Ih, Iw), got {tuple(images.shape)}")
    if patch_size <= 0:
        raise ValueError(f"patch_size must be positive, got {patch_size}")
    height, width = images.shape[-2:]
    if height % patch_size or width % patch_size:
        raise ValueError(f"an image of {height} x {width} pixels cannot be cut into {patch_size} x {patch_size} "
                         f"patches: the patch size must divide both sides")


def patchify(images: Tensor, patch_size: int) -> Tensor:
    """Cut images into non-overlapping P x P patches and flatten each one.

    Args:
        images: (B, C, Ih, Iw); P must divide Ih and Iw.
        patch_size: P.

    Returns:
        (B, N, C P^2): patch n = r (Iw / P) + c is the patch in row r and column c of the
        grid (row by row); its pixels are flattened in (C, P, P) order.

    Shape:
        (B, C, Ih, Iw) -> (B, N, C P^2)
    """
    _check_images(images, patch_size)
    B, C, height, width = images.shape
    P = patch_size
    grid = images.reshape(B, C, height // P, P, width // P, P)  # (B, C, Ih/P, P, Iw/P, P)
    grid = grid.permute(0, 2, 4, 1, 3, 5)  # (B, Ih/P, Iw/P, C, P, P)
    return grid.reshape(B, (height // P) * (width // P), C * P * P)  # (B, N, C P^2)


def unpatchify(patches: Tensor, patch_size: int, image_size: tuple[int, int], channels: int = 1) -> Tensor:
    """The inverse of :func:`patchify`: put flattened patches back into images.

    Args:
        patches: (B, N, C P^2) in :func:`patchify`'s order.
        patch_size: P.
        image_size: (Ih, Iw).
        channels: C.

    Shape:
        (B, N, C P^2) -> (B, C, Ih, Iw)
    """
    height, width = image_size
    P = patch_size
    if height % P or width % P:
        raise ValueError(f"patch_size {P} must divide the image size {image_size}")
    rows, cols = height // P, width // P
    if patches.dim() != 3 or patches.shape[1:] != (rows * cols, channels * P * P):
        raise ValueError(f"expected patches of shape (B, {rows * cols}, {channels * P * P}) for {height} x {width} "
                         f"images with {channels} channel(s), got {tuple(patches.shape)}")
    B = patches.shape[0]
    grid = patches.reshape(B, rows, cols, channels, P, P)  # (B, Ih/P, Iw/P, C, P, P)
    return grid.permute(0, 3, 1, 4, 2, 5).reshape(B, channels, height, width)  # (B, C, Ih, Iw)


def shuffle_patches(images: Tensor, patch_size: int, order: Tensor) -> Tensor:
    """The images with their patches moved: patch ``order[n]`` of the input goes to place n.

    Each patch keeps its content; only where it sits changes. A model without position
    information gives the same output for every ``order``.

    Args:
        images: (B, C, Ih, Iw).
        patch_size: P.
        order: (N,) a permutation of 0 ... N-1.

    Shape:
        (B, C, Ih, Iw), order (N,) -> (B, C, Ih, Iw)
    """
    patches = patchify(images, patch_size)  # (B, N, C P^2)
    N = patches.shape[1]
    if order.shape != (N,) or not torch.equal(torch.sort(order).values, torch.arange(N, device=order.device)):
        raise ValueError(f"order must be a permutation of the {N} patch indices, got {order.tolist()}")
    return unpatchify(patches[:, order], patch_size, (images.shape[-2], images.shape[-1]), images.shape[1])


class PatchEmbedding(nn.Module):
    """Flatten P x P patches and project each with one shared linear map to E features.

    Args:
        patch_size: P.
        in_channels: C.
        d_model: E.

    Shape:
        images (B, C, Ih, Iw) -> (B, N, E)
    """

    def __init__(self, patch_size: int, in_channels: int, d_model: int) -> None:
        super().__init__()
        self.patch_size = patch_size
        self.in_channels = in_channels
        self.proj = nn.Linear(in_channels * patch_size * patch_size, d_model)

    def forward(self, images: Tensor) -> Tensor:
        if images.dim() != 4 or images.shape[1] != self.in_channels:
            raise ValueError(f"expected images of shape (B, {self.in_channels}, Ih, Iw), got {tuple(images.shape)}")
        return self.proj(patchify(images, self.patch_size))  # (B, N, E)

    def as_conv2d(self) -> nn.Conv2d:
        """The same map as a convolution: ``Conv2d(C, E, kernel_size=P, stride=P)`` with these weights.

        Its output (B, E, Ih/P, Iw/P), flattened to (B, E, N) and transposed, equals
        ``forward``'s (B, N, E): each output position of a stride-P convolution sees
        exactly one patch, and its kernel is one row of the linear map.
        """
        P, C = self.patch_size, self.in_channels
        E = self.proj.out_features
        conv = nn.Conv2d(C, E, kernel_size=P, stride=P).to(self.proj.weight.dtype)
        with torch.no_grad():
            conv.weight.copy_(self.proj.weight.reshape(E, C, P, P))  # (E, C P^2) -> (E, C, P, P)
            bias = self.proj.bias
            assert bias is not None and conv.bias is not None
            conv.bias.copy_(bias)
        return conv


# -- the model


@dataclass
class ViTConfig:
    """Hyperparameters of :class:`VisionTransformer`.

    Args:
        image_size: (Ih, Iw).
        patch_size: P; must divide both sides.
        in_channels: C.
        num_classes: K.
        d_model: E.
        num_heads: H; must divide ``d_model``.
        d_ff: F, hidden size of each block's FFN.
        num_layers: number of encoder blocks.
        dropout: dropout inside the blocks (attention weights, FFN, sub-layer outputs).
        pool: ``"cls"`` (a learned class token; its final state is classified) or
            ``"mean"`` (the mean of the N patch states is classified).
        position_embedding: learned position embeddings if True; none if False (the
            model then cannot tell where a patch is).
    """

    image_size: tuple[int, int] = (8, 8)
    patch_size: int = 2
    in_channels: int = 1
    num_classes: int = 10
    d_model: int = 32
    num_heads: int = 4
    d_ff: int = 64
    num_layers: int = 2
    dropout: float = 0.0
    pool: Literal["cls", "mean"] = "cls"
    position_embedding: bool = True

    def __post_init__(self) -> None:
        self.image_size = (int(self.image_size[0]), int(self.image_size[1]))
        for name in ("patch_size", "in_channels", "num_classes", "d_model", "num_heads", "d_ff", "num_layers"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if any(side % self.patch_size for side in self.image_size):
            raise ValueError(f"patch_size={self.patch_size} must divide the image size {self.image_size}")
        if self.d_model % self.num_heads:
            raise ValueError(f"d_model={self.d_model} must be divisible by num_heads={self.num_heads}")
        if self.pool not in ("cls", "mean"):
            raise ValueError(f"pool must be 'cls' or 'mean', got {self.pool!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")

    @property
    def num_patches(self) -> int:
        """N = (Ih / P) (Iw / P)."""
        return (self.image_size[0] // self.patch_size) * (self.image_size[1] // self.patch_size)

    @property
    def num_tokens(self) -> int:
        """T: the patches, plus one for the class token when ``pool == "cls"``."""
        return self.num_patches + (1 if self.pool == "cls" else 0)


class VisionTransformer(nn.Module):
    """Patch embedding, [class token], position embeddings, pre-norm encoder blocks, head.

    ``forward`` computes, for images x:

        z_0 = [cls; patchify(x) W + b] + pos          (B, T, E)
        z_l = block_l(z_{l-1}),  l = 1 ... L           (course_lib.transformer, pre-norm)
        y   = head(LayerNorm(z_L)[:, 0])   (pool="cls")  or  head(mean_n LayerNorm(z_L)[:, n])

    Args:
        config: a :class:`ViTConfig`.

    Shape:
        images (B, C, Ih, Iw) -> logits (B, K).
        In evaluation mode, :meth:`attention_maps` gives per layer (B, H, T, T); with a
        class token, token 0 is the class token and tokens 1 ... N the patches.
    """

    def __init__(self, config: ViTConfig) -> None:
        super().__init__()
        self.config = config
        E = config.d_model
        self.patch_embedding = PatchEmbedding(config.patch_size, config.in_channels, E)
        self.cls_token: nn.Parameter | None = (nn.Parameter(torch.zeros(1, 1, E)) if config.pool == "cls" else None)
        self.pos_embedding: nn.Parameter | None = (nn.Parameter(torch.randn(1, config.num_tokens, E) * 0.02)
                                                   if config.position_embedding else None)
        self.blocks = nn.ModuleList(
            TransformerEncoderBlock(E, config.num_heads, config.d_ff, dropout=config.dropout, norm_first=True)
            for _ in range(config.num_layers))
        self.norm = nn.LayerNorm(E)  # pre-norm leaves the residual stream unnormalised: once at the end
        self.head = nn.Linear(E, config.num_classes)

    def tokens(self, images: Tensor) -> Tensor:
        """The encoder's input z_0: embedded patches, [class token first], plus positions: (B, T, E)."""
        X = self.patch_embedding(images)  # (B, N, E)
        if self.cls_token is not None:
            X = torch.cat([self.cls_token.expand(X.shape[0], -1, -1), X], dim=1)  # (B, N + 1, E)
        if self.pos_embedding is not None:
            X = X + self.pos_embedding
        return X

    def features(self, images: Tensor) -> Tensor:
        """The pooled image representation fed to the head: (B, E)."""
        X = self.tokens(images)
        for block in self.blocks:
            X = block(X)
        X = self.norm(X)  # (B, T, E)
        return X[:, 0] if self.cls_token is not None else X.mean(dim=1)

    def forward(self, images: Tensor) -> Tensor:
        return self.head(self.features(images))  # (B, K)

    def layers(self) -> list[TransformerEncoderBlock]:
        """The encoder blocks, typed."""
        return [cast(TransformerEncoderBlock, block) for block in self.blocks]

    def attention_maps(self) -> list[Tensor]:
        """Self-attention weights (B, H, T, T) of the last pass, per layer that recorded them
        (evaluation mode records them; see ``course_lib.multihead.HeadsAttention``)."""
        return [w for w in (block.attention.attention_weights for block in self.layers()) if w is not None]

    def class_token_attention(self, layer: int = -1) -> Tensor:
        """How the class token attends to the patches in one layer, averaged over heads: (B, N).

        Each row is the class token's attention weights on the N patches (the weight it
        puts on itself is left out, so a row sums to at most 1). Run the model in
        evaluation mode first.
        """
        if self.cls_token is None:
            raise ValueError("this model has no class token (pool='mean')")
        maps = self.attention_maps()
        if not maps:
            raise RuntimeError("no attention weights recorded: run the model in evaluation mode first")
        return maps[layer][:, :, 0, 1:].mean(dim=1)  # (B, H, T, T) -> (B, N)


# -- the models it is compared with


class SmallCNN(nn.Module):
    """Three 3 x 3 convolutions with ReLU, two 2 x 2 max-pools, then a linear classifier.

    Locality and weight sharing are built in: each output of a convolution sees a 3 x 3
    neighbourhood, with the same kernel everywhere.

    Args:
        in_channels: C.
        num_classes: K.
        channels: the output channels of the three convolutions.
        image_size: (Ih, Iw), both divisible by 4.

    Shape:
        images (B, C, Ih, Iw) -> logits (B, K)
    """

    def __init__(self, in_channels: int = 1, num_classes: int = 10, channels: tuple[int, int, int] = (16, 32, 40),
                 image_size: tuple[int, int] = (8, 8)) -> None:
        super().__init__()
        c1, c2, c3 = channels
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, c1, 3, padding=1), nn.ReLU(),
            nn.Conv2d(c1, c2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(c2, c3, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.head = nn.Linear(c3 * (image_size[0] // 4) * (image_size[1] // 4), num_classes)

    def forward(self, images: Tensor) -> Tensor:
        return self.head(self.features(images).flatten(1))  # (B, c3, Ih/4, Iw/4) -> (B, K)


class MLPClassifier(nn.Module):
    """The image flattened to C Ih Iw pixels, two hidden ReLU layers, a linear classifier.

    No notion of which pixels are neighbours: shuffling the pixels the same way in every
    image gives an equally good model.

    Args:
        in_features: C Ih Iw.
        hidden: size of both hidden layers.
        num_classes: K.

    Shape:
        images (B, C, Ih, Iw) -> logits (B, K)
    """

    def __init__(self, in_features: int = 64, hidden: int = 100, num_classes: int = 10) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(in_features, hidden), nn.ReLU(),
                                 nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, num_classes))

    def forward(self, images: Tensor) -> Tensor:
        return cast(Tensor, self.net(images))


def count_parameters(model: nn.Module) -> int:
    """The number of trainable parameters (each shared tensor counted once)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


# -- data


@dataclass
class DigitsSplit:
    """A train/test split of images (float32 in [0, 1], (n, 1, 8, 8)) and labels (int64, (n,))."""

    train_images: Tensor
    train_labels: Tensor
    test_images: Tensor
    test_labels: Tensor


def _stratified_indices(labels: Tensor, fraction: float, generator: torch.Generator) -> Tensor:
    """About ``fraction`` of the indices of every class (at least one), sorted."""
    chosen = []
    for label in torch.unique(labels):
        idx = torch.nonzero(labels == label).flatten()
        k = max(1, round(fraction * len(idx)))
        chosen.append(idx[torch.randperm(len(idx), generator=generator)[:k]])
    return torch.sort(torch.cat(chosen)).values


def load_digits_split(test_fraction: float = 0.3, seed: int = 0) -> DigitsSplit:
    """scikit-learn's 1,797 handwritten digits (8 x 8, grey levels 0-16), split by class.

    The data ships with scikit-learn: nothing is downloaded. Pixels are scaled to [0, 1].
    ``test_fraction`` of each class is held out; the split depends on ``seed`` only, not
    on the seed a model is trained with.

    Args:
        test_fraction: share of each class put in the test set.
        seed: seed of the split.

    Returns:
        A :class:`DigitsSplit`.
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    from sklearn.datasets import load_digits  # imported here: only this function needs scikit-learn

    digits = load_digits()
    images = torch.tensor(digits.images, dtype=torch.float32)[:, None] / 16.0  # (1797, 1, 8, 8)
    labels = torch.tensor(digits.target, dtype=torch.int64)
    test = _stratified_indices(labels, test_fraction, torch.Generator().manual_seed(seed))
    is_test = torch.zeros(len(labels), dtype=torch.bool)
    is_test[test] = True
    return DigitsSplit(images[~is_test], labels[~is_test], images[is_test], labels[is_test])


def subsample(images: Tensor, labels: Tensor, fraction: float, seed: int = 0) -> tuple[Tensor, Tensor]:
    """About ``fraction`` of each class (at least one image per class), chosen with ``seed``.

    Shape:
        images (n, ...), labels (n,) -> (m, ...), (m,)
    """
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    if fraction == 1.0:
        return images, labels
    keep = _stratified_indices(labels, fraction, torch.Generator().manual_seed(seed))
    return images[keep], labels[keep]


# -- training


class _ShuffledBatches:
    """``steps`` batches of (images, labels): the training set reshuffled every pass, with its own generator.

    One iteration yields exactly ``steps`` batches, so :func:`course_lib.training.fit` runs it as one
    "epoch"; the order depends on ``seed`` only, never on the global random generators.
    """

    def __init__(self, images: Tensor, labels: Tensor, steps: int, batch_size: int, seed: int) -> None:
        self.images, self.labels = images, labels
        self.steps, self.batch_size, self.seed = steps, batch_size, seed

    def __len__(self) -> int:
        return self.steps

    def __iter__(self) -> Iterator[tuple[Tensor, Tensor]]:
        n = len(self.labels)
        generator = torch.Generator().manual_seed(self.seed)
        order, cursor = torch.randperm(n, generator=generator), 0
        for _ in range(self.steps):
            if cursor + self.batch_size > n:
                order, cursor = torch.randperm(n, generator=generator), 0
            batch = order[cursor: cursor + self.batch_size]
            cursor += self.batch_size
            yield self.images[batch], self.labels[batch]


def _classifier_loss(model: nn.Module, batch: tuple[Tensor, Tensor]) -> Tensor:
    images, labels = batch
    return F.cross_entropy(model(images), labels)


def train_classifier(model: nn.Module, images: Tensor, labels: Tensor, *, steps: int = 1000, batch_size: int = 64,
                     lr: float = 3e-3, weight_decay: float = 1e-4, seed: int = 0,
                     progress: bool = False) -> History:
    """Train with AdamW and cross-entropy for a fixed number of steps (the budget), with
    :func:`course_lib.training.fit` (this function only sets it up: batches, optimiser, schedule).

    Batches are drawn by reshuffling the training set each pass with a generator seeded
    by ``seed`` (the model's initialisation is the caller's: seed before building it; the
    global random generators are left alone). The learning rate decays linearly to zero over
    the steps, after 5 % warm-up; gradients are not clipped. ``history.train_cpu_seconds`` is
    the CPU time of training (``time.process_time``: this process, all threads).

    Args:
        model: any classifier (B, C, Ih, Iw) -> (B, K); left in evaluation mode.
        images: (n, C, Ih, Iw).
        labels: (n,) int64.
        steps: number of optimiser steps.
        batch_size: images per step (at most n).
        lr: peak learning rate.
        weight_decay: AdamW weight decay.
        seed: seed of the batch order.
        progress: show a progress bar (tqdm).

    Returns:
        :func:`~course_lib.training.fit`'s :class:`~course_lib.training.History`: ``step_loss``
        (the loss of every step), ``train_cpu_seconds``.
    """
    n = len(labels)
    if n == 0 or steps <= 0:
        raise ValueError(f"need training data and steps > 0, got {n} images and steps={steps}")
    if lr <= 0:
        raise ValueError(f"lr must be positive, got {lr}")
    batches = _ShuffledBatches(images, labels, steps, min(batch_size, n), seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    warmup = max(1, steps // 20)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup, max(0.0, (steps - s) / (steps - warmup + 1e-9))))
    config = TrainConfig(epochs=1, lr=lr, clip_grad_norm=None, seed=None, device=str(images.device),
                         progress=progress)
    history = fit(model, batches, _classifier_loss, config, optimizer=optimizer, scheduler=schedule,
                  tokens_fn=lambda batch: None)  # images, not tokens: no throughput to count
    model.eval()
    return history


def split_validation(images: Tensor, labels: Tensor, fraction: float = 0.2,
                     seed: int = 0) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Put about ``fraction`` of each class aside for validation (chosen with ``seed``).

    For choosing hyperparameters (e.g. a learning rate) from training data alone, so that the
    test set is used once, at the end.

    Returns:
        ``(train_images, train_labels, val_images, val_labels)``: disjoint, together the input.

    Shape:
        images (n, ...), labels (n,) -> (n - m, ...), (n - m,), (m, ...), (m,)
    """
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"fraction must be in (0, 1), got {fraction}")
    held = _stratified_indices(labels, fraction, torch.Generator().manual_seed(seed))
    is_held = torch.zeros(len(labels), dtype=torch.bool)
    is_held[held] = True
    return images[~is_held], labels[~is_held], images[is_held], labels[is_held]


@torch.no_grad()
def accuracy(model: nn.Module, images: Tensor, labels: Tensor, batch_size: int = 512) -> float:
    """The share of images whose arg-max logit is the label (model put in evaluation mode).

    Shape:
        images (n, C, Ih, Iw), labels (n,) -> a float in [0, 1]
    """
    model.eval()
    correct = 0
    for start in range(0, len(labels), batch_size):
        logits = model(images[start: start + batch_size])
        correct += int((logits.argmax(dim=-1) == labels[start: start + batch_size]).sum())
    return correct / len(labels)
