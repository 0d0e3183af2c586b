"""Tests for course_lib.training: masked loss, the training loop, checkpoints."""

from __future__ import annotations

import functools
import random
import time
from dataclasses import dataclass

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib.checkpoints import load_checkpoint, save_checkpoint
from course_lib.training import (
    Checkpoint,
    History,
    TrainConfig,
    count_tokens,
    eval_mode,
    d2l_masked_softmax_ce,
    evaluate_loss,
    fit,
    lm_loss,
    masked_cross_entropy,
    move_to_device,
    seq2seq_loss,
    set_seed,
)

TIER = "fast"  # course_tools/tiers.py

PAD, BOS, EOS = 0, 1, 2


# --------------------------------------------------------------------------- fixtures


@dataclass
class Batch:
    """Same fields as course_lib.data.Seq2SeqBatch."""

    src: Tensor
    src_valid_lens: Tensor
    tgt_in: Tensor
    tgt_out: Tensor
    tgt_valid_lens: Tensor


class TinySeq2Seq(nn.Module):
    """A GRU encoder-decoder without attention, just big enough to memorize a few pairs."""

    def __init__(self, vocab: int, hidden: int = 32) -> None:
        super().__init__()
        self.src_emb = nn.Embedding(vocab, hidden)
        self.tgt_emb = nn.Embedding(vocab, hidden)
        self.encoder = nn.GRU(hidden, hidden, batch_first=True)
        self.decoder = nn.GRU(hidden, hidden, batch_first=True)
        self.out = nn.Linear(hidden, vocab)

    def encode(self, src: Tensor, src_valid_lens: Tensor) -> Tensor:
        outputs, _ = self.encoder(self.src_emb(src))  # (B, S, E)
        last = outputs[torch.arange(src.shape[0]), src_valid_lens - 1]  # (B, E)
        return last.unsqueeze(0)  # (1, B, E)

    def forward(self, src: Tensor, src_valid_lens: Tensor, tgt_in: Tensor) -> Tensor:
        outputs, _ = self.decoder(self.tgt_emb(tgt_in), self.encode(src, src_valid_lens))
        return self.out(outputs)


def make_copy_batch(seed: int = 0, batch: int = 4, vocab: int = 8) -> Batch:
    """Copy task: target = source, variable lengths, padded."""
    g = torch.Generator().manual_seed(seed)
    lens = torch.randint(2, 6, (batch,), generator=g)
    width = int(lens.max()) + 1
    src = torch.full((batch, width), PAD)
    tgt_in = torch.full((batch, width), PAD)
    tgt_out = torch.full((batch, width), PAD)
    for b, n in enumerate(lens.tolist()):
        seq = torch.randint(3, vocab, (n,), generator=g)
        src[b, :n] = seq
        src[b, n] = EOS
        tgt_in[b, 0] = BOS
        tgt_in[b, 1 : n + 1] = seq
        tgt_out[b, :n] = seq
        tgt_out[b, n] = EOS
    return Batch(src, lens + 1, tgt_in, tgt_out, lens + 1)


class TinyLM(nn.Module):
    def __init__(self, vocab: int = 6, hidden: int = 8) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, hidden)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.emb(x))


def lm_batches(n: int = 3, seed: int = 0) -> list[tuple[Tensor, Tensor]]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        seq = torch.randint(0, 6, (4, 9), generator=g)
        out.append((seq[:, :-1], seq[:, 1:]))
    return out


def _padded_problem(seed: int = 0, dtype: torch.dtype = torch.float64):
    g = torch.Generator().manual_seed(seed)
    B, L, V = 3, 5, 7
    logits = torch.randn(B, L, V, generator=g, dtype=dtype)
    valid = torch.tensor([5, 2, 3])
    targets = torch.randint(3, V, (B, L), generator=g)
    targets[torch.arange(L)[None, :] >= valid[:, None]] = PAD
    return logits, targets, valid


# --------------------------------------------------------------------------- masked loss


