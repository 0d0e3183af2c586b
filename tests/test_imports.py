"""course_lib's modules import one another without a cycle, and each imports on its own."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "course_lib"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = sorted(_module_name(p) for p in PACKAGE.rglob("*.py"))


def _imports(path: Path, name: str) -> set[str]:
    """The course_lib modules ``path`` imports anywhere (top level, functions, __getattr__)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative import
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}  # `from course_lib import tasks`
    return {m for m in found if m in MODULES and m != name}


def _graph() -> dict[str, set[str]]:
    graph = {_module_name(p): _imports(p, _module_name(p)) for p in PACKAGE.rglob("*.py")}
    # the package's __init__ runs before any of its modules: an edge to it is not a cycle
    return {m: {d for d in deps if d != "course_lib" or m.count(".") == 0} for m, deps in graph.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                return path[path.index(dep):] + [dep]
            if dep not in state and (found := visit(dep)):
                return found
        state[node] = 2
        path.pop()
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle_between_course_lib_modules() -> None:
    graph = _graph()
    assert graph["course_lib.gpt"] >= {"course_lib.multihead", "course_lib.transformer"}  # the scan sees imports
    cycle = _cycle({m: deps - {"course_lib"} for m, deps in graph.items()})
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


@pytest.mark.parametrize("module", MODULES)
def test_each_module_imports_first_in_a_fresh_interpreter(module: str) -> None:
    # what `python -c "import course_lib.<module>"` does: a cycle that depends on which module
    # is imported first fails here
    result = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True,
                            timeout=120, cwd=PACKAGE.parent)
    assert result.returncode == 0, result.stderr[-2000:]
