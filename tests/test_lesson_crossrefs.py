"""Figures one lesson quotes from another must match the quoted lesson's committed output.

Lesson 12 sets its real-text BLEU beside lesson 11's test BLEU on the generated corpus. Copied by
hand, such figures go stale when lesson 11 changes (issue 31: lesson 12 said "about 19, 68 and
90" while lesson 11's table said 40.5 / 85.0 / 89.9). This test reads lesson 11's committed test
table and checks every figure lesson 12 quotes from it, in English and in the Chinese edition.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

TIER = "content"  # content lint (course_tools/tiers.py)

ROOT = Path(__file__).resolve().parent.parent
LESSON11 = "11_translation_head_to_head.ipynb"
LESSON12 = "12_real_sentences.ipynb"
MODELS = ["GRU seq2seq", "GRU + Bahdanau", "Transformer"]


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _text(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def lesson11_test_bleu(path: Path = ROOT / "notebooks" / LESSON11) -> dict[str, float]:
    """Overall test BLEU of each model at its step-budget checkpoint, from lesson 11's committed table."""
    for cell in _cells(path):
        if cell["cell_type"] != "code":
            continue
        out = "".join("".join(o.get("text", "")) for o in cell.get("outputs", []))
        if "test corpus BLEU" not in out or "best within its step budget:" not in out:
            continue
        block = out.split("best within its step budget:", 1)[1].split("best within", 1)[0]
        found = {}
        for name in MODELS:
            m = re.search(rf"^\s*{re.escape(name)}\s+(\d+\.\d)\s", block, re.M)
            if m:
                found[name] = float(m.group(1))
        if len(found) == len(MODELS):
            return found
    raise AssertionError(f"{LESSON11}: no committed test table with a 'best within its step budget:' block")


QUOTE = re.compile(r"Lesson 11's models reached test corpus BLEU of about (\d+) \(plain GRU\), (\d+) \(with "
                   r"attention\) and (\d+) \(Transformer\)")
TF_ABOUT = re.compile(r"lesson 11's Transformer reached a corpus BLEU of about (\d+)")


def _quoted(cells: list[dict]) -> tuple[int, list[int], list[int]]:
    for i, cell in enumerate(cells):
        m = QUOTE.search(" ".join(_text(cell).split()))
        if m:
            return i, [int(g) for g in m.groups()], []
    raise AssertionError(f"{LESSON12} no longer quotes lesson 11's three figures in the expected sentence: "
                         f"update this test's QUOTE pattern together with the sentence")


def test_lesson12_quotes_lesson11s_committed_test_bleu() -> None:
    actual = lesson11_test_bleu()
    cells = _cells(ROOT / "notebooks" / LESSON12)
    _, quoted, _ = _quoted(cells)
    for name, q in zip(MODELS, quoted):
        assert abs(q - actual[name]) <= 1.0, (
            f"{LESSON12} says lesson 11's {name} reached about {q}; lesson 11's committed test table says "
            f"{actual[name]}: change the sentence (and its Chinese translation)")
    intro = " ".join(_text(cells[0]).split())
    m = TF_ABOUT.search(intro)
    assert m and abs(int(m.group(1)) - actual["Transformer"]) <= 1.0, (
        f"{LESSON12}'s introduction quotes lesson 11's Transformer as about {m and m.group(1)}; "
        f"lesson 11's table says {actual['Transformer']}")


def test_chinese_edition_quotes_the_same_figures() -> None:
    en_cells = _cells(ROOT / "notebooks" / LESSON12)
    i, quoted, _ = _quoted(en_cells)
    zh_path = ROOT / "zh" / "notebooks" / LESSON12
    if not zh_path.exists():
        pytest.skip("the Chinese edition is not built")
    zh_cells = _cells(zh_path)
    numbers = [int(x) for x in re.findall(r"(?<![\d.])\d+(?![\d.])", _text(zh_cells[i]))]
    for q in quoted:
        assert q in numbers, f"zh/notebooks/{LESSON12}, cell {i}: lesson 11's figure {q} is missing (has {numbers})"


def test_reader_rejects_a_table_without_the_block(tmp_path: Path) -> None:
    nb = {"cells": [{"cell_type": "code", "source": [], "outputs": [{"text": ["test corpus BLEU  all\n"]}]}]}
    path = tmp_path / LESSON11
    path.write_text(json.dumps(nb))
    with pytest.raises(AssertionError, match="no committed test table"):
        lesson11_test_bleu(path)
