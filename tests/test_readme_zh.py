"""The Chinese front door (issue 23): README.zh-CN.md is linked from the README and lists every
lesson and assignment of the English course, in zh/, with the glossary's Chinese terms."""

from __future__ import annotations

import re
from pathlib import Path


import pytest

from course_tools.lessons import lesson_notebooks

TIER = "content"  # content lint (course_tools/tiers.py)

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


@pytest.mark.parametrize("name, folder, tag", [("README.zh-CN.md", "zh", "zh-CN"), ("README.zh-TW.md", "zh-TW", "zh-TW")])
def test_chinese_readme_lists_every_lesson_and_assignment(name, folder, tag):
    text = (ROOT / name).read_text("utf-8")
    for nb in lesson_notebooks(ROOT / "notebooks"):
        assert f"`{folder}/notebooks/{nb.name}`" in text, f"{name} does not list {nb.name}"
    for a in sorted(p.name for p in (ROOT / "solutions").iterdir() if p.is_dir()):
        assert f"`{a}`" in text, a
    for needed in (f"course-grade --check {folder}/exercises/", f"init-course ~/course --from {folder}/solutions",
                   f"COURSE_LANGUAGE={tag}", f"--language {tag}", "bash scripts/setup.sh", "fonts-wqy-microhei",
                   "Settings › Language", "PIP_INDEX_URL", "TORCH_INDEX_URL", "--no-deps", "import_d2l()",
                   "CC-BY 2.0 FR", "fra-eng.zip", "CUDA"):
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


def _i18n():
    from course_tools import i18n

    return i18n


def test_chinese_readme_is_in_step_with_the_english():
    """Every section of README.md has its Chinese section, marked with the fingerprint of the
    English it translates: a changed English paragraph makes that section stale (issue 32)."""
    i18n = _i18n()
    problems = i18n.readme_problems((ROOT / "README.md").read_text("utf-8"), ZH.read_text("utf-8"))
    assert problems == [], "\n".join(problems)


def test_a_changed_english_paragraph_makes_its_chinese_section_stale():
    i18n = _i18n()
    english, chinese = (ROOT / "README.md").read_text("utf-8"), ZH.read_text("utf-8")
    changed = english.replace("Lessons 1-11 train on data generated offline", "Lessons 1-11 train on data made offline")
    assert changed != english
    problems = i18n.readme_problems(changed, chinese)
    assert len(problems) == 1 and "'## Data' changed since it was translated" in problems[0], problems
    # a new English section is untranslated; a whitespace-only change is not a change
    assert any("'## New part' is not translated" in p
               for p in i18n.readme_problems(english + "\n## New part\n\nText.\n", chinese))
    assert i18n.readme_problems(english.replace("Lessons 1-11 train", "Lessons 1-11  train"), chinese) == []
    # stamping records the new English (after the translator updated the section)
    assert i18n.readme_problems(changed, i18n.stamp_readme(changed, chinese, "## Data")) == []


def test_zh_tw_readme_is_the_converted_zh_cn_readme():
    i18n = _i18n()
    convert = i18n.Converter(i18n.EDITIONS["zh_TW"])
    want = i18n.readme_zh_tw(ZH.read_text("utf-8"), convert,
                             (ROOT / "i18n" / "zh_TW" / "README.regional.md").read_text("utf-8"))
    assert (ROOT / "README.zh-TW.md").read_text("utf-8") == want, "run `scripts/i18n.py convert`"
    text = want
    assert "台灣" in text and "香港" in text and "overrides.tsv" in text     # which regional terms it uses
    assert not re.search(r"[们这说时种为个课]", text), "Simplified characters left in README.zh-TW.md"


@pytest.mark.parametrize("name", ["README.zh-CN.md"])
def test_chinese_readme_uses_no_word_the_glossary_rejects(name):
    i18n = _i18n()
    problems = [p for p in i18n.usage_problems("", (ROOT / name).read_text("utf-8"))]
    assert problems == [], problems


def test_the_teachers_grading_guide_is_in_step_and_has_its_zh_tw_twin():
    """docs/GRADING.zh-CN.md translates the teacher's sections of docs/GRADING.md under the same
    drift detection; docs/GRADING.zh-TW.md is its conversion."""
    i18n = _i18n()
    english, chinese = (ROOT / "docs" / "GRADING.md").read_text("utf-8"), (ROOT / "docs" / "GRADING.zh-CN.md").read_text("utf-8")
    marks = re.findall(r"<!-- en: (.+?) [0-9a-f]{12} -->", chinese)
    assert "## The teacher's workflow, end to end" in marks
    assert i18n.readme_problems(english, chinese, "docs/GRADING.zh-CN.md", partial=True) == []
    changed = english.replace("Use `--update`: plain", "Use `--update`, since plain")
    assert changed != english and len(i18n.readme_problems(changed, chinese, partial=True)) == 1
    convert = i18n.Converter(i18n.EDITIONS["zh_TW"])
    assert (ROOT / "docs" / "GRADING.zh-TW.md").read_text("utf-8") == i18n.doc_zh_tw(chinese, convert), \
        "run `scripts/i18n.py convert`"
    assert "](docs/GRADING.zh-CN.md)" in ZH.read_text("utf-8")
