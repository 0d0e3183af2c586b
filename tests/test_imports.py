"""course_lib's modules import one another without a cycle, and each imports on its own."""

from __future__ import annotations

import ast
import importlib
import os
import select
import signal
import sys
import time
import traceback
from pathlib import Path

import pytest
import torch

TIER = "fast"  # course_tools/tiers.py

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


@pytest.mark.slow  # 0.14 s of CPU (a fast test stays under 0.1 s: course_tools/tiers.py)
def test_no_import_cycle_between_course_lib_modules() -> None:
    graph = _graph()
    assert graph["course_lib.gpt"] >= {"course_lib.multihead", "course_lib.transformer"}  # the scan sees imports
    cycle = _cycle({m: deps - {"course_lib"} for m, deps in graph.items()})
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def _import_in_fork(module: str, timeout: float = 120.0) -> tuple[int, str]:
    """Import ``module`` in a forked child from which every ``course_lib`` module has been
    dropped: what ``python -c "import <module>"`` checks (the import order within the package),
    without paying a fresh interpreter's torch import each time (torch is already loaded here,
    and is not what is tested). Returns the child's exit status and its traceback."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        status = 1
        try:
            os.close(read)
            torch.set_num_threads(1)  # no OpenMP team inherited across the fork
            for name in [n for n in sys.modules if n == "course_lib" or n.startswith("course_lib.")]:
                del sys.modules[name]
            importlib.import_module(module)
            status = 0
        except BaseException:  # noqa: BLE001 - everything goes back to the parent
            os.write(write, traceback.format_exc().encode(errors="replace"))
        finally:
            os._exit(status)
    os.close(write)
    # the pipe reaches end-of-file when the child exits (it alone holds the write end): wait on it
    # instead of polling, so that each check costs the import and no sleep
    deadline = time.monotonic() + timeout
    chunks = []
    with os.fdopen(read, "rb") as f:
        while True:
            ready, _, _ = select.select([f], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return -1, f"importing {module} took more than {timeout:.0f} s"
            chunk = os.read(f.fileno(), 65536)
            if not chunk:
                break
            chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), b"".join(chunks).decode(errors="replace")


def test_the_fork_check_sees_a_failing_import() -> None:
    code, err = _import_in_fork("course_lib.no_such_module_here")
    assert code == 1 and "ModuleNotFoundError" in err


def test_the_fork_check_stops_an_import_that_hangs(tmp_path, monkeypatch) -> None:
    (tmp_path / "course_hanging_import.py").write_text("import time\ntime.sleep(60)\n", "utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    start = time.monotonic()
    code, err = _import_in_fork("course_hanging_import", timeout=0.3)
    assert code == -1 and "took more than" in err and time.monotonic() - start < 10


@pytest.mark.parametrize("module", MODULES)
def test_each_module_imports_first_on_its_own(module: str) -> None:
    # a cycle that depends on which module is imported first fails here
    code, err = _import_in_fork(module)
    assert code == 0, err[-2000:]



# The layers, lowest first: a package imports only the packages below it (and third-party ones).
# course_lib is what learners read; course_grader grades against it; course_tools (the course's own
# tooling) uses both; benchmarks, deploy and the tests sit on top. (site/ holds a wrapper script, not
# a package: `import site` is Python's own module.)
LAYERS = ("course_lib", "course_grader", "course_tools", "benchmarks", "deploy", "tests")


def _top_level_imports(path: Path) -> set[str]:
    """The top-level package of every import in ``path`` (anywhere in it; relative imports stay in
    the file's own package), and of every ``importlib.import_module("...")`` with a literal name."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            found.add(node.args[0].value.split(".")[0])
    return found


def upward_imports(root: Path) -> list[str]:
    """``file: package`` for each import of a layer above the file's own (or of the same-level
    tools beside it: deploy does not import site)."""
    found = []
    for rank, layer in enumerate(LAYERS[:3]):
        for path in sorted((root / layer).rglob("*.py")):
            above = _top_level_imports(path) & set(LAYERS[rank + 1:])
            found += [f"{path.relative_to(root).as_posix()}: {pkg}" for pkg in sorted(above)]
    return found


@pytest.mark.lint  # reads every module of three packages (0.6 s of CPU): a check of the code's shape
def test_no_upward_import_between_the_packages() -> None:
    assert upward_imports(PACKAGE.parent) == [], (
        "a package imports one above it (layers, lowest first: " + " < ".join(LAYERS) + "); move the code "
        "down to where its users can import it")


def test_the_layer_check_sees_an_upward_import(tmp_path: Path) -> None:
    for layer, text, above in (("course_lib", "from course_grader.cli import main\n", "course_grader"),
                               ("course_lib", "def f():\n    import course_tools.tiers\n", "course_tools"),
                               ("course_grader", "import importlib\nm = importlib.import_module('course_tools.lessons')\n",
                                "course_tools"),
                               ("course_tools", "from benchmarks import bench_vit\n", "benchmarks")):
        (tmp_path / layer).mkdir(exist_ok=True)
        (tmp_path / layer / "m.py").write_text(text)
        assert upward_imports(tmp_path) == [f"{layer}/m.py: {above}"], text
        (tmp_path / layer / "m.py").unlink()
    (tmp_path / "course_tools" / "ok.py").write_text("from course_lib import masking\nfrom . import tiers\nimport torch\n")
    assert upward_imports(tmp_path) == []
