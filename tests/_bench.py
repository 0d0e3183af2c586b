"""Old helpers, for tests written before the tools became packages: they import normally.

New tests import directly: ``from benchmarks import bench_vit`` (the checkout is on pytest's path:
``pythonpath`` in pyproject.toml), ``from course_tools import run_notebooks``,
``from course_tools import site_build``."""

from __future__ import annotations

import importlib
from types import ModuleType


def load_benchmark(name: str) -> ModuleType:
    """``benchmarks/<name>.py``: the module ``benchmarks.<name>``."""
    return importlib.import_module(f"benchmarks.{name}")


def load_script(name: str) -> ModuleType:
    """What was ``scripts/<name>.py``: the module ``course_tools.<name>``."""
    return importlib.import_module(f"course_tools.{name}")


def load_site_build() -> ModuleType:
    """What was ``site/build.py``: the module ``course_tools.site_build``."""
    return importlib.import_module("course_tools.site_build")
