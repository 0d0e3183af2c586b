"""scripts/run_notebooks.py: what it saves in a committed notebook.

A tqdm.auto bar in a notebook is a widget; its state lives in the notebook metadata, which
normalize() drops. The committed output must then show the bar's final text, not the text
nbclient saved when the bar appeared ("  0%|          | 0/400 ...") next to a widget view
that no longer has a model.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from course_tools import run_notebooks as course_run_notebooks

TIER = "fast"  # course_tools/tiers.py

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


@pytest.fixture(scope="module")
def run_notebooks():
    return course_run_notebooks


def _outputs(nb: nbformat.NotebookNode) -> list[dict]:
    return [out for cell in nb.cells if cell.cell_type == "code" for out in cell.outputs]


@pytest.mark.slow  # starts a Jupyter kernel and runs a notebook through nbclient: the slow tier, not fast
def test_an_executed_progress_bar_is_committed_as_its_final_text(run_notebooks, tmp_path: Path) -> None:
    path = tmp_path / "bar.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        "from tqdm.auto import tqdm\n"
        "for _ in tqdm(range(400), unit='step'):\n"
        "    pass\n"
        "print('done')")]
    nbformat.write(nb, path)
    run_notebooks.run(path, timeout=120)
    saved = nbformat.read(path, as_version=4)
    assert "widgets" not in saved.metadata
    outputs = _outputs(saved)
    bars = [out for out in outputs if out.output_type == "display_data"]
    assert len(bars) == 1, outputs                                        # the bar was a widget display
    assert WIDGET_VIEW not in bars[0].data
    text = bars[0].data["text/plain"]
    assert text.startswith("100%|██████████| 400/400 [") and text.endswith("step/s]"), text
    assert "&lt;" not in text and "\u2007" not in text                    # unescaped, plain spaces
    assert any(out.get("text") == "done\n" for out in outputs)


def _bar_notebook(with_state: bool) -> nbformat.NotebookNode:
    """A notebook as nbclient leaves it after a 400-step bar (state as ipywidgets 8 sends it)."""
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("train()")
    cell.outputs = [nbformat.v4.new_output("display_data", data={
        WIDGET_VIEW: {"model_id": "box", "version_major": 2, "version_minor": 0},
        "text/plain": "  0%|          | 0/400 [00:00<?, ?step/s]"})]
    nb.cells = [cell]
    if with_state:
        def model(name: str, **state) -> dict:
            return {"model_name": name, "model_module": "@jupyter-widgets/controls",
                    "model_module_version": "2.0.0", "state": {"_model_name": name, **state}}
        nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {
            "state": {
                "box": model("HBoxModel", children=["IPY_MODEL_left", "IPY_MODEL_bar", "IPY_MODEL_right"]),
                "left": model("HTMLModel", value="100%"),
                "bar": model("FloatProgressModel", value=400, max=400, bar_style="success"),
                "right": model("HTMLModel", value="\u2007400/400\u2007[00:19&lt;00:00,\u2007\u200720.5step/s]"),
            },
            "version_major": 2, "version_minor": 0}}
    return nb


def test_normalize_composes_the_final_bar_from_the_widget_state(run_notebooks) -> None:
    nb = _bar_notebook(with_state=True)
    run_notebooks.normalize(nb)
    nbformat.validate(nb)
    (out,) = _outputs(nb)
    assert out.data == {"text/plain": "100%|██████████| 400/400 [00:19<00:00,  20.5step/s]"}
    assert "widgets" not in nb.metadata


def test_without_widget_state_the_text_stays_and_the_view_goes(run_notebooks) -> None:
    nb = _bar_notebook(with_state=False)
    run_notebooks.normalize(nb)
    (out,) = _outputs(nb)
    assert out.data == {"text/plain": "  0%|          | 0/400 [00:00<?, ?step/s]"}


def test_normalize_joins_a_stream_split_across_messages_and_nothing_else(run_notebooks) -> None:
    out = nbformat.v4.new_output
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("print('a'); print('b')", outputs=[
        out("stream", name="stdout", text="checkpoint in the second half;"),
        out("stream", name="stdout", text="\n"),
        out("stream", name="stderr", text="a warning\n"),
        out("stream", name="stdout", text="after the warning\n"),
        out("display_data", data={"text/plain": "100%|##########| 6/6"}),
        out("stream", name="stdout", text="after the bar\n"),
        out("stream", name="stdout", text="and more\n"),
    ])]
    run_notebooks.normalize(nb)
    got = [(o["output_type"], o.get("name"), o.get("text", o.get("data", {}).get("text/plain"))) for o in _outputs(nb)]
    assert got == [
        ("stream", "stdout", "checkpoint in the second half;\n"),
        ("stream", "stderr", "a warning\n"),
        ("stream", "stdout", "after the warning\n"),
        ("display_data", None, "100%|##########| 6/6"),
        ("stream", "stdout", "after the bar\nand more\n"),
    ]
    nbformat.validate(nb)
