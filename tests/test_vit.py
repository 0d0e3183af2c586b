"""Tests for course_lib.vit: patches, the patch embedding as a convolution, the ViT against
PyTorch's own encoder layers, the symmetries of its read-outs, the digits data and training."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_lib.transformer import TransformerEncoderBlock
from course_lib.vit import (MLPClassifier, PatchEmbedding, SmallCNN, ViTConfig, VisionTransformer, accuracy,
                            count_parameters, load_digits_split, patchify, shuffle_patches, split_validation,
                            subsample, train_classifier, unpatchify)

TIER = "fast"  # course_tools/tiers.py

F64 = torch.float64


def _patches_by_hand(images: torch.Tensor, P: int) -> torch.Tensor:
    """Loop over the grid, row by row; flatten each (C, P, P) block."""
    B, C, height, width = images.shape
    rows = []
    for b in range(B):
        patches = [images[b, :, r * P:(r + 1) * P, c * P:(c + 1) * P].reshape(-1)
                   for r in range(height // P) for c in range(width // P)]
        rows.append(torch.stack(patches))
    return torch.stack(rows)


@pytest.mark.parametrize("shape, P", [((2, 1, 8, 8), 2), ((3, 3, 6, 9), 3), ((1, 2, 4, 8), 4), ((2, 1, 8, 8), 1),
                                      ((1, 1, 8, 8), 8)])
def test_patchify_matches_a_loop_and_unfold(shape, P):
    images = torch.randn(*shape, dtype=F64)
    got = patchify(images, P)
    B, C, height, width = shape
    assert got.shape == (B, (height // P) * (width // P), C * P * P)
    torch.testing.assert_close(got, _patches_by_hand(images, P), rtol=0, atol=0)
    # PyTorch's own sliding-window extraction, non-overlapping: the same order and layout
    torch.testing.assert_close(got, F.unfold(images, kernel_size=P, stride=P).transpose(1, 2), rtol=0, atol=0)
    torch.testing.assert_close(unpatchify(got, P, (height, width), C), images, rtol=0, atol=0)


def test_patchify_rejects_sizes_it_cannot_cut():
    with pytest.raises(ValueError, match="divide"):
        patchify(torch.zeros(1, 1, 8, 8), 3)
    with pytest.raises(ValueError, match="B, C, Ih, Iw"):
        patchify(torch.zeros(8, 8), 2)
    with pytest.raises(ValueError):
        unpatchify(torch.zeros(1, 15, 4), 2, (8, 8))
    with pytest.raises(ValueError, match="divide"):
        ViTConfig(patch_size=3)


def test_shuffle_patches_moves_whole_patches():
    images = torch.arange(2 * 64, dtype=F64).reshape(2, 1, 8, 8)
    order = torch.randperm(16, generator=torch.Generator().manual_seed(0))
    moved = shuffle_patches(images, 2, order)
    torch.testing.assert_close(patchify(moved, 2), patchify(images, 2)[:, order], rtol=0, atol=0)
    assert not torch.equal(moved, images)
    torch.testing.assert_close(shuffle_patches(images, 2, torch.arange(16)), images, rtol=0, atol=0)
    assert torch.equal(torch.sort(moved.flatten(1)).values, torch.sort(images.flatten(1)).values)  # same pixels
    with pytest.raises(ValueError, match="permutation"):
        shuffle_patches(images, 2, torch.tensor([0] * 16))


@pytest.mark.parametrize("C, P, size", [(1, 2, (8, 8)), (3, 4, (8, 12)), (2, 1, (3, 5))])
def test_patch_embedding_is_a_strided_convolution(C, P, size):
    torch.manual_seed(0)
    embed = PatchEmbedding(P, C, 6).double()
    images = torch.randn(2, C, *size, dtype=F64)
    out = embed(images)
    assert out.shape == (2, (size[0] // P) * (size[1] // P), 6)
    conv = embed.as_conv2d()
    assert conv.kernel_size == (P, P) and conv.stride == (P, P) and conv.weight.dtype == F64
    torch.testing.assert_close(conv(images).flatten(2).transpose(1, 2), out, rtol=0, atol=1e-12)
    # and the other way round: a convolution's weights, reshaped, give the linear map
    other = nn.Conv2d(C, 6, P, stride=P).double()
    embed.proj.weight.data.copy_(other.weight.reshape(6, -1))
    embed.proj.bias.data.copy_(other.bias)
    torch.testing.assert_close(embed(images), other(images).flatten(2).transpose(1, 2), rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="images of shape"):
        embed(torch.zeros(1, C + 1, *size, dtype=F64))


def _reference_vit(model: VisionTransformer, images: torch.Tensor) -> torch.Tensor:
    """The same function written with PyTorch's nn.TransformerEncoderLayer (pre-norm) and F.unfold."""
    cfg = model.config
    E = cfg.d_model
    X = F.unfold(images, cfg.patch_size, stride=cfg.patch_size).transpose(1, 2) @ model.patch_embedding.proj.weight.T
    X = X + model.patch_embedding.proj.bias
    if model.cls_token is not None:
        X = torch.cat([model.cls_token.expand(len(X), 1, E), X], dim=1)
    if model.pos_embedding is not None:
        X = X + model.pos_embedding
    for block in model.layers():
        layer = nn.TransformerEncoderLayer(E, cfg.num_heads, cfg.d_ff, dropout=0.0, batch_first=True,
                                           norm_first=True).double().eval()
        layer.self_attn.in_proj_weight.data.copy_(torch.cat([block.attention.q_proj.weight, block.attention.k_proj.weight,
                                                             block.attention.v_proj.weight]))
        layer.self_attn.in_proj_bias.data.copy_(torch.cat([block.attention.q_proj.bias, block.attention.k_proj.bias,
                                                           block.attention.v_proj.bias]))
        layer.self_attn.out_proj.weight.data.copy_(block.attention.out_proj.weight)
        layer.self_attn.out_proj.bias.data.copy_(block.attention.out_proj.bias)
        layer.linear1.load_state_dict(block.ffn.dense1.state_dict())
        layer.linear2.load_state_dict(block.ffn.dense2.state_dict())
        layer.norm1.load_state_dict(block.addnorm1.norm.state_dict())
        layer.norm2.load_state_dict(block.addnorm2.norm.state_dict())
        X = layer(X)
    X = F.layer_norm(X, (E,), model.norm.weight, model.norm.bias)
    pooled = X[:, 0] if cfg.pool == "cls" else X.mean(dim=1)
    return pooled @ model.head.weight.T + model.head.bias