def test_masked_ce_equals_cross_entropy_on_real_tokens() -> None:
    logits, targets, valid = _padded_problem()
    real = targets != PAD
    expected = F.cross_entropy(logits[real], targets[real])
    torch.testing.assert_close(masked_cross_entropy(logits, targets, valid), expected)
    torch.testing.assert_close(masked_cross_entropy(logits, targets), expected)  # mask from pad_id
    torch.testing.assert_close(
        masked_cross_entropy(logits, targets, valid, reduction="sum"),
        F.cross_entropy(logits[real], targets[real], reduction="sum"),
    )
    # Label smoothing goes through unchanged.
    torch.testing.assert_close(
        masked_cross_entropy(logits, targets, valid, label_smoothing=0.1),
        F.cross_entropy(logits[real], targets[real], label_smoothing=0.1),
    )
    # Per token, per sequence.
    none = masked_cross_entropy(logits, targets, valid, reduction="none")
    assert none.shape == targets.shape and (none[~real] == 0).all()
    for b in range(3):
        n = int(valid[b])
        row = F.cross_entropy(logits[b, :n], targets[b, :n], reduction="none")
        torch.testing.assert_close(none[b, :n], row)
        torch.testing.assert_close(masked_cross_entropy(logits, targets, valid, reduction="per_sequence")[b], row.mean())


def test_masked_ce_ignores_padded_logits_even_nan() -> None:
    logits, targets, valid = _padded_problem()
    pad = torch.arange(5)[None, :] >= valid[:, None]
    a = logits.clone().requires_grad_(True)
    loss_a = masked_cross_entropy(a, targets, valid)
    loss_a.backward()
    changed = logits.clone()
    changed[pad] = torch.randn(int(pad.sum()), 7, dtype=torch.float64) * 100
    changed[1, 4, 0] = float("nan")
    changed[2, 3, 1] = float("inf")
    b = changed.clone().requires_grad_(True)
    loss_b = masked_cross_entropy(b, targets, valid)
    loss_b.backward()
    torch.testing.assert_close(loss_a, loss_b)
    assert a.grad is not None and b.grad is not None
    torch.testing.assert_close(a.grad, b.grad)
    assert (b.grad[pad] == 0).all()


@pytest.mark.slow  # 0.15 s of CPU (a fast test stays under 0.1 s: course_tools/tiers.py)
def test_masked_ce_gradcheck() -> None:
    logits, targets, valid = _padded_problem(1)
    logits.requires_grad_(True)
    for reduction in ("mean", "per_sequence"):
        assert torch.autograd.gradcheck(
            lambda x: masked_cross_entropy(x, targets, valid, label_smoothing=0.05, reduction=reduction),
            (logits,),
        )


def test_masked_ce_shape_errors() -> None:
    logits, targets, valid = _padded_problem()
    with pytest.raises(ValueError, match=r"\(B, L, V\)"):
        masked_cross_entropy(logits[0], targets)
    with pytest.raises(ValueError, match=r"\(B, L\)"):
        masked_cross_entropy(logits, targets[:, :3])
    with pytest.raises(ValueError, match=r"\(B,\)"):
        masked_cross_entropy(logits, targets, valid[:2])
    with pytest.raises(ValueError, match="reduction"):
        masked_cross_entropy(logits, targets, reduction="avg")


@pytest.mark.slow  # a parity test against d2l: importing d2l (pandas, its plotting) costs about 0.6 s of CPU
def test_d2l_loss_matches_d2l_and_differs_from_per_token_mean() -> None:
    from course_lib.d2l_compat import import_d2l

    d2l = import_d2l()
    logits, targets, valid = _padded_problem(2)
    ours = d2l_masked_softmax_ce(logits, targets, valid)
    torch.testing.assert_close(ours, d2l.MaskedSoftmaxCELoss()(logits, targets, valid))
    # D2L divides every row by the padded length L: its mean is sum / (B * L) ...
    total = masked_cross_entropy(logits, targets, valid, reduction="sum")
    torch.testing.assert_close(ours.mean(), total / targets.numel())
    # ... which is smaller than the per-real-token mean when there is padding.
    assert ours.mean() < masked_cross_entropy(logits, targets, valid)


