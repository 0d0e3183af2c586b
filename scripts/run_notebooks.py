"""Execute lesson notebooks top to bottom in a fresh kernel and save them with outputs.

    .venv/bin/python scripts/run_notebooks.py                 # every notebooks/*.ipynb
    .venv/bin/python scripts/run_notebooks.py notebooks/03_*.ipynb

Each notebook runs from its own folder with a per-cell timeout, like nbval does in the
test suite. Volatile metadata (execution timestamps) is dropped so that re-running a
deterministic notebook gives a clean diff. Prints the run time of each notebook.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

sys.path.insert(0, str(Path(__file__).resolve().parent))
from course_lessons import lesson_notebooks  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def normalize(nb: nbformat.NotebookNode) -> None:
    """Drop per-run metadata and number the code cells 1..n in order."""
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.metadata.pop("widgets", None)
    lang = nb.metadata.get("language_info", {})
    lang.pop("version", None)
    count = 0
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        cell.metadata.pop("ExecuteTime", None)
        if cell.cell_type == "code":
            count += 1
            cell.execution_count = count if cell.outputs or cell.source.strip() else None
            for out in cell.outputs:
                if "execution_count" in out:
                    out["execution_count"] = count


def run(path: Path, timeout: int) -> float:
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, timeout=timeout, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    elapsed = time.perf_counter() - start
    normalize(nb)
    nbformat.validate(nb)
    nbformat.write(nb, path)
    return elapsed


def main(argv: list[str] | None = None) -> int:
    # Kernels inherit this: busy-waiting OpenMP threads slow torch badly on a shared 2-core machine.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--timeout", type=int, default=300, help="per-cell timeout in seconds")
    args = parser.parse_args(argv)
    paths = args.notebooks or lesson_notebooks(ROOT / "notebooks")
    total = 0.0
    for path in paths:
        elapsed = run(path, args.timeout)
        total += elapsed
        print(f"{path.name:45s} {elapsed:7.1f} s", flush=True)
    print(f"{'total':45s} {total:7.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
