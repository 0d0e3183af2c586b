"""Import the ``d2l`` package's PyTorch code without its stale pins.

d2l 1.0.3 pins numpy==1.23.5, matplotlib==3.7.2, jupyter==1.0.0 and more, and
``import d2l.torch`` imports torchvision at the top even though the attention and
sequence-model code never uses it. The course installs d2l with ``pip install --no-deps``
(its code runs unchanged on numpy 2 and current matplotlib) and, when torchvision is
missing, puts a stand-in module in ``sys.modules`` whose every attribute raises a clear
error. Only d2l's image datasets need the real torchvision; the course never uses them.

Use::

    from course_lib.d2l_compat import import_d2l
    d2l = import_d2l()          # the ``d2l.torch`` module
    d2l.masked_softmax(...)
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import Any

__all__ = ["import_d2l", "TORCHVISION_HINT"]

TORCHVISION_HINT = (
    "torchvision is not installed, so d2l's image datasets and transforms are unavailable. "
    "The course does not need them. If you do: pip install torch==2.14.1 torchvision==0.29.1 "
    "(a large build), or TORCH_SPEC='torch==2.14.1 torchvision==0.29.1' bash scripts/setup.sh."
)


class _Missing(types.ModuleType):
    """A module whose attributes raise ImportError with :data:`TORCHVISION_HINT`."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise ImportError(f"torchvision.{name}: {TORCHVISION_HINT}")


def _install_torchvision_stand_in() -> None:
    root = _Missing("torchvision")
    root.__path__ = []  # a package, so "from torchvision import transforms" works
    sys.modules["torchvision"] = root
    for sub in ("transforms", "datasets", "io", "models", "utils"):
        mod = _Missing(f"torchvision.{sub}")
        sys.modules[f"torchvision.{sub}"] = mod
        object.__setattr__(root, sub, mod)


def import_d2l() -> types.ModuleType:
    """Return the ``d2l.torch`` module, importable with or without torchvision.

    Raises:
        ImportError: if d2l itself is not installed, with the command that installs it.
    """
    if "d2l.torch" in sys.modules:
        return sys.modules["d2l.torch"]
    if importlib.util.find_spec("d2l") is None:
        raise ImportError(
            "The d2l package is not installed. Install it without its stale pins: "
            "pip install --no-deps d2l==1.0.3 (scripts/setup.sh does this)."
        )
    if importlib.util.find_spec("torchvision") is None and "torchvision" not in sys.modules:
        _install_torchvision_stand_in()
    return importlib.import_module("d2l.torch")
