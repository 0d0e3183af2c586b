"""Shared test set-up: quiet, deterministic, headless."""

from __future__ import annotations

import os

# Two cores shared with other processes: busy-waiting OpenMP threads can make torch up to
# 10x slower per step. Must be set before torch starts its thread pool (and is inherited
# by the notebook kernels nbval starts).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import matplotlib  # noqa: E402

matplotlib.use("Agg")  # this process only; notebook kernels keep the inline backend

import pytest  # noqa: E402
import torch  # noqa: E402


@pytest.fixture(autouse=True)
def _seed_and_close_figures():
    """Every test starts from the same seed and leaves no open figure behind."""
    torch.manual_seed(0)
    yield
    import matplotlib.pyplot as plt

    plt.close("all")
