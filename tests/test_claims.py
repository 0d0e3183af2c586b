"""The claim register: docs/CLAIMS.md against the `claim:` tags of the lesson notebooks.

A lesson's comparative or causal claim is decided by one code cell tagged
``claim:<lesson>-<slug>`` (cell metadata ``tags``); docs/CLAIMS.md has one row per tag under
``## Lesson <id>``. These tests check that the two agree: every tag has its row, every row
its tagged cell in that lesson, no id twice. The checker is run on the committed files and on
broken copies, so that each kind of drift is known to be caught.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from course_tools.lessons import lesson_id, lesson_notebooks

TIER = "fast"  # course_tools/tiers.py

ROOT = Path(__file__).resolve().parent.parent
REGISTER = ROOT / "docs" / "CLAIMS.md"
COLUMNS = ["claim id", "claim", "rival explanation", "how the cell rules it out", "seeds held"]
HEADING = re.compile(r"^## Lesson (?P<lesson>\S+)\s*$")
# claim:<NN or NNa>-<slug>: the notebook's own number prefix, then lower-case words and digits
TAG_ID = re.compile(r"(?P<prefix>\d\d[a-z]?)-(?P<slug>[a-z0-9]+(?:-[a-z0-9]+)*)")


def parse_register(text: str) -> tuple[list[str], dict[str, list[tuple[str, int]]], list[str]]:
    """Headings in order, {lesson id: [(claim id, line number)]}, and format problems."""
    headings: list[str] = []
    rows: dict[str, list[tuple[str, int]]] = {}
    problems: list[str] = []
    lesson: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        match = HEADING.match(line)
        if match:
            lesson = match["lesson"]
            headings.append(lesson)
            rows.setdefault(lesson, [])
            continue
        if line.startswith("## "):
            lesson = None
            continue
        if not line.startswith("|") or lesson is None:
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells == COLUMNS or all(set(c) <= set("-: ") for c in cells):
            continue  # the table's header and its rule
        if len(cells) != len(COLUMNS) or not all(cells):
            problems.append(f"docs/CLAIMS.md line {number}: a row needs {len(COLUMNS)} non-empty "
                            f"cells ({' | '.join(COLUMNS)}), found {len(cells)}: {line!r}")
            continue
        rows[lesson].append((cells[0].strip("`"), number))
    return headings, rows, problems


def notebook_tags(cells: list[dict]) -> list[tuple[str, int, str]]:
    """(claim id, cell index, cell type) for every `claim:` tag of a notebook's cells."""
    found = []
    for index, cell in enumerate(cells):
        for tag in cell.get("metadata", {}).get("tags", []):
            if tag.startswith("claim:"):
                found.append((tag[len("claim:"):], index, cell["cell_type"]))
    return found


def check(register_text: str, notebooks: dict[str, list[dict]]) -> list[str]:
    """Every way docs/CLAIMS.md and the notebooks' tags disagree, as sentences saying what to fix.

    ``notebooks`` maps a notebook's file name (``08_gpt_and_bert.ipynb``) to its cells.
    """
    headings, rows, problems = parse_register(register_text)
    lessons = [lesson_id(name) for name in notebooks]
    if headings != lessons:
        problems.append(f"docs/CLAIMS.md must have one heading '## Lesson <id>' per lesson, in teaching "
                        f"order: {lessons}; it has {headings}")
    row_lesson: dict[str, str] = {}
    for lesson, entries in rows.items():
        for claim, number in entries:
            if claim in row_lesson:
                problems.append(f"docs/CLAIMS.md line {number}: claim id {claim!r} is listed twice "
                                f"(lessons {row_lesson[claim]} and {lesson}); ids must be unique")
            row_lesson[claim] = lesson
    tag_lesson: dict[str, str] = {}
    for name, cells in notebooks.items():
        lesson = lesson_id(name)
        prefix = name.split("_", 1)[0]
        for claim, index, kind in notebook_tags(cells):
            where = f"notebooks/{name} cell {index}"
            match = TAG_ID.fullmatch(claim)
            if not match or match["prefix"] != prefix:
                problems.append(f"{where}: tag 'claim:{claim}' must be 'claim:{prefix}-<slug>' "
                                "(this notebook's number, then lower-case words joined by '-')")
            if kind != "code":
                problems.append(f"{where}: tag 'claim:{claim}' is on a {kind} cell; tag the code cell "
                                "that decides the claim (the one whose assertion rules out the rival)")
            if claim in tag_lesson:
                problems.append(f"{where}: tag 'claim:{claim}' is used twice (also in lesson "
                                f"{tag_lesson[claim]}); give each claim its own id")
            tag_lesson[claim] = lesson
            if claim not in row_lesson:
                problems.append(f"{where}: tag 'claim:{claim}' has no row in docs/CLAIMS.md; add "
                                f"'| {claim} | ... |' under '## Lesson {lesson}'")
            elif row_lesson[claim] != lesson:
                problems.append(f"{where}: claim {claim!r} is listed under '## Lesson {row_lesson[claim]}' "
                                f"in docs/CLAIMS.md; move the row to '## Lesson {lesson}'")
    for lesson, entries in rows.items():
        for claim, number in entries:
            if claim not in tag_lesson:
                problems.append(f"docs/CLAIMS.md line {number}: no cell of lesson {lesson} is tagged "
                                f"'claim:{claim}'; tag the deciding code cell (metadata tags) or drop the row")
    return problems


