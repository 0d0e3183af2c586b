"""The Chinese front door (issue 23): README.zh-CN.md is linked from the README and lists every
lesson and assignment of the English course, in zh/, with the glossary's Chinese terms."""

from __future__ import annotations

import re
from pathlib import Path

from course_lessons import lesson_notebooks

ROOT = Path(__file__).resolve().parents[1]
ZH = ROOT / "README.zh-CN.md"


def _glossary() -> dict[str, str]:
    rows = {}
    for line in (ROOT / "docs" / "GLOSSARY.md").read_text("utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0] not in ("English", "---"):
            rows[cells[0]] = cells[1]
    return rows


def test_readme_links_the_chinese_readme_at_the_top():
    head = (ROOT / "README.md").read_text("utf-8").splitlines()[:4]
    assert any("](README.zh-CN.md)" in line for line in head), head
    readme = (ROOT / "README.md").read_text("utf-8")
    assert re.search(r"^\| `zh/` \|", readme, re.M) and re.search(r"^\| `i18n/` \|", readme, re.M), \
        "README's layout table names zh/ and i18n/"
    assert "](README.md)" in ZH.read_text("utf-8").splitlines()[2]


def test_chinese_readme_lists_every_lesson_and_assignment():
    text = ZH.read_text("utf-8")
    for nb in lesson_notebooks(ROOT / "notebooks"):
        assert f"`zh/notebooks/{nb.name}`" in text, f"README.zh-CN.md does not list {nb.name}"
    for a in sorted(p.name for p in (ROOT / "solutions").iterdir() if p.is_dir()):
        assert f"`{a}`" in text, a
    for needed in ("course-grade --check zh/exercises/", "init-course ~/course --from zh/solutions",
                   "COURSE_LANGUAGE=zh-CN", "--language zh-CN", "bash scripts/setup.sh", "fonts-wqy-microhei",
                   "Settings › Language"):
        assert needed in text, needed


def test_chinese_readme_uses_the_glossary_terms():
    text = ZH.read_text("utf-8")
    terms = _glossary()
    for english in ("masked softmax", "scaled dot-product attention", "additive attention", "multi-head attention",
                    "self-attention", "positional encoding", "encoder-decoder", "teacher forcing", "beam search",
                    "key/value cache", "grouped-query attention", "rotary position embedding",
                    "sliding-window attention", "Nadaraya-Watson kernel regression", "label smoothing",
                    "exposure bias", "class token", "inductive bias", "Vision Transformer (ViT)"):
        assert english in terms, f"{english!r} is no longer in docs/GLOSSARY.md"
        assert terms[english] in text, f"README.zh-CN.md should say {terms[english]!r} for {english!r}"