def test_seq2seq_and_lm_loss() -> None:
    torch.manual_seed(0)
    batch = make_copy_batch()
    model = TinySeq2Seq(8)
    logits = model(batch.src, batch.src_valid_lens, batch.tgt_in)
    real = batch.tgt_out != PAD
    torch.testing.assert_close(seq2seq_loss(model, batch), F.cross_entropy(logits[real], batch.tgt_out[real]))
    lm = TinyLM()
    x, y = lm_batches(1)[0]
    torch.testing.assert_close(lm_loss(lm, (x, y)), F.cross_entropy(lm(x).transpose(1, 2), y))
    assert count_tokens(batch) == int(real.sum())
    assert count_tokens((x, y)) == y.numel()
    assert count_tokens("not a batch") is None
    moved = move_to_device(batch, "cpu")
    assert isinstance(moved, Batch) and torch.equal(moved.src, batch.src)


# --------------------------------------------------------------------------- fit


@pytest.mark.slow  # trains 60 epochs to overfit: the slow tier, not fast
def test_fit_overfits_a_tiny_batch() -> None:
    torch.manual_seed(0)
    batch = make_copy_batch()
    model = TinySeq2Seq(8)
    config = TrainConfig(epochs=60, lr=0.03, seed=0, progress=False)
    history = fit(model, [batch], seq2seq_loss, config)
    assert history.step_loss[0] > 1.5  # starts near log(8)
    assert history.step_loss[-1] < 0.05
    assert history.steps == 60 and len(history.epoch_loss) == 60
    assert len(history.tokens_per_second) == 60 and all(t > 0 for t in history.tokens_per_second)


@pytest.mark.slow  # 0.52 s of CPU (a fast test stays under 0.1 s: course_tools/tiers.py)
def test_fit_history_validation_and_plot() -> None:
    torch.manual_seed(0)
    model = TinyLM()
    train, val = lm_batches(3, seed=0), lm_batches(2, seed=1)
    calls = []

    def metric(m: nn.Module) -> float:
        calls.append(m.training)
        return 1.0

    history = fit(
        model, train, lm_loss, TrainConfig(epochs=2, lr=0.05, progress=True),
        val_data=val, val_metric=metric, metric_name="BLEU",
    )
    assert isinstance(history, History)
    assert len(history.step_loss) == 6 and history.epoch_steps == [3, 3]
    assert history.epoch_loss[0] == pytest.approx(np.mean(history.step_loss[:3]))  # equal-size batches
    assert len(history.val_loss) == 2 and history.val_metric == [1.0, 1.0]
    assert calls == [False, False]  # the metric runs in eval mode
    assert model.training  # and training mode is restored
    assert history.val_loss[-1] == pytest.approx(evaluate_loss(model, val, lm_loss))
    assert history.stopped_early is None
    fig = history.plot()
    assert len(fig.axes) == 2 and fig.axes[1].get_ylabel() == "BLEU"


def test_fit_is_deterministic_and_stops_on_budget() -> None:
    def run(**kw) -> History:
        torch.manual_seed(0)
        return fit(TinyLM(), lm_batches(3), lm_loss, TrainConfig(epochs=3, lr=0.05, progress=False, **kw))

    a, b = run(), run()
    assert a.step_loss == b.step_loss
    short = run(max_steps=4)
    assert short.steps == 4 and short.stopped_early == "max_steps" and short.epoch_steps == [3, 1]
    assert short.step_loss == a.step_loss[:4]
    timed = run(max_seconds=0.0)
    assert timed.steps == 1 and timed.stopped_early == "max_seconds"


