"""Load a script of benchmarks/ or scripts/ as a module, for the tests of its pieces."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def _load(path: Path) -> ModuleType:
    """``path`` as a module (not left in ``sys.modules``)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


def load_benchmark(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` as a module."""
    return _load(ROOT / "benchmarks" / f"{name}.py")


def load_script(name: str) -> ModuleType:
    """``scripts/<name>.py`` as a module."""
    return _load(ROOT / "scripts" / f"{name}.py")


def load_site_build() -> ModuleType:
    """``site/build.py`` as the module ``course_site_build``, registered as site/conf.py
    registers it (Sphinx's configuration and the tests then share one copy)."""
    if "course_site_build" in sys.modules:
        return sys.modules["course_site_build"]
    path = ROOT / "site" / "build.py"
    spec = importlib.util.spec_from_file_location("course_site_build", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["course_site_build"] = module
    spec.loader.exec_module(module)
    return module
