"""Tests for course_lib.d2l_compat: d2l imports without torchvision, with a clear stand-in."""

from __future__ import annotations

import importlib.util
import sys

import pytest
import torch

import course_lib.d2l_compat as compat
from course_lib.d2l_compat import TORCHVISION_HINT, import_d2l

TIER = "fast"  # course_tools/tiers.py


def _is_d2l_or_torchvision(name: str) -> bool:
    return name.split(".")[0] in ("d2l", "torchvision")


@pytest.mark.slow  # 0.63 s of CPU (a fast test stays under 0.1 s: course_tools/tiers.py)
def test_import_d2l_without_torchvision(monkeypatch):
    # Re-import d2l in this process with torchvision hidden, whether or not it is installed,
    # so the test is the same on every machine; sys.modules is restored afterwards. (A fresh
    # interpreter would be cleaner but costs seconds of imports.)
    saved = {name: mod for name, mod in sys.modules.items() if _is_d2l_or_torchvision(name)}
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name.split(".")[0] == "torchvision" else real_find_spec(name, *a))
    for name in saved:
        del sys.modules[name]
    try:
        d2l = import_d2l()
        assert d2l is not saved.get("d2l.torch")  # really imported again
        assert isinstance(sys.modules["torchvision"], compat._Missing)
        weights = d2l.masked_softmax(torch.ones(1, 1, 4), torch.tensor([2]))
        assert torch.equal(weights, torch.tensor([[[0.5, 0.5, 0.0, 0.0]]]))
        assert import_d2l() is d2l
        from torchvision import transforms  # the stand-in is a package with submodules

        with pytest.raises(ImportError, match="torchvision.ToTensor: torchvision is not installed") as info:
            transforms.ToTensor  # noqa: B018
        assert TORCHVISION_HINT in str(info.value)
    finally:
        for name in [n for n in sys.modules if _is_d2l_or_torchvision(n)]:
            del sys.modules[name]
        sys.modules.update(saved)


def test_stand_in_raises_import_error_with_hint():
    stand_in = compat._Missing("torchvision.datasets")
    with pytest.raises(ImportError, match="torchvision.MNIST: torchvision is not installed"):
        stand_in.MNIST  # noqa: B018
    with pytest.raises(AttributeError):  # dunder look-ups (copy, pickle, inspect) stay AttributeErrors
        stand_in.__wrapped__  # noqa: B018
    assert "pip install" in TORCHVISION_HINT


def test_missing_d2l_gives_install_command(monkeypatch):
    monkeypatch.delitem(sys.modules, "d2l.torch", raising=False)
    real_find_spec = compat.importlib.util.find_spec
    monkeypatch.setattr(compat.importlib.util, "find_spec",
                        lambda name, *a: None if name == "d2l" else real_find_spec(name, *a))
    with pytest.raises(ImportError, match=r"pip install --no-deps d2l==1\.0\.3"):
        import_d2l()


@pytest.mark.slow  # imports d2l (pandas, its plotting): about 0.6 s of CPU (a fast test stays under 0.1 s: course_tools/tiers.py)
def test_import_d2l_returns_the_torch_module():
    d2l = import_d2l()
    assert d2l.__name__ == "d2l.torch"
    assert hasattr(d2l, "MultiHeadAttention") and hasattr(d2l, "masked_softmax")