@pytest.mark.slow  # 0.25 s of CPU (a fast test stays under 0.1 s: course_tools/tiers.py)
def test_fit_checkpoints_every_k_steps_without_changing_training() -> None:
    calls: list[tuple[int, bool, bool]] = []

    def on_checkpoint(m: nn.Module, step: int) -> float:
        calls.append((step, m.training, torch.is_grad_enabled()))
        busy = time.process_time()
        while time.process_time() - busy < 0.05:  # CPU time that must not count as training
            pass
        return float(step) / 10

    def run(on_checkpoint=None, **kw) -> History:
        torch.manual_seed(0)
        return fit(TinyLM(), lm_batches(3), lm_loss, TrainConfig(epochs=3, lr=0.05, progress=False, **kw),
                   on_checkpoint=on_checkpoint)

    plain = run()
    watched = run(checkpoint_every=2, on_checkpoint=on_checkpoint)
    assert watched.step_loss == plain.step_loss  # the calls do not change training
    assert calls == [(2, False, False), (4, False, False), (6, False, False), (8, False, False)]
    assert [(c.step, c.epoch, c.value) for c in watched.checkpoints] == [(2, 1, 0.2), (4, 2, 0.4), (6, 2, 0.6),
                                                                         (8, 3, 0.8)]
    assert all(isinstance(c, Checkpoint) for c in watched.checkpoints)
    cpu = [c.train_cpu_seconds for c in watched.checkpoints]
    wall = [c.train_seconds for c in watched.checkpoints]
    assert cpu == sorted(cpu) and wall == sorted(wall) and cpu[0] >= 0
    # the four busy calls (0.2 s of CPU time in all) are excluded from the training times
    assert watched.train_cpu_seconds < 0.15 and watched.train_cpu_seconds >= cpu[-1]
    assert watched.train_seconds < watched.seconds - 0.15
    assert plain.checkpoints == [] and 0 <= plain.train_seconds <= plain.seconds
    stopped = run(checkpoint_every=4, on_checkpoint=lambda m, s: 1.0, max_steps=5)
    assert [c.step for c in stopped.checkpoints] == [4]
    with pytest.raises(ValueError, match="on_checkpoint"):
        run(checkpoint_every=2)
    with pytest.raises(ValueError, match="checkpoint_every"):
        TrainConfig(checkpoint_every=-1)


def test_fit_clips_gradient_norm() -> None:
    torch.manual_seed(0)
    model = TinyLM()

    def big_loss(m: nn.Module, batch) -> Tensor:
        return 1000.0 * lm_loss(m, batch)

    history = fit(model, lm_batches(1), big_loss,
                  TrainConfig(epochs=1, clip_grad_norm=0.5, progress=False), optimizer=torch.optim.SGD(model.parameters(), lr=0.0))
    assert history.grad_norm[0] > 10  # the raw norm was large ...
    norm = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]).norm()
    assert float(norm) == pytest.approx(0.5, rel=1e-5)  # ... and the step used the clipped one


def test_fit_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="no batches"):
        fit(TinyLM(), [], lm_loss, TrainConfig(epochs=1, progress=False))
    with pytest.raises(ValueError, match="lr"):
        TrainConfig(lr=0)
    with pytest.raises(FloatingPointError, match="loss became"):
        fit(TinyLM(), lm_batches(1), lambda m, b: lm_loss(m, b) * float("nan"), TrainConfig(epochs=1, progress=False))


def test_set_seed_reproduces_all_generators() -> None:
    set_seed(123)
    first = (random.random(), np.random.rand(), torch.rand(1).item())
    set_seed(123)
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == first


# --------------------------------------------------------------------------- checkpoints


def test_checkpoint_round_trip(tmp_path) -> None:
    torch.manual_seed(0)
    batch = make_copy_batch()
    model = TinySeq2Seq(8)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    fit(model, [batch], seq2seq_loss, TrainConfig(epochs=3, progress=False), optimizer=opt)
    config = TrainConfig(epochs=3)
    path = save_checkpoint(tmp_path / "sub" / "ckpt.pt", model, opt, config=config, extra={"epoch": 3, "vocab": ["a", "b"]})

    torch.manual_seed(1)
    other = TinySeq2Seq(8)
    other_opt = torch.optim.Adam(other.parameters(), lr=0.01)
    ckpt = load_checkpoint(path, other, other_opt)
    assert ckpt["config"]["epochs"] == 3 and ckpt["extra"] == {"epoch": 3, "vocab": ["a", "b"]}
    with torch.no_grad():
        torch.testing.assert_close(
            other(batch.src, batch.src_valid_lens, batch.tgt_in), model(batch.src, batch.src_valid_lens, batch.tgt_in)
        )
    for p, q in zip(opt.state.values(), other_opt.state.values()):
        torch.testing.assert_close(p["exp_avg_sq"], q["exp_avg_sq"])


