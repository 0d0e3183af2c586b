"""Execute lesson notebooks top to bottom in a fresh kernel and save them with outputs.

    .venv/bin/python scripts/run_notebooks.py                 # every notebooks/*.ipynb
    .venv/bin/python scripts/run_notebooks.py notebooks/03_*.ipynb
    .venv/bin/python scripts/run_notebooks.py --normalize-only notebooks/*.ipynb   # run nothing

Each notebook runs from its own folder with a per-cell timeout, like nbval does in the
test suite. Volatile metadata (execution timestamps) is dropped so that re-running a
deterministic notebook gives a clean diff. Prints the run time of each notebook.
"""

from __future__ import annotations

import argparse
import html
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from course_tools.lessons import lesson_notebooks

ROOT = Path(__file__).resolve().parent.parent


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def _bar_text(box: dict, states: dict) -> str | None:
    """The final text of a tqdm.notebook bar: an HBox of HTML (prefix), FloatProgress, HTML (suffix).

    Composed like tqdm's text bar ("100%|██████████| 400/400 [00:19<00:00, 20.5step/s]") from the
    widgets' saved state; None if the state is missing or is not such a bar.
    """
    children = [states.get(str(ref).removeprefix("IPY_MODEL_"), {}).get("state", {})
                for ref in box.get("children", [])]
    if len(children) != 3 or any(not c for c in children):
        return None
    left, bar, right = children
    if not bar.get("_model_name", "").endswith("ProgressModel"):
        return None
    from tqdm.std import Bar

    def text(widget: dict) -> str:   # tqdm escapes the HTML and pads with figure spaces
        return html.unescape(str(widget.get("value") or "")).replace("\u2007", " ")

    value, top = bar.get("value", 0), bar.get("max", 0)
    frac = min(max(value / top, 0.0), 1.0) if top else 0.0
    return f"{text(left)}|{format(Bar(frac, 10, charset=Bar.UTF), '')}|{text(right)}"


def freeze_progress_bars(nb: nbformat.NotebookNode) -> None:
    """Replace each widget output by plain text of its final state (from the saved widget state).

    The widget state is not committed (normalize drops it), so a committed widget view would
    show the text/plain nbclient saved when the bar appeared ("  0%|          | 0/400 ..."),
    or a widget error in JupyterLab. Without a saved state the text is kept as it is.
    """
    states = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if WIDGET_VIEW not in data:
                continue
            view = data.pop(WIDGET_VIEW)
            final = _bar_text(states.get(view.get("model_id"), {}).get("state", {}), states)
            if final is not None:
                data["text/plain"] = final
            elif "text/plain" not in data:
                data["text/plain"] = ""


def coalesce_streams(nb: nbformat.NotebookNode) -> None:
    """Join consecutive outputs of one stream in a cell into one output.

    The kernel flushes a stream when it likes: under load one ``print`` may reach the notebook
    as two messages ("...training;" and "\\n"), and nbclient saves each as an output. What the
    cell printed is the same either way (nbval joins them before it compares), so the committed
    notebook keeps one output per run of a stream and its diff shows only what changed.
    """
    for cell in nb.cells:
        outputs = cell.get("outputs")
        if not outputs:
            continue
        joined: list = []
        for out in outputs:
            prev = joined[-1] if joined else None
            if (out.get("output_type") == "stream" and prev is not None
                    and prev.get("output_type") == "stream" and prev.get("name") == out.get("name")):
                prev["text"] = prev["text"] + out["text"]
            else:
                joined.append(out)
        cell.outputs = joined


def normalize(nb: nbformat.NotebookNode) -> None:
    """Drop per-run metadata, freeze progress bars, join split stream outputs and number the
    code cells 1..n in order."""
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    freeze_progress_bars(nb)
    coalesce_streams(nb)
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
    parser.add_argument("--normalize-only", action="store_true",
                        help="run nothing: only normalize the saved notebooks (metadata, counts, split streams)")
    args = parser.parse_args(argv)
    paths = args.notebooks or lesson_notebooks(ROOT / "notebooks")
    if args.normalize_only:
        for path in paths:
            nb = nbformat.read(path, as_version=4)
            normalize(nb)
            nbformat.validate(nb)
            nbformat.write(nb, path)
            print(f"{path.name:45s} normalized", flush=True)
        return 0
    total = 0.0
    for path in paths:
        elapsed = run(path, args.timeout)
        total += elapsed
        print(f"{path.name:45s} {elapsed:7.1f} s", flush=True)
    print(f"{'total':45s} {total:7.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