@pytest.mark.parametrize("pool, pos", [("cls", True), ("mean", True), ("cls", False), ("mean", False)])
def test_vit_equals_pytorch_encoder_layers(pool, pos):
    torch.manual_seed(1)
    cfg = ViTConfig(image_size=(8, 12), patch_size=4, in_channels=3, num_classes=5, d_model=16, num_heads=4,
                    d_ff=24, num_layers=2, pool=pool, position_embedding=pos)
    model = VisionTransformer(cfg).double().eval()
    with torch.no_grad():  # non-trivial class token and positions
        for p in (model.cls_token, model.pos_embedding):
            if p is not None:
                p.normal_()
    images = torch.randn(3, 3, 8, 12, dtype=F64)
    with torch.no_grad():
        logits = model(images)
        assert logits.shape == (3, 5)
        torch.testing.assert_close(logits, _reference_vit(model, images), rtol=0, atol=1e-10)
    assert all(type(b) is TransformerEncoderBlock and b.norm_first for b in model.blocks)  # lesson 7a's, unchanged
    assert cfg.num_tokens == 6 + (pool == "cls")
    assert (model.pos_embedding is not None) == pos and (model.cls_token is not None) == (pool == "cls")


def test_parameter_counts():
    cfg = ViTConfig()  # 8 x 8, P = 2: 16 patches + class token, E = 32, F = 64, 2 layers, 10 classes
    E, F_, T = 32, 64, 17
    block = 4 * E * E + 4 * E + (E * F_ + F_ + F_ * E + E) + 2 * 2 * E
    expected = (4 * E + E) + E + T * E + 2 * block + 2 * E + (E * 10 + 10)
    assert count_parameters(VisionTransformer(cfg)) == expected == 18218
    assert count_parameters(VisionTransformer(ViTConfig(pool="mean"))) == expected - E - E  # no class token, T = 16
    assert count_parameters(VisionTransformer(ViTConfig(position_embedding=False))) == expected - T * E
    assert count_parameters(SmallCNN()) == (9 * 16 + 16) + (9 * 16 * 32 + 32) + (9 * 32 * 40 + 40) + (40 * 4 * 10 + 10)
    assert count_parameters(MLPClassifier()) == (64 * 100 + 100) + (100 * 100 + 100) + (100 * 10 + 10)


def test_without_positions_the_patch_order_does_not_matter():
    torch.manual_seed(2)
    images = torch.randn(4, 1, 8, 8, dtype=F64)
    order = torch.randperm(16, generator=torch.Generator().manual_seed(3))
    shuffled = shuffle_patches(images, 2, order)
    for pool in ("cls", "mean"):
        blind = VisionTransformer(ViTConfig(pool=pool, position_embedding=False)).double().eval()
        with torch.no_grad():
            torch.testing.assert_close(blind(shuffled), blind(images), rtol=0, atol=1e-10)
        seeing = VisionTransformer(ViTConfig(pool=pool)).double().eval()
        with torch.no_grad():
            seeing.pos_embedding.normal_()
            assert (seeing(shuffled) - seeing(images)).abs().max() > 1e-3


