"""The glossary (docs/glossary/NN.tsv) and the lessons agree.

A learner meets each key term in a lesson with its Chinese name at first use, and
docs/GLOSSARY.md, built from the TSV rows, says which lesson that is. These tests keep
the two honest:

* every row's English term and Chinese name occur in the lesson the row names; in the lesson
  that introduces the term (its row with the lowest lesson number), the Chinese is given
  where the term is introduced: the first markdown cell with the term in bold (the first
  cell that uses it at all, if it is never bold). Later rows of the same term only
  repeat it for the reader of that lesson;
* the lesson a term is listed under is the first lesson that uses it (no earlier lesson
  uses it without a gloss in the glossary);
* every bold term glossed in a lesson, ``**term** (中文)`` or ``**term (中文)**``, has a
  glossary row, and the Chinese it is given is that row's (one gloss per term in the course);
  an inflected form ("**padded** (填充)") passes when its Chinese is a glossary term's.

Only markdown cells count: code comments and outputs are not where terms are taught.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from course_tools.lessons import lesson_id, lesson_key, lesson_notebooks

TIER = "content"  # content lint (course_tools/tiers.py)

ROOT = Path(__file__).resolve().parent.parent
# lesson id ("4", "1a", "7b") -> notebook; lesson_key orders ids in teaching order
NOTEBOOKS = {lesson_id(p): p for p in lesson_notebooks(ROOT / "notebooks")}
TSVS = sorted((ROOT / "docs" / "glossary").glob("[0-9]*.tsv"))   # usage.tsv: the translation's word rules
CJK = re.compile(r"[\u3400-\u9fff]")


def _rows() -> list[tuple[str, str, str, str, str]]:
    """(English, Chinese, meaning, lesson, where) for every non-empty TSV line.

    A line is English<TAB>中文<TAB>meaning<TAB>lesson<TAB>alternatives (other Chinese names,
    separated by "；", possibly empty); the alternatives are for the reader of docs/GLOSSARY.md,
    the lessons use only the 中文 name."""
    rows = []
    for tsv in TSVS:
        for number, line in enumerate(tsv.read_text(encoding="utf-8").splitlines(), start=1):
            if line.strip():
                fields = line.split("\t")
                assert len(fields) == 5, f"{tsv.name}:{number}: expected 5 tab-separated fields, got {len(fields)}"
                english, chinese, meaning, lesson, _alternatives = (f.strip() for f in fields)
                lesson_key(lesson)              # a lesson id: 4, 1a, 7b (ValueError says so)
                rows.append((english, chinese, meaning, lesson, f"{tsv.name}:{number}"))
    return rows


ROWS = _rows()


def _markdown_cells(lesson: str) -> dict[int, str]:
    """Notebook cell index -> source, for the markdown cells of a lesson."""
    nb = json.loads(NOTEBOOKS[lesson].read_text(encoding="utf-8"))
    return {i: "".join(c["source"]) for i, c in enumerate(nb["cells"]) if c["cell_type"] == "markdown"}


def _plain(text: str) -> str:
    # drop markdown emphasis and code marks, join lines: "**time\nstep**" reads "time step"
    return re.sub(r"\s+", " ", re.sub(r"[*_`]", "", text))


def _variants(english: str) -> list[str]:
    """The ways a lesson may write a row's term: "gated recurrent unit (GRU)" is used as
    either "gated recurrent unit" or "GRU"."""
    match = re.fullmatch(r"(.+?)\s*\((.+)\)", english)
    return [match.group(1), match.group(2)] if match else [english]


def _uses(text: str, term: str) -> bool:
    # the term as a whole word (plural allowed), in any case: "token" is not in "tokenization"
    return re.search(rf"(?<![\w-]){re.escape(term)}(?:s|es)?(?![\w-])", text, re.IGNORECASE) is not None


def _bold_parts(text: str) -> str:
    return " | ".join(_plain(m) for m in re.findall(r"\*\*(.+?)\*\*", text, re.DOTALL))


def _key(term: str) -> str:
    return re.sub(r"\s+", " ", term.strip().lower())


def _singular(key: str, known: set[str]) -> str:
    for suffix in ("es", "s"):
        if key.endswith(suffix) and key[: -len(suffix)] in known:
            return key[: -len(suffix)]
    return key


KNOWN = {_key(v) for english, *_ in ROWS for v in [english, *_variants(english)]}


def _first_rows() -> list[tuple[str, str, str, int, str]]:
    first: dict[str, tuple[str, str, str, int, str]] = {}
    for row in ROWS:
        key = _singular(_key(row[0]), KNOWN)
        if key not in first or lesson_key(row[3]) < lesson_key(first[key][3]):
            first[key] = row
    return sorted(first.values(), key=lambda r: r[4])


FIRST_ROWS = _first_rows()


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r[4]} {r[0]}")
def test_row_is_taught_in_its_lesson_at_first_use(row: tuple[str, str, str, str, str]) -> None:
    english, chinese, _, lesson, where = row
    assert lesson in NOTEBOOKS, f"{where}: no notebook for lesson {lesson}"
    raw = _markdown_cells(lesson)
    cells = {i: _plain(c) for i, c in raw.items()}
    chinese_plain = _plain(chinese)
    assert CJK.search(chinese), f"{where}: the Chinese column of {english!r} has no Chinese"
    using = [i for i, c in cells.items() if any(_uses(c, v) for v in _variants(english))]
    assert using, f"{where}: lesson {lesson} never uses {english!r}"
    assert any(chinese_plain in c for c in cells.values()), f"{where}: lesson {lesson} never writes the Chinese {chinese!r}"
    if row not in FIRST_ROWS:
        return                                    # the term was introduced in an earlier lesson
    bold = [i for i in using if any(_uses(_bold_parts(raw[i]), v) for v in _variants(english))]
    first = (bold or using)[0]
    assert chinese_plain in cells[first], (
        f"{where}: {english!r} is introduced in cell {first} of lesson {lesson} without its "
        f"Chinese {chinese!r}:\n{cells[first][:400]}")


@pytest.mark.parametrize("row", FIRST_ROWS, ids=lambda r: f"{r[4]} {r[0]}")
def test_no_earlier_lesson_uses_the_term(row: tuple[str, str, str, str, str]) -> None:
    english, _, _, lesson, where = row
    # a longer glossary term is not a use of a shorter one: "long short-term memory" is not "memory"
    longer = sorted((v for v in KNOWN if any(_key(t) != v and _uses(v, t) for t in _variants(english))),
                    key=len, reverse=True)
    for earlier in sorted((n for n in NOTEBOOKS if lesson_key(n) < lesson_key(lesson)), key=lesson_key):
        for index, cell in _markdown_cells(earlier).items():
            text = _plain(cell)
            for term in longer:
                text = re.sub(re.escape(term), " ", text, flags=re.IGNORECASE)
            used = [v for v in _variants(english) if _uses(text, v)]
            assert not used, (f"{where}: {english!r} is listed under lesson {lesson}, but lesson {earlier} "
                              f"already uses {used[0]!r} (cell {index}): list it there, with its Chinese")


def test_one_gloss_per_term() -> None:
    glosses: dict[str, set[str]] = {}
    for english, chinese, _, _, _ in ROWS:
        glosses.setdefault(_singular(_key(english), KNOWN), set()).add(chinese)
    several = {term: sorted(g) for term, g in glosses.items() if len(g) > 1}
    assert not several, f"terms with more than one Chinese gloss in docs/glossary: {several}"


# **term** (中文 ...) or **term (中文 ...)**: the parenthesis starts with Chinese
_BOLD_OUTSIDE = re.compile(r"\*\*([^*\n()]+?)\*\*\s*\(([^()]*)\)")
_BOLD_INSIDE = re.compile(r"\*\*([^*\n()]+?)\s*\(([^()]*)\)\*\*")


def _bold_glosses(text: str) -> list[tuple[str, str]]:
    """(term, Chinese) of each bold term glossed in Chinese; the Chinese is the first part of
    the parenthesis, before a comma or semicolon ("循环神经网络, RNN" -> "循环神经网络")."""
    found = []
    for pattern in (_BOLD_OUTSIDE, _BOLD_INSIDE):
        for match in pattern.finditer(text):
            term, inside = re.sub(r"^the\s+", "", match.group(1).strip(), flags=re.IGNORECASE), match.group(2).strip()
            first = re.split(r"[,;，；/]", inside)[0].strip()
            if CJK.search(first):
                found.append((term, first))
    return found


def _bold_cases() -> list[tuple[str, str, str]]:
    cases = []
    for lesson in sorted(NOTEBOOKS, key=lesson_key):
        for cell in _markdown_cells(lesson).values():
            cases += [(lesson, term, chinese) for term, chinese in _bold_glosses(cell)]
    return cases


@pytest.mark.parametrize("case", _bold_cases(), ids=lambda c: f"lesson{c[0]} {c[1]}")
def test_every_glossed_bold_term_is_in_the_glossary_with_that_gloss(case: tuple[str, str, str]) -> None:
    lesson, term, chinese = case
    by_key: dict[str, set[str]] = {}
    for english, zh, _, _, _ in ROWS:
        for v in [english, *_variants(english)]:
            by_key.setdefault(_key(v), set()).add(_plain(zh))
    key = _singular(_key(term), set(by_key))
    if key not in by_key and any(_plain(chinese) in glosses for glosses in by_key.values()):
        return                                    # an inflected form of a glossed term: "**padded** (填充)"
    assert key in by_key, (f"lesson {lesson} glosses **{term}** ({chinese}) but docs/glossary has no row for "
                           f"{term!r}: add one to docs/glossary/{NOTEBOOKS[lesson].name.split('_')[0]}.tsv (or the lesson that first uses it)")
    assert _plain(chinese) in by_key[key], (
        f"lesson {lesson} glosses **{term}** as {chinese!r}, docs/glossary as {sorted(by_key[key])}: one gloss per term")


def test_the_bold_gloss_pattern_is_recognised() -> None:
    # the test must be able to fail: both spellings are found, English-only parentheses are not
    text = "a **time step** (时间步), a **token (词元)**, **BLEU** (Bilingual Evaluation Understudy)"
    assert _bold_glosses(text) == [("time step", "时间步"), ("token", "词元")]
    assert _bold_glosses("**The quadratic wall** (二次方瓶颈 / x)") == [("quadratic wall", "二次方瓶颈")]
    assert _uses("the tokens of", "token") and not _uses("tokenization", "token")
    assert _variants("gated recurrent unit (GRU)") == ["gated recurrent unit", "GRU"]


def test_alternatives_are_other_names() -> None:
    # the alternatives column never repeats the chosen name and uses the full-width separator
    for tsv in TSVS:
        for number, line in enumerate(tsv.read_text(encoding="utf-8").splitlines(), start=1):
            if line.strip():
                _, chinese, _, _, alternatives = (f.strip() for f in line.split("\t"))
                names = [a.strip() for a in alternatives.split("；")] if alternatives else []
                assert ";" not in alternatives and all(names), f"{tsv.name}:{number}: bad alternatives {alternatives!r}"
                assert chinese not in names, f"{tsv.name}:{number}: {chinese!r} is both the name and an alternative"
