"""The Chinese editions: gettext catalogues over the English notebooks, and the notebooks built from them.

Every markdown cell of an English notebook is one entry of that notebook's catalogue
(``i18n/zh_CN/...po``, GNU gettext PO format: msgid the English cell, msgstr its translation).
Code cells and their outputs are never translated: the Chinese notebook takes them byte for
byte from the English one, so the English nbval run covers both editions.

    .venv/bin/python scripts/i18n.py update          # English changed: merge it into the catalogues
    .venv/bin/python scripts/i18n.py status          # per catalogue: translated / fuzzy / untranslated
    .venv/bin/python scripts/i18n.py build           # write zh/ from the English notebooks + catalogues
    .venv/bin/python scripts/i18n.py check           # exit 1 if anything is stale, fuzzy, untranslated or not rebuilt
    .venv/bin/python scripts/i18n.py export 03_scoring DIR   # the cells to translate as DIR/cellN.en.md
    .venv/bin/python scripts/i18n.py import 03_scoring DIR   # DIR/cellN.zh.md -> msgstr (clears fuzzy)
    .venv/bin/python scripts/i18n.py lint [NAMES]    # translations that changed math, code, links or headings,
                                                     # or use a word the glossary rejects (docs/glossary/usage.tsv)
    .venv/bin/python scripts/i18n.py fix             # the glossary's mechanical fixes (rejected words, "96.6 %")
    .venv/bin/python scripts/i18n.py convert         # the zh-TW catalogues, grader messages, README.zh-TW.md and
                                                     # docs/GRADING.zh-TW.md from the zh-CN ones (OpenCC + overrides)
    .venv/bin/python scripts/i18n.py readme [--doc D] [--stamp HEADING]   # README sections whose English changed

Editions (``EDITIONS``): zh_CN, translated by hand, built into ``zh/``; zh_TW, generated from zh_CN
by ``convert`` (OpenCC ``s2twp`` and the reviewed ``i18n/zh_TW/overrides.tsv``), built into
``zh-TW/``. ``update``, ``fix``, ``export`` and ``import`` work on zh_CN; ``build``, ``check``,
``lint`` and ``status`` on every edition (``--edition`` picks one). The build rewrites the course's
paths in an edition's markdown (``notebooks/...``, ``exercises/...``, ``solutions/...``) to the
edition's own (``zh/notebooks/...``): the catalogues keep the English's inline code.

After merging branches that touched catalogues: ``fix``, ``convert``, ``build``, then
``bash scripts/generate_exercises.sh`` (both editions' exercises).

``update`` follows ``msgmerge``: an entry whose English is unchanged keeps its translation; an
English cell that changed gets the translation of the most similar old entry, flagged ``fuzzy``
with the old English kept as ``#| msgid`` so the translator sees what changed; a new cell gets an
empty entry; a removed cell's entry stays at the end as obsolete (``#~``) for reuse. ``build``
refuses a catalogue with fuzzy or untranslated entries (``--allow-incomplete`` keeps the English
of those cells, for a preview; never commit such a build). A translator's loop for one changed
paragraph is in docs/DEVELOPING.md ("The Chinese edition").
"""

from __future__ import annotations

import argparse
import collections
import copy
import difflib
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import polib

from course_tools.lessons import lesson_notebooks

ROOT = Path(__file__).resolve().parent.parent
FUZZY_MIN_RATIO = 0.5     # how alike an old English cell must be to lend its translation


@dataclass(frozen=True)
class Edition:
    """One translated edition: its catalogues ``i18n/<lang>/``, its notebooks ``<folder>/``.

    ``source``: the edition whose catalogues this one's are generated from (by ``convert``,
    OpenCC plus ``i18n/<lang>/overrides.tsv``), or None for an edition translated by hand."""

    lang: str             # gettext's name for the language (catalogue folder, PO header)
    tag: str              # BCP 47, written into the built notebooks' metadata
    folder: str           # where its notebooks are built: <folder>/notebooks, <folder>/solutions
    source: str | None = None


EDITIONS = {
    "zh_CN": Edition("zh_CN", "zh-CN", "zh"),
    "zh_TW": Edition("zh_TW", "zh-TW", "zh-TW", source="zh_CN"),
}
ZH_CN = EDITIONS["zh_CN"]
LANG, LANG_TAG = ZH_CN.lang, ZH_CN.tag   # the hand-translated edition (kept for older callers)
HEADER = {
    "Project-Id-Version": "attention-course",
    "Language": LANG,
    "MIME-Version": "1.0",
    "Content-Type": "text/plain; charset=UTF-8",
    "Content-Transfer-Encoding": "8bit",
    "Plural-Forms": "nplurals=1; plural=0;",
}


@dataclass(frozen=True)
class Document:
    """One English notebook, its catalogue and the Chinese notebook built from them."""

    english: Path
    catalogue: Path
    output: Path
    edition: Edition = ZH_CN


def edition(name: str) -> Edition:
    """An edition by gettext name (zh_CN), BCP 47 tag (zh-TW) or folder (zh); a clear error otherwise."""
    for e in EDITIONS.values():
        if name in (e.lang, e.tag, e.folder) or name.lower().replace("_", "-") == e.tag.lower():
            return e
    raise SystemExit(f"unknown edition {name!r}; editions are " + ", ".join(
        f"{e.lang} ({e.folder}/)" for e in EDITIONS.values()))


def documents(root: Path = ROOT, ed: Edition = ZH_CN) -> list[Document]:
    """The lessons (notebooks/NN_*.ipynb, NNa_*.ipynb) and the assignment sources (solutions/<a>/*.ipynb)."""
    cat = root / "i18n" / ed.lang
    out = root / ed.folder
    docs = [Document(p, cat / "notebooks" / f"{p.stem}.po", out / "notebooks" / p.name, ed)
            for p in lesson_notebooks(root / "notebooks")]
    for p in sorted((root / "solutions").glob("*/*.ipynb")):
        a = p.parent.name
        docs.append(Document(p, cat / "solutions" / a / f"{p.stem}.po", out / "solutions" / a / p.name, ed))
    return docs