def test_class_token_reads_out_and_its_attention():
    torch.manual_seed(4)
    model = VisionTransformer(ViTConfig(num_layers=2)).double().eval()
    images = torch.randn(3, 1, 8, 8, dtype=F64)
    with torch.no_grad():
        logits = model(images)
    maps = model.attention_maps()
    assert len(maps) == 2 and maps[0].shape == (3, 4, 17, 17)
    torch.testing.assert_close(maps[-1].sum(-1), torch.ones(3, 4, 17, dtype=F64))
    cls_attention = model.class_token_attention()
    assert cls_attention.shape == (3, 16)
    torch.testing.assert_close(cls_attention, maps[-1][:, :, 0, 1:].mean(dim=1))
    torch.testing.assert_close(cls_attention.sum(-1) + maps[-1][:, :, 0, 0].mean(dim=1), torch.ones(3, dtype=F64))
    torch.testing.assert_close(model.class_token_attention(layer=0), maps[0][:, :, 0, 1:].mean(dim=1))
    # the head sees the class token's final state only
    with torch.no_grad():
        feats = model.features(images)
        torch.testing.assert_close(model.head(feats), logits)
    with pytest.raises(ValueError, match="class token"):
        VisionTransformer(ViTConfig(pool="mean")).class_token_attention()
    with pytest.raises(RuntimeError, match="evaluation mode"):
        VisionTransformer(ViTConfig()).class_token_attention()


def test_mean_pooling_averages_the_patch_states():
    torch.manual_seed(5)
    model = VisionTransformer(ViTConfig(pool="mean")).double().eval()
    images = torch.randn(2, 1, 8, 8, dtype=F64)
    with torch.no_grad():
        X = model.tokens(images)
        assert X.shape == (2, 16, 32)
        for block in model.blocks:
            X = block(X)
        torch.testing.assert_close(model.features(images), model.norm(X).mean(dim=1))


def test_gradients_reach_class_token_and_positions():
    model = VisionTransformer(ViTConfig())
    loss = F.cross_entropy(model(torch.randn(4, 1, 8, 8)), torch.tensor([0, 1, 2, 3]))
    loss.backward()
    assert model.cls_token.grad is not None and model.cls_token.grad.abs().sum() > 0
    assert model.pos_embedding.grad is not None and model.pos_embedding.grad.abs().sum() > 0


@pytest.mark.slow  # 0.92 s of CPU, loading the digits data with scikit-learn (a fast test stays under 0.1 s: course_tools/tiers.py)
def test_digits_split_is_fixed_stratified_and_disjoint():
    split = load_digits_split()
    n_train, n_test = len(split.train_labels), len(split.test_labels)
    assert n_train + n_test == 1797 and abs(n_test / 1797 - 0.3) < 0.01
    assert split.train_images.shape == (n_train, 1, 8, 8) and split.train_images.dtype == torch.float32
    assert 0.0 <= float(split.train_images.min()) and float(split.train_images.max()) <= 1.0
    assert split.test_labels.dtype == torch.int64
    for label in range(10):  # each class split about 70/30
        share = float((split.test_labels == label).sum()) / float(((split.train_labels == label).sum()
                                                                     + (split.test_labels == label).sum()))
        assert abs(share - 0.3) < 0.02
    again = load_digits_split()
    assert torch.equal(again.test_images, split.test_images)
    # no image of the test set is in the training set (the digits data has no exact duplicates across the split)
    train_rows = {tuple(row) for row in (split.train_images.flatten(1) * 16).round().int().tolist()}
    test_rows = [tuple(row) for row in (split.test_images.flatten(1) * 16).round().int().tolist()]
    assert sum(row in train_rows for row in test_rows) == 0
    other = load_digits_split(seed=1)
    assert not torch.equal(other.test_labels, split.test_labels) or not torch.equal(other.test_images,
                                                                                     split.test_images)


@pytest.mark.slow  # loads the digits data: the first use imports scikit-learn, about 1.9 s of CPU (a fast test stays under 0.1 s: course_tools/tiers.py)
def test_subsample_keeps_every_class():
    split = load_digits_split()
    images, labels = subsample(split.train_images, split.train_labels, 0.1, seed=0)
    assert abs(len(labels) - 0.1 * len(split.train_labels)) <= 10
    assert set(labels.tolist()) == set(range(10))
    again, _ = subsample(split.train_images, split.train_labels, 0.1, seed=0)
    assert torch.equal(again, images)
    other, _ = subsample(split.train_images, split.train_labels, 0.1, seed=1)
    assert not torch.equal(other, images)
    full, full_labels = subsample(split.train_images, split.train_labels, 1.0)
    assert full is split.train_images and full_labels is split.train_labels
    with pytest.raises(ValueError):
        subsample(images, labels, 0.0)


