"""course_tools/lessons.py: how lesson notebooks are named, numbered and ordered.

Lessons 1 and 7 are taught in two parts (01a_, 01b_, 07a_, 07b_); every tool that lists the
lessons (the i18n build, run_notebooks.py, the glossary, the class hub's copy) goes through
these functions or the same glob, so a part that sorted wrongly or went missing would drop a
lesson from the course or put it out of order.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from course_tools.lessons import GLOB, lesson_id, lesson_key, lesson_notebooks


TIER = "fast"  # course_tools/tiers.py


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