def all_documents(root: Path = ROOT) -> list[Document]:
    return [d for ed in EDITIONS.values() for d in documents(root, ed)]


# The course's own folders a lesson or an assignment names in its text: in an edition they are
# that edition's folders (zh/notebooks/..., zh-TW/exercises/...), never the English files. A
# rule of the build (the catalogues keep the English's inline code, as the lint requires).
_COURSE_PATH = re.compile(r"(?<![\w./-])(notebooks|exercises|solutions)/(?=[\w.-])")


def localise_paths(text: str, folder: str) -> str:
    """``notebooks/x``, ``exercises/x``, ``solutions/x`` -> ``<folder>/notebooks/x`` ...: paths of the
    edition's own files (a path already under a folder, like ``zh/notebooks/x``, is left alone)."""
    return _COURSE_PATH.sub(lambda m: f"{folder}/{m.group(1)}/", text)


def english_paths(text: str) -> list[str]:
    """The course paths in ``text`` that lead to the English files (what ``localise_paths`` rewrites)."""
    return [m.group(0) for m in _COURSE_PATH.finditer(text)]


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def _markdown_cells(nb: dict):
    """(index, cell, text) of every markdown cell with text: the cells a catalogue translates."""
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "markdown" and _source(cell).strip():
            yield i, cell, _source(cell)


