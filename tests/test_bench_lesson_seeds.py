"""benchmarks/bench_lesson_seeds.py: which lines of an ignored cell it compares across seeds."""

from __future__ import annotations


import nbformat
import pytest
from benchmarks import bench_lesson_seeds


TIER = "fast"  # course_tools/tiers.py


@pytest.fixture(scope="module")
def bench():
    return bench_lesson_seeds


def test_each_output_is_its_own_line_and_a_split_print_stays_one(bench) -> None:
    out = nbformat.v4.new_output
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("# NBVAL_IGNORE_OUTPUT\n# (times depend on the machine)\ntrain()", outputs=[
            out("display_data", data={"text/plain": "100%|##########| 600/600 [00:28<00:00, 24.22step/s]"}),
            out("stream", name="stdout", text="Transformer: 600 steps, 25.6 s"),
            out("stream", name="stdout", text="\n"),
            out("display_data", data={"image/png": "iVBOR", "text/plain": "<Figure size 1000x350 with 2 Axes>"}),
            out("stream", name="stdout", text="GRU seq2seq     CPU s per 100 steps 0.89\n"),
        ]),
        nbformat.v4.new_code_cell("print('compared')", outputs=[out("stream", name="stdout", text="compared\n")]),
    ]
    assert bench._ignored_outputs(nb) == [("(times depend on the machine)", [
        "100%|##########| 600/600 [00:28<00:00, 24.22step/s]",
        "Transformer: 600 steps, 25.6 s",
        "GRU seq2seq     CPU s per 100 steps 0.89",
    ])]


def test_spread_shows_each_number_as_its_range_over_the_seeds(bench) -> None:
    merged = bench.spread([["loss 0.5 at step 600", "same"], ["loss 0.25 at step 600", "same"],
                           ["loss 0.75 at step 600", "other"]])
    assert merged == ["loss [0.25 .. 0.75] at step 600", "same    [other seeds: different text]"]
