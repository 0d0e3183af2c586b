"""Lesson 12's graded project: a Transformer trained on real sentences under a fixed budget.

The project asks a learner to improve lesson 12's Transformer. What they hand in is a set of
*choices* (:func:`check_config`: model sizes, dropout, BPE merges, batch size, learning rate
and its schedule, label smoothing), never weights and never a training loop: :func:`run`
builds the model, trains it and translates, the same code for the learner exploring on the
released development split and for the grader scoring held-back sentences on its own side.

The budget is a number of training *examples* (:data:`BUDGET_EXAMPLES` sentence pairs: a
larger batch takes fewer steps) and a parameter cap (:data:`PARAM_CAP`). Both are counted
here, not by the learner's code, so training longer than the budget is not something a
submission can ask for: :func:`check_config` refuses any key it does not know (``steps``,
``epochs`` ...) and any value outside its range, with a message saying which and why.

Everything is deterministic for a given configuration: the seed is fixed, torch runs on one
thread during :func:`run` (its state is restored afterwards), and results are memoised per
configuration and data in this process (the grader scores many notebooks with the same
choices; the learner's own process calls :func:`run` as often as they like). Across processes
they are memoised only when asked: with ``COURSE_PROJECT_CACHE`` naming a folder (:data:`CACHE_ENV`),
each result is kept there as JSON, under a key that holds everything it depends on (the
configuration, the seed, the pairs scored, every file of this library, torch's and numpy's
versions, the CPU kernels torch uses), so a result is only ever reused where it would be computed
again bit for bit. The test suite and CI use it (the grading tests score the same few
configurations in many processes); so can a teacher who grades a class again. The folder holds
translations of the pairs scored, the grader's held-back ones included: keep it where only the
grader's account can read it (a sandboxed learner never sees it: bubblewrap gives each its own
``/tmp`` and a read-only file system).

Shape letters are those of :mod:`course_lib.transformer`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import random
import tempfile
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

__all__ = [
    "BUDGET_EXAMPLES",
    "PARAM_CAP",
    "SEED",
    "BASELINE",
    "CHOICES",
    "ProjectConfig",
    "check_config",
    "lr_at",
    "param_count",
    "dev_pairs",
    "run",
    "CACHE_ENV",
]

#: Sentence pairs the model sees in training: 300 steps of 64 pairs (0.9 epochs of the split).
BUDGET_EXAMPLES = 19_200
#: Largest number of trainable parameters a configuration may have.
PARAM_CAP = 1_000_000
#: The one training seed (initial weights, dropout, batch order).
SEED = 0
#: Pairs of the released sample kept out of training as the public development split.
N_DEV = 500
#: Environment variable naming a folder where :func:`run` keeps its results for other processes
#: (unset: memoised in this process only).
CACHE_ENV = "COURSE_PROJECT_CACHE"

#: Every key a configuration must have, with the values it accepts: a tuple lists them, a
#: pair of floats is a closed range.
CHOICES: dict[str, Any] = {
    "d_model": (32, 48, 64, 96, 128, 160, 192, 256),
    "num_heads": (1, 2, 4, 8),
    "d_ff": (64, 128, 192, 256, 384, 512, 768, 1024),
    "num_layers": (1, 2, 3, 4),
    "dropout": (0.0, 0.5),
    "merges": (250, 500, 1000, 2000),
    "batch_size": (16, 32, 48, 64, 96, 128),
    "peak_lr": (1e-4, 1e-2),
    "warmup": (0, 200),
    "schedule": ("constant", "cosine"),
    "label_smoothing": (0.0, 0.3),
}

#: Lesson 12's Transformer recipe (section 4), as a configuration: the baseline.
BASELINE: dict[str, Any] = {
    "d_model": 64, "num_heads": 4, "d_ff": 256, "num_layers": 2, "dropout": 0.1, "merges": 1000,
    "batch_size": 64, "peak_lr": 2e-3, "warmup": 100, "schedule": "constant", "label_smoothing": 0.0,
}


@dataclass(frozen=True)
class ProjectConfig:
    """A checked configuration (see :data:`CHOICES` for the accepted values)."""

    d_model: int
    num_heads: int
    d_ff: int
    num_layers: int
    dropout: float
    merges: int
    batch_size: int
    peak_lr: float
    warmup: int
    schedule: str
    label_smoothing: float

    @property
    def steps(self) -> int:
        """Optimizer steps the budget allows at this batch size."""
        return BUDGET_EXAMPLES // self.batch_size

    def key(self) -> str:
        """A canonical text of the configuration (for memoising and for reports)."""
        return json.dumps(asdict(self), sort_keys=True)


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"project config: {name} must be a number, got {type(value).__name__} {_shown(value)}")
    if not math.isfinite(value):
        raise ValueError(f"project config: {name} must be finite, got {_shown(value)}")
    return float(value)


def _shown(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters: a learner's value is echoed, never in full."""
    text = repr(value) if not isinstance(value, str) or len(value) <= limit else repr(value[:limit])
    return text if len(text) <= limit + 2 else text[:limit] + "..."