def _committed() -> tuple[str, dict[str, list[dict]]]:
    notebooks = {p.name: json.loads(p.read_text(encoding="utf-8"))["cells"]
                 for p in lesson_notebooks(ROOT / "notebooks")}
    return REGISTER.read_text(encoding="utf-8"), notebooks


def test_register_matches_the_notebooks() -> None:
    text, notebooks = _committed()
    problems = check(text, notebooks)
    assert not problems, "\n".join(problems)


# A small consistent pair: two lessons, one claim, to break in each way the checker must catch.
_GOOD = """# Claim register

## Lesson 1a

| claim id | claim | rival explanation | how the cell rules it out | seeds held |
| --- | --- | --- | --- | --- |
| 01a-gru-beats-mean | the GRU beats the mean | the data are easy | a baseline scores 0.1 | 0, 1, 2 |

## Lesson 8

| claim id | claim | rival explanation | how the cell rules it out | seeds held |
| --- | --- | --- | --- | --- |
"""


def _cells(*tags: list[str], kind: str = "code") -> list[dict]:
    return [{"cell_type": kind, "metadata": {"tags": t}, "source": ""} for t in tags]


def _good_notebooks() -> dict[str, list[dict]]:
    return {"01a_rnn.ipynb": _cells([], ["claim:01a-gru-beats-mean"]), "08_gpt.ipynb": _cells([])}


def test_checker_accepts_a_consistent_register() -> None:
    assert check(_GOOD, _good_notebooks()) == []


@pytest.mark.parametrize("case, expected", [
    ("untagged row", "no cell of lesson 1a is tagged 'claim:01a-gru-beats-mean'"),
    ("unlisted tag", "tag 'claim:08-bert-vs-scratch' has no row"),
    ("row under the wrong lesson", "move the row to '## Lesson 1a'"),
    ("tag twice", "is used twice"),
    ("row twice", "is listed twice"),
    ("wrong prefix", "must be 'claim:08-<slug>'"),
    ("markdown cell", "is on a markdown cell"),
    ("missing heading", "one heading '## Lesson <id>' per lesson"),
    ("short row", "a row needs 5 non-empty cells"),
])
def test_checker_catches(case: str, expected: str) -> None:
    text, notebooks = _GOOD, _good_notebooks()
    row = "| 01a-gru-beats-mean | the GRU beats the mean | the data are easy | a baseline scores 0.1 | 0, 1, 2 |\n"
    if case == "untagged row":
        notebooks["01a_rnn.ipynb"] = _cells([])
    elif case == "unlisted tag":
        notebooks["08_gpt.ipynb"] = _cells(["claim:08-bert-vs-scratch"])
    elif case == "row under the wrong lesson":
        text = text.replace(row, "") + row
    elif case == "tag twice":
        notebooks["08_gpt.ipynb"] = _cells(["claim:01a-gru-beats-mean"])
    elif case == "row twice":
        text = text + row
    elif case == "wrong prefix":
        notebooks["08_gpt.ipynb"] = _cells(["claim:8-bert"])
        text = text + "| 8-bert | a | b | c | 0 |\n"
    elif case == "markdown cell":
        notebooks["01a_rnn.ipynb"] = _cells(["claim:01a-gru-beats-mean"], kind="markdown")
    elif case == "missing heading":
        text = text.replace("## Lesson 8\n", "")
    elif case == "short row":
        text = text + "| 08-x | only two |\n"
    problems = check(text, notebooks)
    assert any(expected in p for p in problems), problems
