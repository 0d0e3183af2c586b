"""The Chinese edition: gettext catalogues over the English notebooks, and the notebooks built from them.

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
    .venv/bin/python scripts/i18n.py lint [NAMES]    # translations that changed math, code, links or headings

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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from course_lessons import lesson_notebooks  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
LANG = "zh_CN"            # gettext's name for the language (catalogue folder, PO header)
LANG_TAG = "zh-CN"        # BCP 47, written into the built notebooks' metadata
FUZZY_MIN_RATIO = 0.5     # how alike an old English cell must be to lend its translation
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


def documents(root: Path = ROOT) -> list[Document]:
    """The lessons (notebooks/NN_*.ipynb, NNa_*.ipynb) and the assignment sources (solutions/<a>/*.ipynb)."""
    cat = root / "i18n" / LANG
    docs = [Document(p, cat / "notebooks" / f"{p.stem}.po", root / "zh" / "notebooks" / p.name)
            for p in lesson_notebooks(root / "notebooks")]
    for p in sorted((root / "solutions").glob("*/*.ipynb")):
        a = p.parent.name
        docs.append(Document(p, cat / "solutions" / a / f"{p.stem}.po", root / "zh" / "solutions" / a / p.name))
    return docs


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


def _new_catalogue() -> polib.POFile:
    po = polib.POFile(wrapwidth=0, encoding="utf-8")
    po.metadata = dict(HEADER)
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
        cell["source"] = _lines(e.msgstr)
    if missing and not allow_incomplete:
        raise ValueError(f"{doc.catalogue.relative_to(root) if doc.catalogue.is_relative_to(root) else doc.catalogue}: "
                         f"{len(missing)} markdown cell(s) without a finished translation ({', '.join(missing[:8])}"
                         f"{' ...' if len(missing) > 8 else ''}); run `scripts/i18n.py update`, translate, "
                         "then build (or pass --allow-incomplete for a preview)")
    meta = out.setdefault("metadata", {})
    meta["language"] = LANG_TAG
    meta["course"] = {
        "language": LANG_TAG,
        "translated_from": doc.english.relative_to(root).as_posix(),
        "catalogue": doc.catalogue.relative_to(root).as_posix(),
    }
    return out


_MATH = re.compile(r"\$\$.+?\$\$|(?<![\\$])\$(?!\$).+?(?<!\\)\$", re.S)
_CODE = re.compile(r"(`+)(.+?)\1", re.S)
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^(#{1,6})\s", re.M)


def _spans(text: str) -> dict[str, collections.Counter]:
    """What a translation must keep as it is: math, inline code, link targets, heading levels."""
    code = [m.group(0) for m in _CODE.finditer(text)]
    no_code = _CODE.sub(" ", text)
    return {
        "math": collections.Counter(re.sub(r"\s+", " ", m.group(0)) for m in _MATH.finditer(no_code)),
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


def lint_entry(msgid: str, msgstr: str) -> list[str]:
    """How a translation differs from its English in what must not be translated, and the
    Chinese names the English glosses its terms with that the translation does not use."""
    if not msgstr:
        return []
    want, got = _spans(msgid), _spans(msgstr)
    flat = re.sub(r"\s+", "", msgstr)
    out = [f"term {t!r} (the English's gloss, the glossary's name) not in the translation"
           for t in dict.fromkeys(glossed_terms(msgid)) if re.sub(r"\s+", "", t) not in flat]
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
    return out


def lint(doc: Document) -> list[str]:
    out = []
    for e in load_catalogue(doc.catalogue):
        if e.obsolete:
            continue
        for why in lint_entry(e.msgid, e.msgstr):
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


def check(root: Path = ROOT) -> list[str]:
    """Everything that keeps main from being in step: stale catalogues, unfinished entries, stale builds."""
    out: list[str] = []
    for doc in documents(root):
        rel = doc.catalogue.relative_to(root).as_posix()
        if not doc.catalogue.exists():
            out.append(f"{rel}: missing; run `scripts/i18n.py update`")
            continue
        if updated(doc, root) != doc.catalogue.read_text(encoding="utf-8"):
            out.append(f"{rel}: out of step with {doc.english.relative_to(root).as_posix()}; run `scripts/i18n.py update`")
        po = load_catalogue(doc.catalogue)
        out.extend(problems_in(merge(po, template(doc.english, root)), rel))
        out.extend(lint(doc))
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


def _selected(names: list[str]) -> list[Document]:
    docs = documents()
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
                        ("build", "write the Chinese notebooks under zh/"),
                        ("check", "exit 1 if the Chinese edition is not in step"),
                        ("lint", "translations that changed math, inline code, link targets or headings")):
        s = sub.add_parser(name, help=help_)
        s.add_argument("names", nargs="*", help="notebooks to work on (a part of the path; default: all)")
        if name == "build":
            s.add_argument("--allow-incomplete", action="store_true",
                           help="keep the English of untranslated or fuzzy cells (a preview; never commit it)")
    for name, help_ in (("export", "write the unfinished entries' English as DIR/cellN.en.md"),
                        ("import", "read DIR/cellN.zh.md into the catalogue (clears fuzzy)")):
        s = sub.add_parser(name, help=help_)
        s.add_argument("name", help="one notebook (a part of its path, e.g. 03_scoring or lesson03)")
        s.add_argument("folder", type=Path)
    args = p.parse_args(argv)

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
        found = [line for doc in _selected(args.names) for line in lint(doc)]
        for line in found:
            print(line)
        return 1 if found else 0

    if args.command == "check":
        found = check()
        for line in found:
            print(line)
        print("the Chinese edition is in step" if not found else f"{len(found)} problem(s)")
        return 1 if found else 0
    failed = 0
    for doc in _selected(args.names):
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