def check_config(config: Mapping[str, Any]) -> ProjectConfig:
    """Check a learner's configuration and return it as a :class:`ProjectConfig`.

    Args:
        config: a dict with exactly the keys of :data:`CHOICES`.

    Returns:
        The configuration, with plain ``int`` / ``float`` / ``str`` values.

    Raises:
        ValueError: not a dict, a missing or unknown key (the budget is not a choice: there is
            no ``steps`` or ``epochs`` key), a value outside its range, ``d_model`` not divisible
            by ``num_heads``, or more than :data:`PARAM_CAP` parameters. The message names the
            key and the values accepted.
    """
    if not isinstance(config, Mapping):
        raise ValueError(f"project config must be a dict of choices, got {type(config).__name__}")
    keys = set(config)
    unknown = sorted(map(str, keys - set(CHOICES)))
    if unknown:
        shown = "[" + ", ".join(_shown(k) for k in unknown[:5]) + (f", and {len(unknown) - 5} more" if len(unknown) > 5 else "") + "]"
        raise ValueError(f"project config: unknown key(s) {shown}: the training budget ({BUDGET_EXAMPLES:,} "
                         "sentence pairs) and the seed are fixed by the grader, not chosen; the keys are "
                         f"{sorted(CHOICES)}")
    missing = sorted(set(CHOICES) - keys)
    if missing:
        raise ValueError(f"project config: missing key(s) {missing}")
    values: dict[str, Any] = {}
    for name, allowed in CHOICES.items():
        value = config[name]
        if isinstance(allowed[0], str):
            if not isinstance(value, str) or value not in allowed:
                raise ValueError(f"project config: {name} must be one of {list(allowed)}, got {_shown(value)}")
            values[name] = str(value)
        elif isinstance(allowed[0], int) and len(allowed) > 2:
            number = _number(name, value)
            if number not in allowed:
                raise ValueError(f"project config: {name} must be one of {list(allowed)}, got {_shown(value)}")
            values[name] = int(number)
        else:
            number = _number(name, value)
            low, high = allowed
            if not low <= number <= high:
                raise ValueError(f"project config: {name} must be between {low} and {high}, got {_shown(value)}")
            values[name] = int(number) if isinstance(low, int) and isinstance(high, int) else number
            if isinstance(low, int) and isinstance(high, int) and number != int(number):
                raise ValueError(f"project config: {name} must be a whole number, got {_shown(value)}")
    if values["d_model"] % values["num_heads"]:
        raise ValueError(f"project config: d_model ({values['d_model']}) must be divisible by num_heads "
                         f"({values['num_heads']})")
    checked = ProjectConfig(**values)
    n = param_count(checked)
    if n > PARAM_CAP:
        raise ValueError(f"project config: the model has {n:,} parameters, over the cap of {PARAM_CAP:,}: "
                         "make d_model, d_ff, num_layers or merges smaller")
    return checked


