"""Checkpoints: save a model (and its optimizer, config and random states), load it back.

A checkpoint holds only tensors and plain Python values, so :func:`load_checkpoint` reads
it with ``torch.load(weights_only=True)``, which cannot run code hidden in a file.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

__all__ = ["save_checkpoint", "load_checkpoint", "vocab_hash"]

_CHECKPOINT_FORMAT = 1


def _rng_state() -> dict[str, Any]:
    np_state: tuple[Any, ...] = np.random.get_state(legacy=True)  # type: ignore[assignment]
    return {
        "python": _to_lists(random.getstate()),
        "numpy": [np_state[0], torch.from_numpy(np.asarray(np_state[1]).astype(np.int64)), *map(_plain, np_state[2:])],
        "torch": torch.get_rng_state(),
    }


def _plain(x: Any) -> Any:
    return x.item() if hasattr(x, "item") else x


def _to_lists(x: Any) -> Any:
    return [_to_lists(v) for v in x] if isinstance(x, (tuple, list)) else x


def _to_tuples(x: Any) -> Any:
    return tuple(_to_tuples(v) for v in x) if isinstance(x, list) else x


def _restore_rng(state: dict[str, Any]) -> None:
    random.setstate(_to_tuples(state["python"]))
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])


def save_checkpoint(
    path: str | os.PathLike[str],
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    config: Any | None = None,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Save the model's (and optimizer's) state, the config and extra information.

    The file holds only tensors and plain Python values (a dataclass config is stored as
    a dict), so :func:`load_checkpoint` can read it with ``torch.load(weights_only=True)``,
    which cannot run code hidden in a file. Python's, NumPy's and PyTorch's random states
    are stored too, so training can resume exactly. The file is written to a temporary
    name and renamed, so an interrupted save never leaves a half-written checkpoint.

    Args:
        path: the file to write (parent directories are created).
        model: the model.
        optimizer: optionally its optimizer.
        config: optionally a dataclass or dict of hyperparameters.
        extra: optionally more plain values (epoch, vocabularies as dicts, ...).

    Returns:
        The path written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if config is not None and dataclasses.is_dataclass(config) and not isinstance(config, type):
        config = dataclasses.asdict(config)
    payload = {
        "format": _CHECKPOINT_FORMAT,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict() if optimizer is not None else None,
        "config": config,
        "extra": extra or {},
        "rng": _rng_state(),
        "torch_version": str(torch.__version__),
    }
    tmp = path.with_name(path.name + ".tmp")
    torch.save(payload, tmp)
    os.replace(tmp, path)
    return path


def load_checkpoint(
    path: str | os.PathLike[str],
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    *,
    restore_rng: bool = False,
    map_location: str | torch.device = "cpu",
) -> dict[str, Any]:
    """Load a checkpoint written by :func:`save_checkpoint` into ``model`` (and optimizer).

    Args:
        path: the checkpoint file.
        model: a model of the same architecture; its parameters are overwritten.
        optimizer: if given, its state is restored too (the checkpoint must contain one).
        restore_rng: also restore the random generators' states (to resume training
            bit for bit, e.g. with dropout or shuffling).
        map_location: where tensors are loaded.

    Returns:
        The checkpoint dict: ``config``, ``extra``, ``torch_version`` and the raw states.

    Raises:
        FileNotFoundError: if the file does not exist.
        ValueError: if the file is not a readable checkpoint, or the model / optimizer does
            not match it.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path} (save one with save_checkpoint first)")
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # torch raises several types for truncated / foreign files
        raise ValueError(f"{path} is not a readable checkpoint (corrupt or truncated?): {err}") from err
    if not isinstance(ckpt, dict) or "model" not in ckpt or "format" not in ckpt:
        raise ValueError(f"{path} is not a checkpoint written by course_lib.training.save_checkpoint")
    try:
        model.load_state_dict(ckpt["model"])
    except RuntimeError as err:
        raise ValueError(f"the model does not match the checkpoint {path}: {err}") from err
    if optimizer is not None:
        if ckpt.get("optimizer") is None:
            raise ValueError(f"{path} has no optimizer state; save it with save_checkpoint(..., optimizer=...)")
        optimizer.load_state_dict(ckpt["optimizer"])
    if restore_rng and "rng" in ckpt:
        _restore_rng(ckpt["rng"])
    return ckpt


def vocab_hash(src_vocab: Any, tgt_vocab: Any) -> str:
    """A short hash of both vocabularies' token lists (``idx_to_token``, in order).

    Shipped weights are only valid with the vocabularies they were trained with (token ``i`` is
    row ``i`` of an embedding): the scripts that train shipped checkpoints record this hash, and
    the lessons that load them compare it with the hash of their own vocabularies.
    """
    text = "\n".join(src_vocab.idx_to_token) + "\n\n" + "\n".join(tgt_vocab.idx_to_token)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
