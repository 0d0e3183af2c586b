"""Shared test set-up: quiet, deterministic, headless."""

from __future__ import annotations

# OMP_WAIT_POLICY=PASSIVE is set by the root conftest.py, before torch starts.
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
