"""course_tools/lessons.py: how lesson notebooks are named, numbered and ordered.

Lessons 1 and 7 are taught in two parts (01a_, 01b_, 07a_, 07b_); every tool that lists the
lessons (the i18n build, run_notebooks.py, the glossary, the class hub's copy) goes through
these functions or the same glob, so a part that sorted wrongly or went missing would drop a
lesson from the course or put it out of order.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from course_tools.lessons import GLOB, lesson_id, lesson_key, lesson_notebooks, main, pinned_threads


TIER = "fast"  # course_tools/tiers.py

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name, expected", [
    ("04_bahdanau_attention.ipynb", "4"),
    ("01a_rnn_seq2seq.ipynb", "1a"),
    ("07b_training_the_transformer.ipynb", "7b"),
    ("12_real_sentences.ipynb", "12"),
])
def test_lesson_id_of_a_notebook(name: str, expected: str) -> None:
    assert lesson_id(Path("notebooks") / name) == expected


@pytest.mark.parametrize("name", ["7_x.ipynb", "07ab_x.ipynb", "07-x.ipynb", "07_x.py", "lesson07.ipynb", "07A_x.ipynb"])
def test_a_name_that_is_not_a_lesson_is_refused_with_the_rule(name: str) -> None:
    with pytest.raises(ValueError, match="NN_name.ipynb or NNa_name.ipynb"):
        lesson_id(name)


def test_ids_order_parts_between_their_neighbours() -> None:
    ids = ["12", "7b", "1b", "2", "7a", "1a", "10", "8", "7"]
    assert sorted(ids, key=lesson_key) == ["1a", "1b", "2", "7", "7a", "7b", "8", "10", "12"]
    for bad in ("", "01", "1A", "a", "1ab", "0"):
        with pytest.raises(ValueError, match="not a lesson id"):
            lesson_key(bad)


def test_lesson_notebooks_in_teaching_order_without_strays(tmp_path: Path) -> None:
    for name in ("10_j.ipynb", "02_b.ipynb", "01b_a2.ipynb", "01a_a1.ipynb", "07b_g2.ipynb", "07a_g1.ipynb",
                 "01_notes.txt", "07c-draft.ipynb", "README.md"):
        (tmp_path / name).write_text("{}")
    assert [p.name for p in lesson_notebooks(tmp_path)] == [
        "01a_a1.ipynb", "01b_a2.ipynb", "02_b.ipynb", "07a_g1.ipynb", "07b_g2.ipynb", "10_j.ipynb"]
    # the plain glob (the hub's install.sh copies with it) finds every lesson, parts included
    assert {p.name for p in tmp_path.glob(GLOB)} >= {p.name for p in lesson_notebooks(tmp_path)}


def test_the_course_has_its_two_parted_lessons() -> None:
    root = Path(__file__).resolve().parent.parent
    ids = [lesson_id(p) for p in lesson_notebooks(root / "notebooks")]
    assert ids[:2] == ["1a", "1b"] and ids[ids.index("7a") + 1] == "7b" and ids.index("7a") == ids.index("6") + 1


def _notebook(tmp_path: Path, *cells: str) -> Path:
    path = tmp_path / f"nb{len(list(tmp_path.iterdir()))}.ipynb"
    nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": "# a lesson"},
        *({"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": c} for c in cells)]}
    path.write_text(json.dumps(nb))
    return path


def test_a_lesson_fixes_its_thread_count_only_from_its_first_cell_and_for_good(tmp_path: Path) -> None:
    pin = "import torch\nSEED = 0\ntorch.set_num_threads(1)  # why\n"
    assert pinned_threads(_notebook(tmp_path, pin, "x = torch.ones(3).sum()")) == 1
    assert pinned_threads(_notebook(tmp_path, "%matplotlib inline\n" + pin.replace("(1)", "(2)"))) == 2
    refused = [
        _notebook(tmp_path, "import torch", pin),  # too late: the first cell computed under the machine's threads
        _notebook(tmp_path, pin, "torch.set_num_threads(4)"),  # changed again later
        _notebook(tmp_path, pin, "threads = torch.get_num_threads()\ntorch.set_num_threads(threads)"),
        _notebook(tmp_path, "import torch\nif False:\n    torch.set_num_threads(1)"),  # not at top level
        _notebook(tmp_path, "import torch\ndef f():\n    torch.set_num_threads(1)"),
        _notebook(tmp_path, "import torch\ntorch.set_num_threads(n)"),  # not a literal
        _notebook(tmp_path, "import torch\ntorch.set_num_threads(1)\ntorch.set_num_threads(2)"),
        _notebook(tmp_path, "import torch\ntorch.set_num_threads(0)"),
        _notebook(tmp_path, "import torch\ntorch.set_num_threads(1"),  # does not parse
        _notebook(tmp_path, "import torch"),
    ]
    assert [pinned_threads(p) for p in refused] == [None] * len(refused)


def test_the_thread_settings_lister_names_what_it_leaves_out(tmp_path: Path, capsys) -> None:
    pinned = _notebook(tmp_path, "import torch\ntorch.set_num_threads(1)")
    free = _notebook(tmp_path, "import torch")
    assert main(["unpinned", str(pinned), str(free)]) == 0
    out, err = capsys.readouterr()
    assert out.split() == [str(free)]
    assert f"{pinned}: fixes torch.set_num_threads(1) in its first cell" in err


def test_the_training_lessons_fix_their_thread_count() -> None:
    # the portability stage's thread settings skip these (their results cannot depend on the thread count)
    fixed = {lesson_id(p) for p in lesson_notebooks(ROOT / "notebooks") if pinned_threads(p) == 1}
    assert {"1b", "4", "7b", "8", "10", "11", "12"} <= fixed