@pytest.mark.slow  # trains an MLP twice, 150 steps each: the slow tier, not fast
def test_training_is_repeatable_and_learns():
    split = load_digits_split()
    images, labels = subsample(split.train_images, split.train_labels, 0.3, seed=0)
    results = []
    for _ in range(2):
        torch.manual_seed(0)
        model = MLPClassifier()
        history = train_classifier(model, images, labels, steps=150, batch_size=32, seed=0)
        results.append((history.step_loss, accuracy(model, split.test_images, split.test_labels)))
        assert not model.training and history.train_cpu_seconds >= 0.0 and len(history.step_loss) == 150
        assert history.steps == 150 and history.grad_norm == []  # one pass of 150 batches, no clipping
    assert results[0] == results[1]
    losses, acc = results[0]
    assert sum(losses[-10:]) / 10 < 0.5 * sum(losses[:10]) / 10
    assert acc > 0.85  # 10 classes: chance is 0.1
    always_three = _Constant(3)
    assert math.isclose(accuracy(always_three, split.test_images, split.test_labels, batch_size=100),
                        int((split.test_labels == 3).sum()) / len(split.test_labels))
    assert not always_three.training  # accuracy() evaluates in evaluation mode


@pytest.mark.slow  # trains a ViT 200 steps (about 2 s of CPU): the slow tier, not fast
def test_the_vit_learns_a_small_set():
    """Trained by course_lib.training.fit (through train_classifier), the ViT fits 50 digits: its
    loss falls from about ln 10 to near zero and it classifies its own training images right."""
    split = load_digits_split()
    images, labels = split.train_images[:50], split.train_labels[:50]
    torch.manual_seed(0)
    model = VisionTransformer(ViTConfig(d_model=16, num_heads=2, d_ff=32, num_layers=1))
    history = train_classifier(model, images, labels, steps=200, batch_size=25, lr=1e-2, seed=0)
    first, last = sum(history.step_loss[:5]) / 5, sum(history.step_loss[-5:]) / 5
    assert first > 1.8, f"an untrained model should start near ln 10 = 2.3, got {first:.2f}"
    assert last < 0.3, f"the loss should fall from {first:.2f} to below 0.3, got {last:.2f}"
    assert accuracy(model, images, labels) > 0.9
    assert not model.training


def test_train_classifier_batches_and_errors():
    images, labels = torch.randn(10, 1, 8, 8), torch.arange(10)
    seen = []

    class Spy(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Linear(64, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            seen.append(x.shape[0])
            return self.w(x.flatten(1))

    spy = Spy()  # built first: its initialisation draws from the global generator
    torch.manual_seed(5)
    before = torch.rand(2)
    torch.manual_seed(5)
    history = train_classifier(spy, images, labels, steps=7, batch_size=4, seed=3)
    assert torch.equal(torch.rand(2), before)  # the batch order has its own generator
    assert seen == [4] * 7 and history.steps == 7  # each pass of 10 images gives two batches of 4, then reshuffles
    seen.clear()
    train_classifier(Spy(), images, labels, steps=2, batch_size=64, seed=3)
    assert seen == [10, 10]  # a batch larger than the data is cut to the data
    with pytest.raises(ValueError, match="steps > 0"):
        train_classifier(Spy(), images, labels, steps=0)
    with pytest.raises(ValueError, match="lr must be positive"):
        train_classifier(Spy(), images, labels, lr=0.0)


@pytest.mark.slow  # loads the digits data (scikit-learn) (a fast test stays under 0.1 s: course_tools/tiers.py)
def test_split_validation_is_stratified_and_disjoint():
    split = load_digits_split()
    train_images, train_labels, val_images, val_labels = split_validation(split.train_images, split.train_labels,
                                                                          0.2, seed=0)
    assert len(train_labels) + len(val_labels) == len(split.train_labels)
    assert abs(len(val_labels) - 0.2 * len(split.train_labels)) <= 10
    for label in range(10):
        share = float((val_labels == label).sum()) / float((split.train_labels == label).sum())
        assert abs(share - 0.2) < 0.02
    rows = lambda t: {tuple(r) for r in (t.flatten(1) * 16).round().int().tolist()}  # noqa: E731
    assert not rows(train_images) & rows(val_images)
    assert rows(train_images) | rows(val_images) == rows(split.train_images)
    again = split_validation(split.train_images, split.train_labels, 0.2, seed=0)
    assert torch.equal(again[2], val_images)
    with pytest.raises(ValueError, match="fraction"):
        split_validation(split.train_images, split.train_labels, 1.0)


class _Constant(nn.Module):
    """Logits that always pick one class."""

    def __init__(self, label: int) -> None:
        super().__init__()
        self.label = label

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return F.one_hot(torch.full((len(images),), self.label), 10).float()