def lr_at(step: int, total_steps: int, warmup: int, peak_lr: float, schedule: str = "cosine") -> float:
    """The learning rate of optimizer step ``step`` (1-based) of ``total_steps``.

    Linear warm-up from ``peak_lr / warmup`` at step 1 to ``peak_lr`` at step ``warmup``; then
    ``constant`` stays at ``peak_lr``, ``cosine`` follows half a cosine from ``peak_lr`` at
    step ``warmup`` down to ``peak_lr / 10`` at step ``total_steps``. ``warmup = 0``: no
    warm-up.
    """
    if not 1 <= step <= total_steps or not 0 <= warmup < total_steps or peak_lr <= 0:
        raise ValueError(f"lr_at needs 1 <= step <= total_steps and 0 <= warmup < total_steps, peak_lr > 0; got "
                         f"step={step}, total_steps={total_steps}, warmup={warmup}, peak_lr={peak_lr}")
    if step <= warmup:
        return peak_lr * step / warmup
    if schedule == "constant":
        return peak_lr
    if schedule != "cosine":
        raise ValueError(f"schedule must be 'constant' or 'cosine', got {schedule!r}")
    progress = (step - warmup) / (total_steps - warmup)
    return peak_lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


# --------------------------------------------------------------------------- data


@functools.lru_cache(maxsize=1)
def _split() -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    from course_lib.fra_eng import load_sample, near_duplicate_key, split_pairs

    splits = split_pairs(load_sample(), n_valid=0, n_test=N_DEV, seed=0, key=near_duplicate_key)
    return tuple(splits.train), tuple(splits.test)


def dev_pairs() -> list[tuple[str, str]]:
    """The released development split: :data:`N_DEV` pairs of the sample, never trained on."""
    return list(_split()[1])


def sample_keys() -> frozenset[str]:
    """``near_duplicate_key`` of every English sentence of the released sample (to check that
    held-back sentences are not in it)."""
    from course_lib.fra_eng import load_sample, near_duplicate_key

    return frozenset(near_duplicate_key(en) for en, _ in load_sample())


@functools.lru_cache(maxsize=2)
def _bpe_full() -> tuple[Any, Any]:
    from course_lib.bpe import BPE

    train = _split()[0]
    top = max(CHOICES["merges"])
    return BPE.train([en for en, _ in train], num_merges=top), BPE.train([fr for _, fr in train], num_merges=top)


@functools.lru_cache(maxsize=4)
def _data(merges: int) -> tuple[Any, Any, Any, Any, list[Any], int]:
    from course_lib.bpe import BPE
    from course_lib.data import build_vocabs

    en_full, fr_full = _bpe_full()
    en_bpe, fr_bpe = BPE(en_full.merges[:merges]), BPE(fr_full.merges[:merges])
    token_pairs = [(en_bpe(en), fr_bpe(fr)) for en, fr in _split()[0]]
    src_vocab, tgt_vocab = build_vocabs(token_pairs, min_freq=1)
    max_out = max(len(fr) for _, fr in token_pairs) + 2
    return en_bpe, fr_bpe, src_vocab, tgt_vocab, token_pairs, max_out


def _vocab_sizes(merges: int) -> tuple[int, int]:
    _, _, src_vocab, tgt_vocab, _, _ = _data(merges)
    return len(src_vocab), len(tgt_vocab)


def _model_config(config: ProjectConfig) -> Any:
    from course_lib.transformer import TransformerConfig

    src, tgt = _vocab_sizes(config.merges)
    return TransformerConfig(src_vocab_size=src, tgt_vocab_size=tgt, d_model=config.d_model,
                             num_heads=config.num_heads, d_ff=config.d_ff, num_layers=config.num_layers,
                             dropout=config.dropout, max_len=64)