def test_resume_gives_the_same_losses(tmp_path) -> None:
    data = lm_batches(3)

    def new() -> tuple[nn.Module, torch.optim.Optimizer]:
        torch.manual_seed(0)
        m = nn.Sequential(TinyLM(), nn.Dropout(0.3))  # dropout: the RNG state matters too
        return m, torch.optim.Adam(m.parameters(), lr=0.05)

    model, opt = new()
    config = TrainConfig(epochs=2, progress=False, seed=None)
    set_seed(7)
    straight = fit(model, data, lm_loss, config, optimizer=opt).step_loss

    model, opt = new()
    set_seed(7)
    first = fit(model, data, lm_loss, TrainConfig(epochs=1, progress=False, seed=None), optimizer=opt).step_loss
    save_checkpoint(tmp_path / "half.pt", model, opt)
    torch.rand(10)  # disturb the generator; restore_rng must undo this
    model, opt = new()
    load_checkpoint(tmp_path / "half.pt", model, opt, restore_rng=True)
    second = fit(model, data, lm_loss, TrainConfig(epochs=1, progress=False, seed=None), optimizer=opt).step_loss
    assert first + second == straight


def test_checkpoint_errors(tmp_path) -> None:
    model = TinyLM()
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        load_checkpoint(tmp_path / "missing.pt", model)
    bad = tmp_path / "corrupt.pt"
    bad.write_bytes(b"\x00garbage" * 10)
    with pytest.raises(ValueError, match="not a readable checkpoint"):
        load_checkpoint(bad, model)
    # A pickle that would run code is refused (weights_only loading).
    evil = tmp_path / "evil.pt"
    torch.save({"format": 1, "model": {}, "hook": functools.partial(print, "pwned")}, evil)
    with pytest.raises(ValueError, match="not a readable checkpoint"):
        load_checkpoint(evil, model)
    good = save_checkpoint(tmp_path / "lm.pt", model)
    with pytest.raises(ValueError, match="does not match"):
        load_checkpoint(good, TinyLM(vocab=9))
    with pytest.raises(ValueError, match="no optimizer state"):
        load_checkpoint(good, model, torch.optim.SGD(model.parameters(), lr=0.1))


@pytest.mark.parametrize("training", [True, False])
def test_eval_mode_restores_the_mode_even_after_an_error(training: bool) -> None:
    model = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5)).train(training)
    with eval_mode(model) as inside:
        assert inside is model and not model.training and not model[1].training
    assert model.training is training and model[1].training is training
    with pytest.raises(RuntimeError, match="boom"):
        with eval_mode(model):
            raise RuntimeError("boom")
    assert model.training is training and model[1].training is training


def test_evaluate_loss_restores_train_mode_when_the_loss_raises() -> None:
    model = nn.Linear(2, 2).train()

    def failing_loss(m: nn.Module, batch: Tensor) -> Tensor:
        raise ValueError("bad batch")
    with pytest.raises(ValueError, match="bad batch"):
        evaluate_loss(model, [torch.zeros(1, 2)], failing_loss)
    assert model.training


def test_setup_lesson_seeds_sets_print_options_and_reads_the_environment(monkeypatch):
    import random

    import numpy as np

    from course_lib.training import setup_lesson

    monkeypatch.setenv("COURSE_SEED", "3")
    monkeypatch.setenv("COURSE_DEVICE", "meta")  # any device name; "cuda" on a GPU
    saved = torch._tensor_str.PRINT_OPTS.precision
    try:
        torch.set_printoptions(precision=7)
        seed, device = setup_lesson()
        drawn = (random.random(), float(np.random.rand()), float(torch.rand(())))
        assert torch._tensor_str.PRINT_OPTS.precision == 4 and not torch._tensor_str.PRINT_OPTS.sci_mode
    finally:
        torch.set_printoptions(precision=saved)
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    assert drawn == (random.random(), float(np.random.rand()), float(torch.rand(())))  # the lessons' seed 0
    assert (seed, device) == (3, torch.device("meta"))
    monkeypatch.delenv("COURSE_SEED")
    monkeypatch.delenv("COURSE_DEVICE")
    assert tuple(setup_lesson()) == (0, torch.device("cpu"))
