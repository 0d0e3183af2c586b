"""The Chinese edition stays in step with the English one (scripts/i18n.py).

On the repository: every catalogue holds exactly the English notebook's markdown cells (an
English cell that changed leaves a fuzzy entry, which fails here until it is re-translated), no
entry is untranslated or fuzzy, every translation keeps the English's math, code, links and
headings, the committed zh/ notebooks are what the catalogues build, and their code cells and
outputs are the English ones byte for byte.

On modified copies in a temporary folder: each of those checks fails when it should.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from course_tools import i18n
from course_tools.lessons import lesson_notebooks

TIER = "content"  # content lint (course_tools/tiers.py)

ROOT = Path(__file__).resolve().parent.parent


DOCS = i18n.all_documents()     # every edition: zh_CN (zh/) and zh_TW (zh-TW/)


def _id(doc) -> str:
    return f"{doc.edition.lang}:{doc.english.relative_to(ROOT).as_posix()}"


# ---------------------------------------------------------------- the repository, as committed


@pytest.mark.parametrize("ed", list(i18n.EDITIONS.values()), ids=lambda e: e.lang)
def test_every_lesson_and_assignment_has_a_catalogue(ed):
    lessons = lesson_notebooks(ROOT / "notebooks")
    sources = sorted((ROOT / "solutions").glob("*/*.ipynb"))
    assert len(lessons) >= 11 and len(sources) >= 10
    assert {d.english for d in DOCS if d.edition == ed} == set(lessons) | set(sources)
    missing = [d.catalogue.relative_to(ROOT).as_posix() for d in DOCS if not d.catalogue.exists()]
    assert not missing, f"run `scripts/i18n.py update`: {missing}"


@pytest.mark.parametrize("doc", DOCS, ids=_id)
def test_catalogue_is_in_step_with_the_english(doc):
    """`update` would change nothing: every English markdown cell is an entry, no entry is stale;
    a generated edition's catalogue is what `convert` makes of its source edition's."""
    if doc.edition.source:
        assert i18n.converted(doc, _converter(doc.edition)) == doc.catalogue.read_text(encoding="utf-8"), (
            f"{doc.catalogue.relative_to(ROOT)} is not what `scripts/i18n.py convert` makes of the "
            f"{doc.edition.source} catalogue: run it (never edit a generated catalogue by hand)")
        return
    assert i18n.updated(doc) == doc.catalogue.read_text(encoding="utf-8"), (
        f"{doc.english.relative_to(ROOT)} changed since {doc.catalogue.relative_to(ROOT)} was updated: "
        "run `.venv/bin/python scripts/i18n.py update`, translate the fuzzy and new entries, then `build`")


@pytest.mark.parametrize("doc", DOCS, ids=_id)
def test_every_entry_is_translated_and_none_is_fuzzy(doc):
    problems = i18n.problems_in(i18n.load_catalogue(doc.catalogue), doc.catalogue.name)
    assert not problems, "\n".join(problems)


_CONVERTERS: dict = {}


def _converter(ed):
    if ed.lang not in _CONVERTERS:
        _CONVERTERS[ed.lang] = i18n.Converter(ed)
    return _CONVERTERS[ed.lang]


@pytest.mark.parametrize("doc", DOCS, ids=_id)
def test_translations_keep_math_code_links_and_headings(doc):
    problems = i18n.lint(doc, _converter(doc.edition) if doc.edition.source else None)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("doc", DOCS, ids=_id)
def test_committed_chinese_notebook_is_what_the_catalogue_builds(doc):
    assert doc.output.exists(), f"{doc.output.relative_to(ROOT)} missing: run `scripts/i18n.py build`"
    assert doc.output.read_text(encoding="utf-8") == i18n.notebook_text(i18n.build(doc)), (
        f"{doc.output.relative_to(ROOT)} is not what {doc.catalogue.relative_to(ROOT)} builds: "
        "run `scripts/i18n.py build` (never edit zh/ by hand)")


@pytest.mark.parametrize("doc", DOCS, ids=_id)
def test_code_cells_and_outputs_are_the_english_ones(doc):
    english, chinese = i18n.read_notebook(doc.english), i18n.read_notebook(doc.output)
    assert i18n.differences(english, chinese) == []
    # and the markdown really is Chinese: most cells carry CJK text
    md = [i18n._source(c) for c in chinese["cells"] if c["cell_type"] == "markdown" and i18n._source(c).strip()]
    cjk = [t for t in md if re.search(r"[\u4e00-\u9fff]{4}", t)]
    assert len(cjk) >= 0.9 * len(md), f"{len(md) - len(cjk)} of {len(md)} markdown cells have no Chinese sentence"
    assert chinese["metadata"]["course"]["language"] == doc.edition.tag


def test_the_check_command_passes_on_the_repository():
    assert i18n.check() == []


# ---------------------------------------------------------------- modified copies


def _fake_translation(english: str, opening: str) -> str:
    """A stand-in translation that keeps what a real one must keep (math, code, headings, terms)."""
    kept = re.findall(r"\$\$.+?\$\$|\$[^$]+\$|`[^`]+`|^#+ ", english, re.S | re.M)
    return opening + "\n" + "\n".join(kept + i18n.glossed_terms(english))


def _mini_course(tmp_path: Path) -> tuple[Path, object]:
    """A course with one lesson (lesson 3's first cells), translated and built."""
    root = tmp_path / "course"
    (root / "notebooks").mkdir(parents=True)
    nb = i18n.read_notebook(ROOT / "notebooks" / "03_scoring_functions.ipynb")
    nb["cells"] = nb["cells"][:6]
    (root / "notebooks" / "03_scoring_functions.ipynb").write_text(i18n.notebook_text(nb), encoding="utf-8")
    (doc,) = i18n.documents(root)
    doc.catalogue.parent.mkdir(parents=True)
    po = i18n.merge(i18n.load_catalogue(doc.catalogue), i18n.template(doc.english, root))
    for k, e in enumerate(po):
        e.msgstr = _fake_translation(e.msgid, f"第 {k} 段译文。")
    doc.catalogue.write_text(i18n.catalogue_text(po), encoding="utf-8")
    doc.output.parent.mkdir(parents=True)
    doc.output.write_text(i18n.notebook_text(i18n.build(doc, root=root)), encoding="utf-8")
    return root, doc


def _edit_english_markdown(doc, new_text) -> None:
    nb = i18n.read_notebook(doc.english)
    cell = next(c for c in nb["cells"] if c["cell_type"] == "markdown")
    cell["source"] = new_text(i18n._source(cell))
    doc.english.write_text(i18n.notebook_text(nb), encoding="utf-8")


def test_a_translated_mini_course_passes_the_check(tmp_path):
    root, doc = _mini_course(tmp_path)
    assert i18n.check(root) == []


def test_a_changed_english_cell_becomes_fuzzy_and_fails_until_retranslated(tmp_path):
    root, doc = _mini_course(tmp_path)
    _edit_english_markdown(doc, lambda s: s.replace("That works", "That still works"))
    # before `update`: the catalogue is out of step
    assert any("out of step" in p for p in i18n.check(root))
    doc.catalogue.write_text(i18n.updated(doc, root), encoding="utf-8")
    po = i18n.load_catalogue(doc.catalogue)
    (fuzzy,) = [e for e in po if "fuzzy" in e.flags]
    assert "That still works" in fuzzy.msgid and "That works" in fuzzy.previous_msgid
    assert fuzzy.msgstr.startswith("第 0 段译文")          # the old translation, offered for revision
    found = i18n.check(root)
    assert any("fuzzy" in p for p in found)
    with pytest.raises(ValueError, match="without a finished translation"):
        i18n.build(doc, root=root)
    # the translator revises it: through export / import
    folder = tmp_path / "work"
    (path,) = i18n.export_cells(doc, folder)
    assert (folder / path.name.replace(".en.md", ".old-en.md")).exists()
    path.with_name(path.name.replace(".en.md", ".zh.md")).write_text(
        _fake_translation(fuzzy.msgid, "修订后的译文。"), encoding="utf-8")
    assert i18n.import_cells(doc, folder) == 1
    assert not any("fuzzy" in e.flags for e in i18n.load_catalogue(doc.catalogue))
    assert any("differs from what" in p for p in i18n.check(root))   # zh/ not rebuilt yet
    doc.output.write_text(i18n.notebook_text(i18n.build(doc, root=root)), encoding="utf-8")
    assert i18n.check(root) == []


def test_a_new_english_cell_is_untranslated_and_a_removed_one_obsolete(tmp_path):
    root, doc = _mini_course(tmp_path)
    nb = i18n.read_notebook(doc.english)
    removed = nb["cells"].pop(2)
    assert removed["cell_type"] == "markdown"
    nb["cells"].append({"cell_type": "markdown", "id": "new1", "metadata": {}, "source": ["A brand-new paragraph."]})
    doc.english.write_text(i18n.notebook_text(nb), encoding="utf-8")
    po = i18n.merge(i18n.load_catalogue(doc.catalogue), i18n.template(doc.english, root))
    new = po.find("A brand-new paragraph.")
    assert new is not None and new.msgstr == "" and "fuzzy" not in new.flags
    gone = [e for e in po if e.obsolete]
    assert [e.msgid for e in gone] == [i18n._source(removed)]
    # the cell comes back: its translation with it, not fuzzy
    nb["cells"].insert(2, removed)
    doc.english.write_text(i18n.notebook_text(nb), encoding="utf-8")
    doc.catalogue.write_text(i18n.catalogue_text(po), encoding="utf-8")
    back = i18n.merge(i18n.load_catalogue(doc.catalogue), i18n.template(doc.english, root)).find(i18n._source(removed))
    assert back.msgstr and "fuzzy" not in back.flags


def test_a_hand_edited_chinese_notebook_is_caught(tmp_path):
    root, doc = _mini_course(tmp_path)
    zh = i18n.read_notebook(doc.output)
    code = next(c for c in zh["cells"] if c["cell_type"] == "code")
    code["source"] = ["# 中文注释\n"] + code["source"]
    doc.output.write_text(i18n.notebook_text(zh), encoding="utf-8")
    found = i18n.check(root)
    assert any("code cell differs from the English" in p for p in found)
    assert any("differs from what" in p for p in found)


def test_an_output_changed_in_the_chinese_notebook_is_caught():
    english = i18n.read_notebook(ROOT / "notebooks" / "03_scoring_functions.ipynb")
    chinese = json.loads(json.dumps(english))
    cell = next(c for c in chinese["cells"] if c["cell_type"] == "code" and c.get("outputs"))
    cell["outputs"][0] = {**cell["outputs"][0], "text": ["something else\n"]} if "text" in cell["outputs"][0] \
        else {"output_type": "stream", "name": "stdout", "text": ["x\n"]}
    assert any("differs from the English" in d for d in i18n.differences(english, chinese))
    chinese = json.loads(json.dumps(english))
    del chinese["cells"][3]
    assert i18n.differences(english, chinese)


@pytest.mark.parametrize("english, chinese, what", [
    ("Divide by $\\sqrt d$ here.", "在这里除以 $\\sqrt{d}$。", "math"),
    ("Call `masked_softmax(X, lens)`.", "调用 `masked_softmax(X)`。", "code"),
    ("See [the docs](https://pytorch.org).", "参见[文档](https://example.org)。", "link"),
    ("## Summary\nText.", "### 小结\n正文。", "heading"),
    ("$$a = b$$ and $c$", "$$a = b$$ 和", "math"),
    ("The **attention scoring function** (注意力评分函数) $a$.", "**评分函数**（attention scoring function）$a$。", "term"),
])
def test_lint_catches_what_a_translation_must_not_change(english, chinese, what):
    problems = i18n.lint_entry(english, chinese)
    assert any(p.startswith(what) for p in problems), problems


def test_lint_accepts_a_faithful_translation():
    english = "## Summary\nThe **score** $a(\\mathbf q, \\mathbf k)$ of `AdditiveAttention` ([paper](https://arxiv.org/abs/1409.0473))."
    chinese = "## 小结\n`AdditiveAttention` 的**评分**$a(\\mathbf q, \\mathbf k)$（[论文](https://arxiv.org/abs/1409.0473)）。"
    assert i18n.lint_entry(english, chinese) == []


def test_a_broken_catalogue_is_a_clear_error(tmp_path):
    root, doc = _mini_course(tmp_path)
    doc.catalogue.write_text('msgid "unterminated\n', encoding="utf-8")
    with pytest.raises(SystemExit, match="not a readable PO catalogue"):
        i18n.load_catalogue(doc.catalogue)


def test_the_script_builds_from_a_clean_copy(tmp_path):
    """`python -m course_tools.i18n build` in a copy without zh/ rebuilds exactly the committed notebooks
    (``-m`` imports the copy's course_tools, which works on the checkout it lies in)."""
    copy = tmp_path / "repo"
    for part in ("notebooks", "solutions", "i18n", "course_tools"):
        shutil.copytree(ROOT / part, copy / part, ignore=shutil.ignore_patterns("*.py[co]", "__pycache__"))
    import subprocess

    result = subprocess.run([sys.executable, "-m", "course_tools.i18n", "build"], capture_output=True,
                            text=True, cwd=copy)
    assert result.returncode == 0, result.stderr
    assert f"built {Path('zh', 'notebooks', '01a_rnn_seq2seq.ipynb')}" in result.stdout, "the copy's tool built the real checkout"
    for doc in DOCS:
        built = copy / doc.output.relative_to(ROOT)
        assert built.read_text(encoding="utf-8") == doc.output.read_text(encoding="utf-8"), built


# ---------------------------------------------------------------- a self-contained edition (issue 32)


def _edition_notebooks() -> list[Path]:
    return sorted(p for ed in i18n.EDITIONS.values() for part in ("notebooks", "solutions", "exercises")
                  for p in (ROOT / ed.folder / part).rglob("*.ipynb"))


@pytest.mark.parametrize("path", _edition_notebooks(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_path_from_an_edition_into_the_english_files(path):
    """A Chinese lesson sends the learner to the Chinese assignment, a Chinese assignment to the
    Chinese lesson: every `notebooks/...`, `exercises/...`, `solutions/...` in its markdown is the
    edition's own (zh/..., zh-TW/...), and that file exists."""
    folder = path.relative_to(ROOT).parts[0]
    for i, cell in enumerate(i18n.read_notebook(path)["cells"], start=1):
        if cell["cell_type"] != "markdown":
            continue
        text = i18n._source(cell)
        assert not i18n.english_paths(text), f"{path.relative_to(ROOT)} cell {i}: {i18n.english_paths(text)}"
        for m in re.finditer(rf"(?<![\w./-]){re.escape(folder)}/(notebooks|exercises|solutions)/[\w./-]*\w", text):
            assert (ROOT / m.group(0)).exists(), f"{path.relative_to(ROOT)} cell {i}: {m.group(0)} does not exist"


def test_paths_are_rewritten_by_the_build_not_the_catalogue():
    text = "计分作业：`exercises/lesson03_scoring/`，见 [第 3 课](notebooks/03_x.ipynb) 和 `zh/notebooks/a.ipynb`。"
    assert i18n.localise_paths(text, "zh-TW") == (
        "计分作业：`zh-TW/exercises/lesson03_scoring/`，见 [第 3 课](zh-TW/notebooks/03_x.ipynb) 和 `zh/notebooks/a.ipynb`。")
    assert i18n.english_paths(text) == ["exercises/", "notebooks/"]
    # the lint still wants the catalogue's inline code to be the English's: the rule lives in the build
    assert i18n.lint_entry("Assignment: `exercises/lesson03_scoring/`.", "计分作业：`exercises/lesson03_scoring/`。",
                           usage=[]) == []


def test_the_mini_course_builds_edition_paths(tmp_path):
    root, doc = _mini_course(tmp_path)
    po = i18n.load_catalogue(doc.catalogue)
    po[0].msgstr += "\n计分作业：`exercises/lesson03_scoring/`"
    doc.catalogue.write_text(i18n.catalogue_text(po), encoding="utf-8")
    built = i18n.notebook_text(i18n.build(doc, root=root))
    assert "`zh/exercises/lesson03_scoring/`" in built and "`exercises/" not in built


USAGE = i18n.read_usage()


@pytest.mark.parametrize("wrong, right", [(w.split("=")[0], w.split("=")[1] if "=" in w else r.chinese)
                                          for r in USAGE for w in r.rejected if re.search(r"[\u4e00-\u9fff]", w)])
def test_the_lint_rejects_the_words_the_glossary_rejects(wrong, right):
    problems = i18n.lint_entry("Some English.", f"这是{wrong}的例子。")
    assert any(p.startswith("usage:") and repr(wrong) in p for p in problems), problems
    assert not any(p.startswith("usage:") for p in i18n.lint_entry("Some English.", f"这是{right}的例子。"))


@pytest.mark.parametrize("text", ["准确率为 96.6 %。", "这个 notebook 的单元格", "这些 Notebooks 里"])
def test_the_lint_rejects_percent_spacing_and_english_notebook(text):
    assert any(p.startswith("usage:") for p in i18n.lint_entry("x", text))


def test_the_fixer_fixes_prose_and_leaves_code_links_and_urls():
    text = "被屏蔽的键占 96.6 %；`x = '96.6 %'`；[分词器](https://example.org/分词器) 和分词器、评分作业。"
    assert i18n.fix_text(text) == ("被掩蔽的键占 96.6%；`x = '96.6 %'`；[词元分析器](https://example.org/分词器) "
                                   "和词元分析器、计分作业。")
    assert i18n.fix_text(i18n.fix_text(text)) == i18n.fix_text(text)           # idempotent: re-run after a merge


def test_a_bad_usage_row_is_a_clear_error(tmp_path):
    bad = tmp_path / "usage.tsv"
    bad.write_text("tokenizer\t词元分析器\t分词器\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="usage.tsv:1: expected"):
        i18n.read_usage(bad)


def test_english_labels_in_formulas_are_caught_and_their_translation_allowed():
    english = r"$$h = z \odot h' \qquad\text{so}\qquad c = 1 &&\text{candidate hidden state}, d_\text{model}$$"
    kept = english
    translated = r"$$h = z \odot h' \qquad\text{因此}\qquad c = 1 &&\text{候选隐状态}, d_\text{model}$$"
    assert any(p.startswith("math: English label") for p in i18n.lint_entry(english, kept))
    assert i18n.lint_entry(english, translated) == []
    # a name stays a name, and the rest of the formula still has to be the English's
    assert i18n.english_in_math(r"$\text{len}_\text{pred}$") == []
    assert any(p.startswith("math changed") for p in i18n.lint_entry(english, translated.replace("c = 1", "c = 2")))


# ---------------------------------------------------------------- the zh-TW edition: generated from zh-CN

ZH_TW = i18n.EDITIONS["zh_TW"]


@pytest.mark.parametrize("simplified, traditional", [
    ("模型的参数", "模型的參數"), ("前缀", "前綴"), ("循环神经网络", "循環神經網路"), ("评分函数", "評分函數"),
    ("扩展", "擴展"), ("局部", "局部"), ("抛出异常", "拋出異常"),
    ("方差", "變異數"), ("掩码", "遮罩"), ("掩蔽 softmax", "遮蔽 softmax"), ("单元格", "儲存格"), ("翻译质量", "翻譯品質"),
    ("层规范化（layer normalization）", "層正規化（layer normalization）"), ("注意力汇聚", "注意力池化"),
    ("贪心解码", "貪婪解碼"), ("束搜索", "集束搜尋"), ("强制教学", "教師強制"),
])
def test_the_overrides_give_the_taiwan_terms(simplified, traditional):
    assert _converter(ZH_TW)(simplified) == traditional


def test_the_converter_keeps_code_links_and_urls():
    text = "调用 `注意力汇聚()`，见 [文档](https://example.org/数据) 和 <https://example.org/a>。"
    assert _converter(ZH_TW)(text) == "呼叫 `注意力汇聚()`，見 [文件](https://example.org/数据) 和 <https://example.org/a>。"


def test_a_changed_zh_cn_entry_makes_the_zh_tw_catalogue_stale(tmp_path):
    root, doc = _mini_course(tmp_path)
    shutil.copytree(ROOT / "i18n" / "zh_TW", root / "i18n" / "zh_TW", ignore=shutil.ignore_patterns("*.po"))
    (tw,) = i18n.documents(root, ZH_TW)
    convert = i18n.Converter(ZH_TW, root)
    tw.catalogue.parent.mkdir(parents=True, exist_ok=True)
    tw.catalogue.write_text(i18n.converted(tw, convert, root), encoding="utf-8")
    tw.output.parent.mkdir(parents=True, exist_ok=True)
    tw.output.write_text(i18n.notebook_text(i18n.build(tw, root=root)), encoding="utf-8")
    assert i18n.check(root) == []
    assert i18n.read_notebook(tw.output)["metadata"]["course"]["language"] == "zh-TW"
    po = i18n.load_catalogue(doc.catalogue)
    po[0].msgstr = po[0].msgstr.replace("译文", "参数的译文")
    doc.catalogue.write_text(i18n.catalogue_text(po), encoding="utf-8")
    assert any("not what `scripts/i18n.py convert` makes" in p for p in i18n.check(root))
    tw.catalogue.write_text(i18n.converted(tw, convert, root), encoding="utf-8")
    assert "參數的譯文" in tw.catalogue.read_text(encoding="utf-8")