def param_count(config: ProjectConfig | Mapping[str, Any]) -> int:
    """Trainable parameters of the Transformer a configuration builds (vocabularies included)."""
    from course_lib.transformer import Transformer

    if not isinstance(config, ProjectConfig):
        config = ProjectConfig(**{k: config[k] for k in CHOICES})
    with torch.device("meta"):
        model = Transformer(_model_config(config))
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


# --------------------------------------------------------------------------- the run


def _fingerprint(pairs: Sequence[tuple[str, str]]) -> str:
    digest = hashlib.sha256()
    for en, fr in pairs:
        digest.update(en.encode() + b"\t" + fr.encode() + b"\n")
    return digest.hexdigest()


def run(config: Mapping[str, Any] | ProjectConfig, pairs: Sequence[tuple[str, str]] | None = None, *,
        seed: int = SEED) -> dict[str, Any]:
    """Train a configuration under the budget and score it on ``pairs``.

    Args:
        config: the choices (checked with :func:`check_config`).
        pairs: ``(English, French)`` pairs to translate and score; default the development
            split (:func:`dev_pairs`). The grader passes its held-back pairs.
        seed: the training seed. The grader always uses :data:`SEED`; other seeds are for
            measuring how much a score owes to the seed (docs/GRADING.md).

    Returns:
        ``bleu`` (lower-cased single-reference sacreBLEU, as in lesson 12), ``multi``
        (multi-reference), ``params``, ``steps``, ``final_loss`` (mean training loss of the
        last 50 steps), ``cpu_seconds`` (CPU time it took to train and translate; a memoised
        result keeps the figure of the run that computed it) and ``translations`` (source -> output).

    Raises:
        ValueError: the configuration is not accepted (see :func:`check_config`).
    """
    checked = config if isinstance(config, ProjectConfig) else check_config(config)
    pairs = tuple((str(en), str(fr)) for en, fr in (dev_pairs() if pairs is None else pairs))
    if not pairs:
        raise ValueError("run needs at least one (English, French) pair to score")
    result = _run(checked.key(), int(seed), _fingerprint(pairs), pairs)
    return dict(result, translations=dict(result["translations"]))


@functools.lru_cache(maxsize=1)
def _library_fingerprint() -> str:
    """What a run depends on besides its arguments: every file of this library (code and shipped
    data), torch's and numpy's versions, and the CPU kernels torch picked."""
    root = os.path.dirname(os.path.abspath(__file__))
    digest = hashlib.sha256()
    for folder, dirs, files in sorted(os.walk(root)):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            path = os.path.join(folder, name)
            digest.update(os.path.relpath(path, root).encode() + b"\0")
            with open(path, "rb") as handle:
                digest.update(hashlib.sha256(handle.read()).digest())
    digest.update(json.dumps([torch.__version__, np.__version__, torch.backends.cpu.get_cpu_capability()]).encode())
    return digest.hexdigest()


_RESULT_TYPES = {"bleu": float, "multi": float, "params": int, "steps": int, "final_loss": float,
                 "cpu_seconds": float, "translations": dict}


def _read_cached(path: str) -> dict[str, Any] | None:
    """A result kept by another process, or None when there is none or it is not a well-formed one."""
    try:
        with open(path, encoding="utf-8") as handle:
            result = json.load(handle)
    except (OSError, ValueError):
        return None
    if not isinstance(result, dict) or set(result) != set(_RESULT_TYPES):
        return None
    if any(not isinstance(result[name], kind) or isinstance(result[name], bool) for name, kind in _RESULT_TYPES.items()):
        return None
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in result["translations"].items()):
        return None
    return result


def _write_cached(folder: str, path: str, result: dict[str, Any]) -> None:
    """Keep ``result`` at ``path`` (written whole, then renamed: a reader never sees half a file)."""
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=folder, prefix=".run-", suffix=".tmp")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump(result, out, ensure_ascii=False)
            os.replace(temporary, path)
        except BaseException:
            os.unlink(temporary)
            raise
    except OSError as exc:
        warnings.warn(f"{CACHE_ENV}={folder}: cannot keep the project's result there ({exc}); "
                      "it is memoised in this process only", RuntimeWarning, stacklevel=3)


