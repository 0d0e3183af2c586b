"""Build docs/GLOSSARY.md from the per-lesson term lists docs/glossary/NN.tsv.

    .venv/bin/python scripts/build_glossary.py          # rewrite docs/GLOSSARY.md
    .venv/bin/python scripts/build_glossary.py --check  # exit 1 if it is out of date

Each TSV line has five tab-separated fields:

    English<TAB>中文<TAB>one-line meaning<TAB>lesson<TAB>alternatives

"lesson" is a lesson id: 4, or 1a / 7b for a part of a lesson taught in parts (docs/glossary/NN.tsv
or NNa.tsv).

The 中文 field is the one name the course uses (D2L-zh's term where D2L-zh has one, see
POLICY below); "alternatives" lists other Chinese names in use, separated by "；" (the
full-width semicolon), and may be empty (the line then ends with a tab). A term listed by
several lessons is kept once, at the lesson that introduces it first.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import NamedTuple

from course_tools.lessons import lesson_key

ROOT = Path(__file__).resolve().parent.parent
PARTS = ROOT / "docs" / "glossary"
OUT = ROOT / "docs" / "GLOSSARY.md"
FIELDS = ("English", "中文", "meaning", "lesson", "alternatives")
ALT_SEP = "；"
CJK = re.compile(r"[\u3400-\u9fff]")

POLICY = [
    "## 译名原则 / Naming policy",
    "",
    "- 每个术语只用一个中文译名。动手学深度学习（D2L-zh，第二版，zh.d2l.ai）有的术语，用 D2L-zh 的译名"
    "（如 词元 token、词表 vocabulary、隐状态 hidden state、记忆元 cell state、注意力汇聚 attention pooling、"
    "层规范化 layer normalization、基于位置的前馈网络 position-wise FFN、强制教学 teacher forcing）；"
    "D2L-zh 没有的，用中文机器学习文献中最常见的译名。",
    "- 中文文献通常保留英文的术语与缩写，正文照样保留（logit、softmax、Transformer、BERT、GPT、BLEU、"
    "MQA、GQA、RoPE ……）；表中的中文是它们的释义或全称。",
    "- “其他译名”一栏列出其他书籍、论文和博客中常见的译名，供读者对照，正文不用。",
    "",
    "One Chinese name per term: D2L-zh's (2nd edition) where D2L-zh has the term, otherwise the most",
    "common one in Chinese ML writing. English terms and abbreviations that Chinese texts keep (logit,",
    "softmax, Transformer, BERT, GPT, BLEU ...) stay in English in the running text; the 中文 column",
    "then gives their Chinese reading. The alternatives column lists other names in use, for reference.",
]


class Term(NamedTuple):
    english: str
    chinese: str
    meaning: str
    lesson: str          # a lesson id: "4", or "1a" / "7b" for a lesson taught in parts
    alternatives: tuple[str, ...]


def parse_line(line: str, where: str) -> Term:
    """One TSV line -> Term; raises ValueError naming ``where`` (file:line) on a bad row."""
    fields = line.split("\t")
    if len(fields) != len(FIELDS):
        raise ValueError(f"{where}: expected {len(FIELDS)} tab-separated fields ({', '.join(FIELDS)}; "
                         f"alternatives may be empty), got {len(fields)}: {line!r}")
    english, chinese, meaning, lesson, alternatives = (f.strip() for f in fields)
    for name, value in (("English", english), ("中文", chinese), ("meaning", meaning)):
        if not value:
            raise ValueError(f"{where}: the {name} field is empty: {line!r}")
    try:
        lesson_key(lesson)
    except ValueError as error:
        raise ValueError(f"{where}: the lesson field: {error}") from None
    if not CJK.search(chinese):
        raise ValueError(f"{where}: the 中文 field of {english!r} has no Chinese: {chinese!r}")
    alts = tuple(a.strip() for a in alternatives.split(ALT_SEP)) if alternatives else ()
    if any(not a for a in alts):
        raise ValueError(f"{where}: empty name in the alternatives of {english!r} "
                         f"(separate names with a single {ALT_SEP!r}): {alternatives!r}")
    if any(sep in alternatives for sep in (";", "，", ",")):
        raise ValueError(f"{where}: separate the alternatives of {english!r} with {ALT_SEP!r}, "
                         f"not ';' or a comma: {alternatives!r}")
    if chinese in alts:
        raise ValueError(f"{where}: the 中文 name {chinese!r} of {english!r} is also listed as an alternative")
    if len(set(alts)) != len(alts):
        raise ValueError(f"{where}: repeated name in the alternatives of {english!r}: {alternatives!r}")
    return Term(english, chinese, meaning, lesson, alts)


def read_terms(parts: Path = PARTS) -> list[Term]:
    """All terms, first introduction wins; raises ValueError naming file and line on bad rows."""
    seen: dict[str, Term] = {}
    for path in sorted(parts.glob("[0-9]*.tsv")):   # NN.tsv per lesson; usage.tsv is read by scripts/i18n.py
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            term = parse_line(line, f"{path}:{number}")
            key = term.english.lower()
            if key not in seen or lesson_key(term.lesson) < lesson_key(seen[key].lesson):
                seen[key] = term
    return sorted(seen.values(), key=lambda t: t.english.lower())


def _i18n():
    """course_tools.i18n: its usage rows and its zh-TW converter (OpenCC + i18n/zh_TW/overrides.tsv),
    imported when needed (it needs polib)."""
    from course_tools import i18n

    return i18n


def render(terms: list[Term]) -> str:
    i18n = _i18n()
    tw = i18n.Converter(i18n.EDITIONS["zh_TW"])
    usage = i18n.read_usage()
    lines = [
        "# Glossary / 术语表",
        "",
        "Every key term of the course with its Chinese name, the other Chinese names in use, a",
        "one-line meaning and the lesson that introduces it. Generated by `scripts/build_glossary.py`",
        "from `docs/glossary/*.tsv`.",
        "",
        *POLICY,
        "",
        "## 术语 / Terms",
        "",
        "The 正體中文 (zh-TW) column is what the Traditional Chinese edition writes: the 中文 name through",
        "OpenCC's Taiwan conversion (s2twp) and the reviewed overrides in `i18n/zh_TW/overrides.tsv`.",
        "",
        "| English | 中文 | 正體中文 (zh-TW) | 其他译名 / alternatives | meaning | lesson |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for term in terms:
        cells = [c.replace("|", "\\|") for c in (term.english, term.chinese, tw(term.chinese),
                                                 ALT_SEP.join(term.alternatives), term.meaning)]
        lines.append(f"| {cells[0]} | {cells[1]} | {cells[2]} | {cells[3]} | {cells[4]} | {term.lesson} |")
    lines += [
        "",
        "## 译文用词 / Words of the translation",
        "",
        "Words the Chinese text uses for things that are not lesson terms, and the names it does not use:",
        "`scripts/i18n.py lint` (tests/test_i18n.py) rejects each name of the third column in a",
        "translation, and `scripts/i18n.py fix` replaces those marked fixable. Generated from",
        "`docs/glossary/usage.tsv`. The lint also rejects a bare English \"notebook\" and \"96.6 %\" (Chinese",
        "text writes 96.6%).",
        "",
        "| English | 中文 | 正體中文 (zh-TW) | 不用 / rejected | fixable | note |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in usage:
        rejected = ALT_SEP.join(w.split("=")[0] for w in row.rejected)
        cells = [c.replace("|", "\\|") for c in (row.english, row.chinese, tw(row.chinese), rejected, row.note)]
        lines.append(f"| {cells[0]} | {cells[1]} | {cells[2]} | {cells[3]} | {'yes' if row.fix else 'no'} | {cells[4]} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="fail if docs/GLOSSARY.md is out of date")
    args = parser.parse_args(argv)
    try:
        terms = read_terms()
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    text = render(terms)
    if args.check:
        if not OUT.exists() or OUT.read_text(encoding="utf-8") != text:
            print("docs/GLOSSARY.md is out of date: run scripts/build_glossary.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)} ({len(terms)} terms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