def read_notebook(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def notebook_text(nb: dict) -> str:
    """A notebook as nbformat.write writes it (indent 1, UTF-8 unescaped, final newline)."""
    return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def template(english: Path, root: Path = ROOT) -> list[polib.POEntry]:
    """One entry per distinct markdown cell, in notebook order, with where it stands."""
    nb = read_notebook(english)
    rel = english.relative_to(root).as_posix()
    entries: dict[str, polib.POEntry] = {}
    for i, _cell, text in _markdown_cells(nb):
        where = (rel, str(i + 1))   # "path:N": the N-th cell, counted from 1 as JupyterLab shows them
        if text in entries:
            entries[text].occurrences.append(where)
        else:
            entries[text] = polib.POEntry(msgid=text, msgstr="", occurrences=[where],
                                          comment="a markdown cell; #: gives its notebook and cell number")
    return list(entries.values())


def _new_catalogue(lang: str = LANG) -> polib.POFile:
    po = polib.POFile(wrapwidth=0, encoding="utf-8")
    po.metadata = dict(HEADER, Language=lang)
    return po


_PO_LINE = re.compile(r'(#.*|(#~ )?(msgctxt|msgid|msgid_plural|msgstr(\[\d+\])?) "(?:[^"\\]|\\.)*"|(#~ )?"(?:[^"\\]|\\.)*")\s*')


def po_syntax_error(text: str) -> str | None:
    """The first line that is not PO syntax (polib reads some broken files without a word)."""
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip() and not _PO_LINE.fullmatch(line):
            return f"line {number}: {line[:60]!r}"
    return None


def load_catalogue(path: Path) -> polib.POFile:
    if not path.exists():
        return _new_catalogue()
    bad = po_syntax_error(path.read_text(encoding="utf-8"))
    if bad:
        raise SystemExit(f"{path}: not a readable PO catalogue ({bad} is not PO syntax: an unclosed quote or "
                         "a line that is not msgid/msgstr/comment); fix the file or restore it with git")
    try:
        po = polib.pofile(str(path), wrapwidth=0, encoding="utf-8")
    except (OSError, ValueError) as exc:   # polib raises OSError/IOError with the line on a syntax error
        raise SystemExit(f"{path}: not a readable PO catalogue ({exc}); fix the file or restore it with git") from exc
    return po


def merge(old: polib.POFile, new_entries: list[polib.POEntry]) -> polib.POFile:
    """msgmerge: the catalogue for ``new_entries`` keeping every translation it can."""
    out = _new_catalogue()
    out.metadata.update({k: v for k, v in old.metadata.items() if k not in HEADER})
    current = {e.msgid for e in new_entries}
    # an active entry wins over an obsolete one with the same English (a cell that came back)
    known = {e.msgid: e for e in sorted(old, key=lambda e: not e.obsolete)}
    # old versions of changed cells: translated entries whose English is no longer current
    candidates = [e for e in old if e.msgstr and e.msgid not in current]
    used: set[str] = set()
    for entry in new_entries:
        prev, fuzzy = known.get(entry.msgid), False
        if prev is None:
            prev, best_ratio, fuzzy = None, FUZZY_MIN_RATIO, True
            for cand in candidates:
                m = difflib.SequenceMatcher(None, cand.msgid, entry.msgid, autojunk=False)
                if m.real_quick_ratio() >= best_ratio and m.quick_ratio() >= best_ratio and m.ratio() >= best_ratio:
                    prev, best_ratio = cand, m.ratio()
        if prev is not None:
            entry.msgstr, entry.tcomment = prev.msgstr, prev.tcomment
            entry.flags = ["fuzzy"] if fuzzy else list(prev.flags)
            entry.previous_msgid = prev.msgid if fuzzy else prev.previous_msgid
            used.add(prev.msgid)
        out.append(entry)
    for e in old:
        if e.msgstr and e.msgid not in current and e.msgid not in used:
            out.append(polib.POEntry(msgid=e.msgid, msgstr=e.msgstr, tcomment=e.tcomment, obsolete=True))
    return out


def catalogue_text(po: polib.POFile) -> str:
    return str(po)


def updated(doc: Document, root: Path = ROOT) -> str:
    """The catalogue text that ``update`` would write for ``doc``."""
    return catalogue_text(merge(load_catalogue(doc.catalogue), template(doc.english, root)))


def problems_in(po: polib.POFile, where: str) -> list[str]:
    """Untranslated and fuzzy entries, each named with its cell."""
    out = []
    for e in po:
        if e.obsolete:
            continue
        cells = ", ".join(f"{p} cell {c}" for p, c in e.occurrences) or where
        first = e.msgid.strip().splitlines()[0][:60] if e.msgid.strip() else ""
        if not e.msgstr:
            out.append(f"{where}: untranslated: {cells}: {first!r}")
        elif "fuzzy" in e.flags:
            out.append(f"{where}: fuzzy (the English changed; re-translate, then remove the fuzzy flag): {cells}: {first!r}")
    return out


def build(doc: Document, allow_incomplete: bool = False, root: Path = ROOT) -> dict:
    """The Chinese notebook: the English one with each markdown cell replaced by its translation."""
    nb = read_notebook(doc.english)
    po = load_catalogue(doc.catalogue)
    table = {e.msgid: e for e in po if not e.obsolete}
    missing = []
    out = copy.deepcopy(nb)
    for i, cell, text in _markdown_cells(out):
        e = table.get(text)
        if e is None or not e.msgstr or "fuzzy" in e.flags:
            missing.append(f"cell {i + 1}")
            continue
        cell["source"] = _lines(localise_paths(e.msgstr, doc.edition.folder))
    if missing and not allow_incomplete:
        raise ValueError(f"{doc.catalogue.relative_to(root) if doc.catalogue.is_relative_to(root) else doc.catalogue}: "
                         f"{len(missing)} markdown cell(s) without a finished translation ({', '.join(missing[:8])}"
                         f"{' ...' if len(missing) > 8 else ''}); run `scripts/i18n.py update`, translate, "
                         "then build (or pass --allow-incomplete for a preview)")
    meta = out.setdefault("metadata", {})
    meta["language"] = doc.edition.tag
    meta["course"] = {
        "language": doc.edition.tag,
        "translated_from": doc.english.relative_to(root).as_posix(),
        "catalogue": doc.catalogue.relative_to(root).as_posix(),
    }
    return out


_MATH = re.compile(r"\$\$.+?\$\$|(?<![\\$])\$(?!\$).+?(?<!\\)\$", re.S)
_CODE = re.compile(r"(`+)(.+?)\1", re.S)
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^(#{1,6})\s", re.M)


# \text{...} inside math is prose (a label beside an equation): it is translated; the rest of a
# formula is kept. A \text{} right after _ or ^ is a name (d_\text{model}) and stays.
_MATH_TEXT = re.compile(r"(?<![_^])(\\text\s*)\{([^{}]*)\}")
_ENGLISH_WORD = re.compile(r"[A-Za-z]{2,}")


def _math_key(span: str) -> str:
    return re.sub(r"\s+", " ", _MATH_TEXT.sub(r"\1{}", span))


def english_in_math(text: str) -> list[str]:
    """The \text{...} labels of the math in ``text`` that are English prose (a phrase, or a connective
    like "so"; a single word such as ``\text{len}`` is a name and stays)."""
    no_code = _CODE.sub(" ", text)
    out = []
    for span in _MATH.finditer(no_code):
        for m in _MATH_TEXT.finditer(span.group(0)):
            words = [w for w in m.group(2).split() if _ENGLISH_WORD.search(w)]
            if re.search(r"[\u3400-\u9fff]", m.group(2)) or not words:
                continue
            # several words are a phrase; one word is a name (len, model, cls) unless a connective
            if len(words) >= 2 or words[0].lower().strip(",.:;") in _CONNECTIVES:
                out.append(m.group(0))
    return out


_CONNECTIVES = {"so", "and", "or", "where", "if", "for", "with", "then", "otherwise", "hence", "thus", "since"}


def _spans(text: str) -> dict[str, collections.Counter]:
    """What a translation must keep as it is: math (but its \text{} labels), inline code, link
    targets, heading levels."""
    code = [m.group(0) for m in _CODE.finditer(text)]
    no_code = _CODE.sub(" ", text)
    return {
        "math": collections.Counter(_math_key(m.group(0)) for m in _MATH.finditer(no_code)),
        "code": collections.Counter(code),
        "link": collections.Counter(m.group(1) for m in _LINK.finditer(no_code)),
        "heading": collections.Counter(m.group(1) for m in _HEADING.finditer(no_code)),
    }


_GLOSS = re.compile(r"\*\*[^*]+?\*\*\s*\(([^()]*[\u3400-\u9fff][^()]*)\)|\*\*[^*]*?\(([^()]*[\u3400-\u9fff][^()]*)\)\*\*")


def glossed_terms(english: str) -> list[str]:
    """The Chinese names the English gives its terms: ``**term** (中文)`` or ``**term (中文)**``."""
    out = []
    for m in _GLOSS.finditer(english):
        for part in re.split(r"[,，;；]", m.group(1) or m.group(2)):
            if re.search(r"[\u3400-\u9fff]", part):
                out.append(part.strip())
    return out


# ---------------------------------------------------------------- the course's words (docs/glossary/usage.tsv)

USAGE = ROOT / "docs" / "glossary" / "usage.tsv"


@dataclass(frozen=True)
class Usage:
    """One glossary row of the translation's usage: the word the text uses and those it must not."""

    english: str
    chinese: str
    rejected: tuple[str, ...]
    fix: bool          # each rejected word can be replaced by ``chinese`` mechanically (``fix``)
    note: str


def read_usage(path: Path = USAGE) -> list[Usage]:
    """The rows of ``path`` (English, 中文, rejected names separated by "；", yes/no, note)."""
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 5 or fields[3] not in ("yes", "no") or not fields[1] or not fields[2]:
            raise SystemExit(f"{path}:{number}: expected English<TAB>中文<TAB>rejected names (；-separated)"
                             f"<TAB>yes|no (fixable)<TAB>note, got {line!r}")
        rejected = tuple(fields[2].split("；"))
        if any(not w.split("=")[0] for w in rejected):
            raise SystemExit(f"{path}:{number}: an empty rejected name in {fields[2]!r}")
        rows.append(Usage(fields[0], fields[1], rejected, fields[3] == "yes", fields[4]))
    return rows


def _split(word: str, row: "Usage") -> tuple[str, str]:
    """A rejected name and what replaces it: ``分数张量=评分张量``, or the row's 中文."""
    wrong, _, right = word.partition("=")
    return wrong, right or row.chinese


_PROTECTED = re.compile(r"(`+).+?\1|\]\([^)\s]+\)|https?://[^\s)>]+|</?[A-Za-z][\w-]*(\s[^<>\n]*)?/?>", re.S)


def _outside_code(text: str, change) -> str:
    """``change`` applied to the prose of ``text`` only: inline code, link targets, URLs and
    HTML tags are kept as they are."""
    out, last = [], 0
    for m in _PROTECTED.finditer(text):
        out.append(change(text[last:m.start()]))
        out.append(m.group(0))
        last = m.end()
    out.append(change(text[last:]))
    return "".join(out)


def _prose(text: str) -> str:
    return _PROTECTED.sub(" ", text)


_PERCENT = re.compile(r"(\d[\d.,]*) +%")
_ENGLISH_NOTEBOOK = re.compile(r"(?<![\w/.-])[Nn]otebooks?(?![\w/.-])")


def usage_problems(msgid: str, msgstr: str, usage: list[Usage] | None = None) -> list[str]:
    """Words of a translation that the glossary rejects (docs/glossary/usage.tsv), a bare English
    "notebook", and "96.6 %" (Chinese text writes 96.6%)."""
    usage = read_usage() if usage is None else usage
    prose, english = _prose(msgstr), _prose(msgid)
    out = []
    for row in usage:
        for word, right in (_split(w, row) for w in row.rejected):
            if not re.search(r"[\u3400-\u9fff]", word):
                continue                   # an English word: the rule below
            if word in prose and word not in english:
                out.append(f"usage: {word!r} is not the course's word for {row.english!r}: write {right!r} "
                           f"(docs/glossary/usage.tsv{'; `scripts/i18n.py fix` does it' if row.fix else ''})")
    if _ENGLISH_NOTEBOOK.search(prose):
        out.append("usage: 'notebook' left in English: write '笔记本' (a laptop is '笔记本电脑')")
    for m in _PERCENT.finditer(prose):
        out.append(f"usage: {m.group(0)!r}: no space before % in Chinese text (`scripts/i18n.py fix` does it)")
    return out


def fix_text(text: str, usage: list[Usage] | None = None) -> str:
    """The mechanical fixes of ``usage_problems``: fixable rejected words -> the course's word,
    "96.6 %" -> "96.6%" (prose only; code, links and URLs untouched)."""
    usage = read_usage() if usage is None else usage
    pairs = sorted((_split(w, r) for r in usage if r.fix for w in r.rejected if re.search(r"[\u3400-\u9fff]", w)),
                   key=lambda p: -len(p[0]))

    def change(part: str) -> str:
        for word, right in pairs:
            part = part.replace(word, right)
        return _PERCENT.sub(r"\1%", part)

    return _outside_code(text, change)


# ---------------------------------------------------------------- generated editions (zh_TW from zh_CN)


class Converter:
    """Simplified -> Traditional (Taiwan) for one generated edition: OpenCC's ``s2twp`` after
    the edition's reviewed overrides (``i18n/<lang>/overrides.tsv``: simplified<TAB>traditional
    <TAB>protect|term<TAB>why), longest first. Inline code, link targets and URLs are kept."""

    def __init__(self, ed: Edition, root: Path = ROOT) -> None:
        try:
            import opencc
        except ImportError:
            raise SystemExit("the zh-TW edition is generated with OpenCC: install it with "
                             "`.venv/bin/pip install -e .[dev]` (the opencc package)") from None
        self.edition = ed
        self.overrides_path = root / "i18n" / ed.lang / "overrides.tsv"
        self.overrides = read_overrides(self.overrides_path)
        self._cc = opencc.OpenCC("s2twp")

    def _convert_prose(self, text: str) -> str:
        kept: list[str] = []

        def hold(target: str) -> str:
            kept.append(target)
            return chr(0xF0000 + len(kept) - 1)    # a private-use character: OpenCC leaves it alone

        for simplified, traditional in self.overrides:
            if simplified in text:
                text = text.replace(simplified, hold(traditional))
        text = self._cc.convert(text)
        return re.sub("[\U000F0000-\U000FFFFD]", lambda m: kept[ord(m.group(0)) - 0xF0000], text)

    def __call__(self, text: str) -> str:
        return _outside_code(text, self._convert_prose) if text else text


def read_overrides(path: Path) -> list[tuple[str, str]]:
    pairs = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != 4 or fields[2] not in ("protect", "term") or not fields[0] or not fields[1]:
            raise SystemExit(f"{path}:{number}: expected simplified<TAB>traditional<TAB>protect|term<TAB>why, "
                             f"got {line!r}")
        pairs.append((fields[0], fields[1]))
    return sorted(pairs, key=lambda p: -len(p[0]))


GENERATED_NOTE = ("Generated by `scripts/i18n.py convert` from {source} (OpenCC s2twp and "
                  "i18n/{lang}/overrides.tsv): do not edit; change the zh_CN catalogue or the overrides.")


def grader_catalogues(ed: Edition, root: Path = ROOT) -> tuple[Path, Path]:
    """The grader's message catalogue of a generated edition and the one it is converted from."""
    where = root / "course_grader" / "locale"
    assert ed.source, f"{ed.lang} is translated by hand, not generated"
    return where / ed.lang / "LC_MESSAGES" / "course_grader.po", where / ed.source / "LC_MESSAGES" / "course_grader.po"


def converted_po(source: Path, lang: str, convert: Converter, note: str) -> str:
    """A PO catalogue with every msgstr converted (obsolete entries dropped)."""
    po = load_catalogue(source)
    out = _new_catalogue(lang)
    out.metadata.update({k: v for k, v in po.metadata.items() if k not in ("Language",)})
    out.metadata["Language"] = lang
    out.header = note
    for e in po:
        if e.obsolete:
            continue
        out.append(polib.POEntry(msgid=e.msgid, msgstr=convert(e.msgstr), occurrences=e.occurrences,
                                 comment=e.comment, tcomment=e.tcomment, flags=list(e.flags),
                                 previous_msgid=e.previous_msgid))
    return catalogue_text(out)


def converted_grader(ed: Edition, convert: Converter, root: Path = ROOT) -> str:
    target, source = grader_catalogues(ed, root)
    return converted_po(source, ed.lang, convert, GENERATED_NOTE.format(
        source=source.relative_to(root).as_posix(), lang=ed.lang))


def converted(doc: Document, convert: Converter, root: Path = ROOT) -> str:
    """The catalogue text of a generated edition's ``doc``: its source edition's catalogue, converted."""
    assert doc.edition.source, f"{doc.edition.lang} is translated by hand, not generated"
    src_ed = EDITIONS[doc.edition.source]
    src = next(d for d in documents(root, src_ed) if d.english == doc.english)
    po = load_catalogue(src.catalogue)
    out = _new_catalogue(doc.edition.lang)
    out.header = GENERATED_NOTE.format(source=src.catalogue.relative_to(root).as_posix(), lang=doc.edition.lang)
    for e in po:
        if e.obsolete:
            continue
        out.append(polib.POEntry(msgid=e.msgid, msgstr=convert(e.msgstr), occurrences=e.occurrences,
                                 comment=e.comment, flags=list(e.flags), previous_msgid=e.previous_msgid))
    return catalogue_text(out)


def lint_entry(msgid: str, msgstr: str, convert=None, usage: list[Usage] | None = None) -> list[str]:
    """How a translation differs from its English in what must not be translated, the Chinese
    names the English glosses its terms with that the translation does not use (through
    ``convert`` for a generated edition), and, for a hand-translated edition, the words the
    glossary rejects (``usage_problems``)."""
    if not msgstr:
        return []
    want, got = _spans(msgid), _spans(msgstr)
    flat = re.sub(r"\s+", "", msgstr)
    out = [f"term {t!r} (the English's gloss, the glossary's name) not in the translation"
           for t in dict.fromkeys(convert(g) if convert else g for g in glossed_terms(msgid))
           if re.sub(r"\s+", "", t) not in flat]
    for kind in want:
        lost = want[kind] - got[kind]
        added = got[kind] - want[kind]
        if lost or added:
            parts = []
            if lost:
                parts.append("missing " + ", ".join(repr(x) for x in list(lost.elements())[:3]))
            if added:
                parts.append("not in the English " + ", ".join(repr(x) for x in list(added.elements())[:3]))
            out.append(f"{kind} changed ({'; '.join(parts)})")
    if convert is None:
        out.extend(usage_problems(msgid, msgstr, usage))
        out.extend(f"math: English label {t!r} in a formula: translate the \\text{{}} (prose, not a name)"
                   for t in english_in_math(msgstr))
    return out


def lint(doc: Document, convert=None) -> list[str]:
    out = []
    if doc.edition.source and convert is None:
        convert = Converter(doc.edition)
    usage = None if doc.edition.source else read_usage()
    for e in load_catalogue(doc.catalogue):
        if e.obsolete:
            continue
        for why in lint_entry(e.msgid, e.msgstr, convert, usage):
            cells = ", ".join(f"cell {c}" for _, c in e.occurrences)
            out.append(f"{doc.catalogue.relative_to(ROOT).as_posix() if doc.catalogue.is_relative_to(ROOT) else doc.catalogue}"
                       f" {cells}: {why}")
    return out


def export_cells(doc: Document, folder: Path) -> list[Path]:
    """Write each unfinished entry's English as folder/cellN.en.md (N: its first cell, from 1).

    A translator writes folder/cellN.zh.md beside it (plain Markdown: no PO escaping) and runs
    ``import``."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for e in load_catalogue(doc.catalogue):
        if e.obsolete or (e.msgstr and "fuzzy" not in e.flags):
            continue
        cell = f"cell{e.occurrences[0][1]}"
        path = folder / f"{cell}.en.md"
        note = ""
        if "fuzzy" in e.flags and e.previous_msgid:
            (folder / f"{cell}.old-en.md").write_text(e.previous_msgid, encoding="utf-8")
            (folder / f"{cell}.old-zh.md").write_text(e.msgstr, encoding="utf-8")
            note = " (fuzzy: .old-en.md / .old-zh.md hold the previous English and translation)"
        path.write_text(e.msgid, encoding="utf-8")
        written.append(path)
        print(f"{path}{note}")
    return written


def import_cells(doc: Document, folder: Path) -> int:
    """Take folder/cellN.zh.md as the translation of the entry first seen in cell N; clears fuzzy."""
    po = load_catalogue(doc.catalogue)
    by_cell = {f"cell{e.occurrences[0][1]}": e for e in po if not e.obsolete and e.occurrences}
    n = 0
    for path in sorted(folder.glob("cell*.zh.md")):
        cell = path.name[: -len(".zh.md")]
        e = by_cell.get(cell)
        if e is None:
            raise SystemExit(f"{path}: no entry of {doc.catalogue.name} starts at {cell}; export again")
        text = path.read_text(encoding="utf-8").rstrip("\n")
        if e.msgid.endswith("\n"):
            text += "\n"
        if not text.strip():
            raise SystemExit(f"{path}: empty translation")
        e.msgstr = text
        if "fuzzy" in e.flags:
            e.flags.remove("fuzzy")
        e.previous_msgid = None
        n += 1
    doc.catalogue.write_text(catalogue_text(po), encoding="utf-8")
    return n


def differences(english: dict, chinese: dict) -> list[str]:
    """Where a Chinese notebook is not its English one with only markdown text translated."""
    out = []
    ec, zc = english["cells"], chinese["cells"]
    if len(ec) != len(zc):
        return [f"{len(zc)} cells against the English {len(ec)}"]
    for i, (e, z) in enumerate(zip(ec, zc), start=1):
        if e["cell_type"] != z["cell_type"] or e.get("id") != z.get("id"):
            out.append(f"cell {i}: type or id differs ({z['cell_type']} {z.get('id')} against {e['cell_type']} {e.get('id')})")
        elif e["cell_type"] == "markdown":
            if {k: v for k, v in e.items() if k != "source"} != {k: v for k, v in z.items() if k != "source"}:
                out.append(f"cell {i}: markdown cell differs in more than its text")
        elif json.dumps(e, sort_keys=True) != json.dumps(z, sort_keys=True):
            out.append(f"cell {i}: {e['cell_type']} cell differs from the English (code and outputs are copied, never translated)")
    extra = {k for k in chinese.get("metadata", {}) if k not in english.get("metadata", {})} - {"language", "course"}
    if extra:
        out.append(f"metadata keys not in the English: {sorted(extra)}")
    for k, v in english.get("metadata", {}).items():
        if chinese.get("metadata", {}).get(k) != v:
            out.append(f"metadata {k!r} differs from the English")
    for k in ("nbformat", "nbformat_minor"):
        if english.get(k) != chinese.get(k):
            out.append(f"{k} differs from the English")
    return out


def check(root: Path = ROOT, editions: list[Edition] | None = None) -> list[str]:
    """Everything that keeps main from being in step: stale catalogues, unfinished entries, stale builds,
    and a generated edition's catalogues that are not what ``convert`` makes of their source's."""
    out: list[str] = []
    # a generated edition is checked where it has been set up (its overrides exist); the repository's
    # tests require every edition's catalogues
    for ed in editions or [e for e in EDITIONS.values() if not e.source or (root / "i18n" / e.lang).is_dir()]:
        convert = Converter(ed, root) if ed.source else None
        if convert is not None:
            target, source = grader_catalogues(ed, root)
            if source.exists() and (not target.exists()
                                    or target.read_text(encoding="utf-8") != converted_grader(ed, convert, root)):
                out.append(f"{target.relative_to(root).as_posix()}: not what `scripts/i18n.py convert` makes of "
                           f"{source.relative_to(root).as_posix()}; run it")
        for doc in documents(root, ed):
            rel = doc.catalogue.relative_to(root).as_posix()
            if not doc.catalogue.exists():
                out.append(f"{rel}: missing; run `scripts/i18n.py {'convert' if ed.source else 'update'}`")
                continue
            if convert is not None:
                if converted(doc, convert, root) != doc.catalogue.read_text(encoding="utf-8"):
                    out.append(f"{rel}: not what `scripts/i18n.py convert` makes of the {ed.source} catalogue "
                               "(never edit it by hand: change the zh_CN catalogue or the overrides)")
            elif updated(doc, root) != doc.catalogue.read_text(encoding="utf-8"):
                out.append(f"{rel}: out of step with {doc.english.relative_to(root).as_posix()}; run `scripts/i18n.py update`")
            po = load_catalogue(doc.catalogue)
            out.extend(problems_in(merge(po, template(doc.english, root)), rel))
            out.extend(lint(doc, convert))
            try:
                want = notebook_text(build(doc, root=root))
            except ValueError:
                continue   # already reported as untranslated / fuzzy
            if doc.output.exists():
                out.extend(f"{doc.output.relative_to(root).as_posix()}: {d}"
                           for d in differences(read_notebook(doc.english), read_notebook(doc.output)))
            if not doc.output.exists() or doc.output.read_text(encoding="utf-8") != want:
                out.append(f"{doc.output.relative_to(root).as_posix()}: differs from what {rel} builds; "
                           "run `scripts/i18n.py build`")
    return out


# ---------------------------------------------------------------- the READMEs

README_EN = "README.md"
README_ZH = {"zh_CN": "README.zh-CN.md", "zh_TW": "README.zh-TW.md"}
#: translated documents under drift detection: name -> (English, translation, partial: only some
#: sections translated). Each has a zh-TW twin made by ``convert`` (README.zh-TW.md, docs/GRADING.zh-TW.md).
TRANSLATED_DOCS = {"README.zh-CN.md": ("README.md", "README.zh-CN.md", False),
                   "docs/GRADING.zh-CN.md": ("docs/GRADING.md", "docs/GRADING.zh-CN.md", True)}
_README_HEADING = re.compile(r"^(#{2,3}) (.+)$", re.M)
_README_MARK = re.compile(r"<!-- en: (.+?) ([0-9a-f]{12}) -->")
#: README.zh-CN.md -> README.zh-TW.md, after OpenCC: what names the edition (its folder, its
#: language tag, its language pack, the other README).
README_TW_REPLACE = [
    ("[English](README.md) | 简体中文", "[English](README.md) | [简体中文](README.zh-CN.md) | 正體中文"),
    ("[English](README.md) | 簡體中文", "[English](README.md) | [简体中文](README.zh-CN.md) | 正體中文"),
    ("COURSE_LANGUAGE=zh-CN", "COURSE_LANGUAGE=zh-TW"), ("--language zh-CN", "--language zh-TW"),
    ("jupyterlab-language-pack-zh-CN", "jupyterlab-language-pack-zh-TW"), ("`zh-CN`", "`zh-TW`"),
    ("i18n/zh_CN/", "i18n/zh_TW/"), ("locale/zh_CN/", "locale/zh_TW/"),
    ("正體中文版（臺灣、香港）見 [README.zh-TW.md](README.zh-TW.md)。\n", ""),
    ("選擇簡體中文", "選擇正體中文（zh_TW）"), ("簡體中文版", "正體中文版"),
    ("docs/GRADING.zh-CN.md", "docs/GRADING.zh-TW.md"),
    ("（元資料中的語言為 `zh-TW`）", "（元資料中的語言為 `zh-TW`、`zh-HK` 或 `zh-Hant`）"),
]


def readme_sections(text: str) -> dict[str, str]:
    """The README's sections by heading (``## Quick start``; ``(top)`` for the text before the first),
    each from its heading to the next ``##`` or ``###`` heading."""
    out, heads = {}, list(_README_HEADING.finditer(text))
    out["(top)"] = text[: heads[0].start()] if heads else text
    for k, m in enumerate(heads):
        end = heads[k + 1].start() if k + 1 < len(heads) else len(text)
        out[m.group(0).strip()] = text[m.start():end]
    return out


def section_hash(text: str) -> str:
    import hashlib

    return hashlib.sha256(re.sub(r"\s+", " ", text).strip().encode("utf-8")).hexdigest()[:12]


def readme_problems(english: str, chinese: str, name: str = "README.zh-CN.md", partial: bool = False) -> list[str]:
    """Where a translated README is behind the English one: an English section it does not name
    (``<!-- en: ## Heading HASH -->`` beside the Chinese section), a section named twice or no
    longer in the English, and a section whose English changed since it was translated (the hash)."""
    sections = readme_sections(english)
    marks = [(m.group(1), m.group(2)) for m in _README_MARK.finditer(chinese)]
    out = []
    seen = collections.Counter(h for h, _ in marks)
    for heading, digest in marks:
        if heading not in sections:
            out.append(f"{name}: names {heading!r}, which README.md no longer has")
        elif seen[heading] > 1:
            out.append(f"{name}: names {heading!r} {seen[heading]} times")
        elif section_hash(sections[heading]) != digest:
            out.append(f"{name}: the English of {heading!r} changed since it was translated: update the "
                       f"translation, then `scripts/i18n.py readme --stamp {heading!r}`")
    for heading in sections if not partial else ():
        if heading not in seen:
            out.append(f"{name}: README.md's section {heading!r} is not translated (no <!-- en: {heading} ... --> mark)")
    return out


def stamp_readme(english: str, chinese: str, heading: str) -> str:
    """``chinese`` with the mark of ``heading`` carrying the English section's current hash."""
    sections = readme_sections(english)
    if heading not in sections:
        raise SystemExit(f"README.md has no section {heading!r}; sections: " + ", ".join(sections))
    new, n = _README_MARK.subn(lambda m: f"<!-- en: {heading} {section_hash(sections[heading])} -->"
                               if m.group(1) == heading else m.group(0), chinese)
    if not any(m.group(1) == heading for m in _README_MARK.finditer(chinese)):
        raise SystemExit(f"README.zh-CN.md has no <!-- en: {heading} ... --> mark: put one after the heading "
                         "of the section that translates it")
    return new


_LINK_OR_URL = re.compile(r"\]\([^)\s]+\)|https?://[^\s)>]+")


def convert_markdown(text: str, convert: Converter) -> str:
    """A document (a README) converted whole, its code too (OpenCC changes only Chinese characters,
    so commands and names stay; a Chinese placeholder such as ``<作业>`` is converted): only link
    targets and URLs are kept."""
    out, last = [], 0
    for m in _LINK_OR_URL.finditer(text):
        out.append(convert._convert_prose(text[last:m.start()]))
        out.append(m.group(0))
        last = m.end()
    out.append(convert._convert_prose(text[last:]))
    return "".join(out)


def doc_zh_tw(chinese: str, convert: Converter) -> str:
    """A translated document's zh-TW twin (docs/GRADING.zh-TW.md): converted, the edition's paths."""
    text = convert_markdown(chinese, convert)
    text = re.sub(r"(?<![\w./-])zh/(?=(notebooks|exercises|solutions)\b|`)", "zh-TW/", text)
    for old, new in README_TW_REPLACE:
        text = text.replace(old, new)
    return text.replace("[English](GRADING.md) | 簡體中文", "[English](GRADING.md) | [简体中文](GRADING.zh-CN.md) | 正體中文")


def readme_zh_tw(chinese: str, convert: Converter, regional: str) -> str:
    """README.zh-TW.md: README.zh-CN.md converted (OpenCC + overrides), its paths and tags those of
    the zh-TW edition, and the note on regional terms (``i18n/zh_TW/README.regional.md``) in place of
    the ``<!-- zh-TW: regional -->`` mark."""
    text = convert_markdown(chinese, convert)
    text = re.sub(r"(?<![\w./-])zh/(?=(notebooks|exercises|solutions)\b|`)", "zh-TW/", text)
    for old, new in README_TW_REPLACE:
        text = text.replace(old, new)
    if "<!-- zh-TW: regional -->" not in text:
        raise SystemExit("README.zh-CN.md has no <!-- zh-TW: regional --> mark (where README.zh-TW.md says "
                         "which regional terms it uses)")
    return text.replace("<!-- zh-TW: regional -->", regional.strip())


def _selected(names: list[str], ed: Edition = ZH_CN) -> list[Document]:
    docs = documents(ROOT, ed)
    if not names:
        return docs
    def exact(d: Document, n: str) -> bool:
        rel = d.english.relative_to(ROOT).as_posix()
        return n in (rel, d.english.stem, d.english.parent.name) or rel.startswith(n.rstrip("/") + "/")

    picked = [d for d in docs if any(exact(d, n) for n in names)]
    picked = picked or [d for d in docs if any(n in d.english.relative_to(ROOT).as_posix() for n in names)]
    if not picked:
        raise SystemExit(f"no English notebook matches {names}; names are like 03_scoring or lesson03_scoring")
    return picked


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    for name, help_ in (("update", "merge the English notebooks into their catalogues (msgmerge)"),
                        ("status", "count translated, fuzzy and untranslated entries"),
                        ("build", "write the Chinese notebooks under zh/ and zh-TW/"),
                        ("check", "exit 1 if the Chinese edition is not in step"),
                        ("lint", "translations that changed math, inline code, link targets or headings"),
                        ("fix", "the glossary's mechanical fixes in the zh_CN catalogues (rejected words, '96.6 %%')"),
                        ("convert", "write the generated editions' catalogues (zh_TW from zh_CN) and README.zh-TW.md"),
                        ("readme", "the translated READMEs' sections whose English changed (--stamp HEADING: translated)")):
        s = sub.add_parser(name, help=help_)
        s.add_argument("names", nargs="*", help="notebooks to work on (a part of the path; default: all)")
        s.add_argument("--edition", help="one edition (zh_CN, zh_TW, zh-TW ...; default: every edition the "
                                         "command applies to)")
        if name == "readme":
            s.add_argument("--doc", choices=sorted(TRANSLATED_DOCS), default="README.zh-CN.md",
                           help="which translated document (default README.zh-CN.md)")
            s.add_argument("--stamp", metavar="HEADING", help="record that README.zh-CN.md's section for this English "
                                                              "heading (e.g. '## Quick start') is translated")
        if name == "build":
            s.add_argument("--allow-incomplete", action="store_true",
                           help="keep the English of untranslated or fuzzy cells (a preview; never commit it)")
    for name, help_ in (("export", "write the unfinished entries' English as DIR/cellN.en.md"),
                        ("import", "read DIR/cellN.zh.md into the catalogue (clears fuzzy)")):
        s = sub.add_parser(name, help=help_)
        s.add_argument("name", help="one notebook (a part of its path, e.g. 03_scoring or lesson03)")
        s.add_argument("folder", type=Path)
    args = p.parse_args(argv)
    chosen = [edition(args.edition)] if getattr(args, "edition", None) else list(EDITIONS.values())
    hand = [e for e in chosen if not e.source]
    generated = [e for e in chosen if e.source]

    if args.command in ("export", "import"):
        matches = _selected([args.name])
        if len(matches) != 1:
            raise SystemExit(f"{args.name!r} matches several notebooks: " + ", ".join(d.english.name for d in matches))
        doc = matches[0]
        if args.command == "export":
            export_cells(doc, args.folder)
        else:
            print(f"{import_cells(doc, args.folder)} translation(s) into {doc.catalogue.relative_to(ROOT)}")
            for line in lint(doc):
                print(line)
        return 0
    if args.command == "lint":
        found = [line for ed in chosen for doc in _selected(args.names, ed) for line in lint(doc)]
        for line in found:
            print(line)
        return 1 if found else 0
    if args.command == "fix":
        usage = read_usage()
        for ed in hand:
            for doc in _selected(args.names, ed):
                po = load_catalogue(doc.catalogue)
                n = 0
                for e in po:
                    if e.msgstr and not e.obsolete:
                        new = fix_text(e.msgstr, usage)
                        n += new != e.msgstr
                        e.msgstr = new
                if n:
                    doc.catalogue.write_text(catalogue_text(po), encoding="utf-8")
                    print(f"{doc.catalogue.relative_to(ROOT)}: {n} entr{'y' if n == 1 else 'ies'} fixed")
        print("then: `scripts/i18n.py convert` and `scripts/i18n.py build`")
        return 0
    if args.command == "readme":
        english_path, zh_path, partial = TRANSLATED_DOCS[args.doc]
        english = (ROOT / english_path).read_text(encoding="utf-8")
        zh = ROOT / zh_path
        if args.stamp:
            zh.write_text(stamp_readme(english, zh.read_text(encoding="utf-8"), args.stamp), encoding="utf-8")
            print(f"{zh.name}: {args.stamp!r} stamped; then `scripts/i18n.py convert` for README.zh-TW.md")
            return 0
        found = readme_problems(english, zh.read_text(encoding="utf-8"), zh.name, partial)
        for line in found:
            print(line)
        return 1 if found else 0
    if args.command == "convert":
        for ed in generated:
            convert = Converter(ed)
            if ed.lang == "zh_TW" and not args.names:
                text = readme_zh_tw((ROOT / README_ZH["zh_CN"]).read_text(encoding="utf-8"), convert,
                                    (ROOT / "i18n" / ed.lang / "README.regional.md").read_text(encoding="utf-8"))
                target = ROOT / README_ZH[ed.lang]
                if not target.exists() or target.read_text(encoding="utf-8") != text:
                    target.write_text(text, encoding="utf-8")
                    print(f"converted {target.name}")
                text = doc_zh_tw((ROOT / "docs" / "GRADING.zh-CN.md").read_text(encoding="utf-8"), convert)
                target = ROOT / "docs" / "GRADING.zh-TW.md"
                if not target.exists() or target.read_text(encoding="utf-8") != text:
                    target.write_text(text, encoding="utf-8")
                    print(f"converted {target.relative_to(ROOT)}")
            target, _source = grader_catalogues(ed)
            text = converted_grader(ed, convert)
            if not args.names and (not target.exists() or target.read_text(encoding="utf-8") != text):
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
                print(f"converted {target.relative_to(ROOT)}")
            for doc in _selected(args.names, ed):
                text = converted(doc, convert)
                doc.catalogue.parent.mkdir(parents=True, exist_ok=True)
                if not doc.catalogue.exists() or doc.catalogue.read_text(encoding="utf-8") != text:
                    doc.catalogue.write_text(text, encoding="utf-8")
                    print(f"converted {doc.catalogue.relative_to(ROOT)}")
        return 0

    if args.command == "check":
        found = check(editions=chosen)
        for line in found:
            print(line)
        print("the Chinese editions are in step" if not found else f"{len(found)} problem(s)")
        return 1 if found else 0
    failed = 0
    todo = [d for ed in (hand if args.command == "update" else chosen) for d in _selected(args.names, ed)]
    for doc in todo:
        if args.command == "update":
            text = updated(doc)
            doc.catalogue.parent.mkdir(parents=True, exist_ok=True)
            old = doc.catalogue.read_text(encoding="utf-8") if doc.catalogue.exists() else None
            if text != old:
                doc.catalogue.write_text(text, encoding="utf-8")
                print(f"updated {doc.catalogue.relative_to(ROOT)}")
        elif args.command == "status":
            po = load_catalogue(doc.catalogue)
            active = [e for e in po if not e.obsolete]
            fuzzy = sum("fuzzy" in e.flags for e in active)
            empty = sum(not e.msgstr for e in active)
            print(f"{doc.catalogue.relative_to(ROOT)}: {len(active) - fuzzy - empty} translated, "
                  f"{fuzzy} fuzzy, {empty} untranslated")
        else:
            try:
                nb = build(doc, allow_incomplete=args.allow_incomplete)
            except ValueError as exc:
                print(exc, file=sys.stderr)
                failed += 1
                continue
            doc.output.parent.mkdir(parents=True, exist_ok=True)
            text = notebook_text(nb)
            if not doc.output.exists() or doc.output.read_text(encoding="utf-8") != text:
                doc.output.write_text(text, encoding="utf-8")
                print(f"built {doc.output.relative_to(ROOT)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