@functools.lru_cache(maxsize=32)
def _run(key: str, seed: int, fingerprint: str, pairs: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    folder = os.environ.get(CACHE_ENV, "")
    if not folder:
        return _train_and_score(key, seed, pairs)
    name = hashlib.sha256(json.dumps([_library_fingerprint(), key, seed, fingerprint]).encode()).hexdigest()
    path = os.path.join(folder, f"run-{name}.json")
    result = _read_cached(path)
    if result is None:
        result = _train_and_score(key, seed, pairs)
        _write_cached(folder, path, result)
    return result


def _train_and_score(key: str, seed: int, pairs: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    from course_lib.metrics import sacrebleu_scores

    config = ProjectConfig(**json.loads(key))
    model, final_loss, cpu = _train(key, seed)
    en_bpe, fr_bpe, src_vocab, tgt_vocab, _, max_out = _data(config.merges)
    from course_lib.decoding import decode_sentences

    sources = list(dict.fromkeys(en for en, _ in pairs))
    threads = torch.get_num_threads()
    start = time.process_time()
    try:
        torch.set_num_threads(1)
        with torch.no_grad():
            outputs = decode_sentences(model, sources, src_vocab, en_bpe, bos_id=tgt_vocab.bos,
                                       eos_id=tgt_vocab.eos, max_len=max_out)
    finally:
        torch.set_num_threads(threads)
    hyps = {en: fr_bpe.decode(tgt_vocab.decode(ids)) for en, ids in zip(sources, outputs)}
    scores = sacrebleu_scores(hyps, list(pairs))
    return {"bleu": float(scores["single"]), "multi": float(scores["multi"]), "params": param_count(config),
            "steps": config.steps, "final_loss": final_loss,
            "cpu_seconds": cpu + time.process_time() - start, "translations": hyps}


@functools.lru_cache(maxsize=8)
def _train(key: str, seed: int) -> tuple[Any, float, float]:
    from course_lib.data import make_translation_loader
    from course_lib.training import TrainConfig, fit, seq2seq_loss
    from course_lib.transformer import Transformer

    config = ProjectConfig(**json.loads(key))
    _, _, src_vocab, tgt_vocab, token_pairs, _ = _data(config.merges)
    threads = torch.get_num_threads()
    py_state, np_state = random.getstate(), np.random.get_state()   # fit seeds them: the caller's are kept
    start = time.process_time()
    try:
        torch.set_num_threads(1)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = Transformer(_model_config(config))
            loader = make_translation_loader(token_pairs, src_vocab, tgt_vocab, config.batch_size, seed=seed,
                                             bucket=True)
            optimizer = torch.optim.Adam(model.parameters(), lr=config.peak_lr)
            steps = config.steps
            scheduler = torch.optim.lr_scheduler.LambdaLR(
                optimizer, lambda i: lr_at(min(i + 1, steps), steps, config.warmup, 1.0, config.schedule))

            def loss_fn(m: Any, batch: Any) -> Any:
                return seq2seq_loss(m, batch, pad_id=tgt_vocab.pad, label_smoothing=config.label_smoothing)

            history = fit(model, loader, loss_fn,
                          TrainConfig(epochs=100, max_steps=steps, clip_grad_norm=1.0, seed=seed, progress=False),
                          optimizer=optimizer, scheduler=scheduler)
    finally:
        torch.set_num_threads(threads)
        random.setstate(py_state)
        np.random.set_state(np_state)
    if history.steps != config.steps:
        raise RuntimeError(f"the project's training stopped after {history.steps} of {config.steps} steps")
    losses = history.step_loss[-50:]
    return model.eval(), float(sum(losses) / len(losses)), time.process_time() - start
