"""One guard per place where learner bytes leave the grader (issue 29).

Every string a learner controls (an id taken from a folder name, a message of an exception
raised by learner code, a notebook's cells and outputs) reaches a *sink* only through the
function of that sink, here:

=====================  =========================  ==========================================
sink                   guard                      what it neutralises
=====================  =========================  ==========================================
terminal               :func:`terminal`,          ESC/CSI/OSC sequences (OSC 52 clipboard
                       :func:`terminal_block`     writes, cursor movement, erase), CR, BS,
                                                  C1 controls, bidi overrides, lone surrogates
CSV                    :func:`csv_cell`           spreadsheet formulas, line breaks
HTML                   :func:`html_text`          markup (``<``, ``>``, ``&``, quotes)
notebooks written for  :func:`formgrader_notebook`  markdown HTML and links, active outputs
nbgrader/Formgrader                               (HTML, JavaScript, SVG, widgets,
                                                  markdown/LaTeX outputs), attachments,
                                                  widget state and other metadata
=====================  =========================  ==========================================

File names made from learner ids are :func:`course_grader.gradebook.safe_name`; the ids
themselves are validated once, when the submissions are discovered
(:func:`course_grader.cli.find_submissions`), and never transformed afterwards.
docs/GRADING.md ("Threat model: where learner bytes go") lists the sinks and their tests.
"""

from __future__ import annotations

import html
import re
import unicodedata
from typing import Any

__all__ = ["terminal", "terminal_block", "csv_cell", "html_text", "formgrader_notebook",
           "FORMGRADER_OUTPUT_TYPES", "answer_text", "MAX_ANSWER"]


# -- terminal ----------------------------------------------------------------------------------

def _visible(ch: str) -> str:
    """A control or format character as visible text: ``\\x1b``, ``\\u202e``; a byte that was
    not UTF-8 (decoded with ``surrogateescape``: U+DC80..U+DCFF) as the byte, ``\\xe9``."""
    code = ord(ch)
    if 0xDC80 <= code <= 0xDCFF:
        return f"\\x{code - 0xDC00:02x}"
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


#: Unicode categories never written raw to a terminal: controls (C0, DEL, C1 - ``\\x9b`` is a
#: one-byte CSI), format characters (bidi overrides and isolates, zero-width characters),
#: surrogates, private use, unassigned code points, line and paragraph separators.
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def _needs_escape(ch: str) -> bool:
    return unicodedata.category(ch) in _HIDDEN_CATEGORIES


def terminal(value: Any) -> str:
    """One line of learner-controlled text made safe to print on a terminal: every control,
    format, surrogate, private-use or unassigned character (ESC, CR, LF, TAB, BS, bidi
    overrides, ...) is shown as an escape (``\\x1b``), so no escape sequence reaches the
    terminal and nothing can forge or hide a line."""
    text = value if type(value) is str else str(value)
    if text.isprintable() and text.isascii():
        return text
    return "".join(_visible(ch) if _needs_escape(ch) else ch for ch in text)


def terminal_block(value: Any) -> str:
    """Several lines for a terminal (a report): like :func:`terminal` on each line, the line
    breaks (``\\n``) kept."""
    text = value if type(value) is str else str(value)
    return "\n".join(terminal(line) for line in text.split("\n"))


# -- a written answer, as course-grade records it ---------------------------------------------

#: The most characters of a learner's written answer that course-grade records (grades.json);
#: the teacher reads the whole answer in Formgrader's copy of the notebook.
MAX_ANSWER = 20_000


def answer_text(value: Any) -> str:
    """A learner's written answer (a markdown cell's text) as ``grades.json`` records it: at most
    :data:`MAX_ANSWER` characters (a longer answer is cut and says how much is left out), every
    control or format character but line breaks and tabs shown as an escape (``\\x1b``), like
    :func:`terminal`. Not a sink's guard: each sink still applies its own (HTML, CSV, terminal)."""
    text = value if type(value) is str else ""
    extra = len(text) - MAX_ANSWER
    text = text[:MAX_ANSWER].replace("\r\n", "\n")
    text = "".join(_visible(ch) if ch not in "\n\t" and _needs_escape(ch) else ch for ch in text)
    if extra > 0:
        text += f"\n[... {extra} more characters not recorded]"
    return text


# -- CSV ---------------------------------------------------------------------------------------

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")


def csv_cell(value: object) -> str:
    """A text cell made inert for spreadsheets (OWASP CSV injection): a value starting with
    ``= + - @``, a tab or a carriage return (or their full-width forms) gets a leading ``'``,
    and line breaks are written as ``\\r`` / ``\\n`` (one row per learner in every program).
    Numbers written by the grader itself are not passed through here."""
    text = str(value)
    text = "'" + text if text.startswith(_FORMULA_START) else text
    return text.replace("\r", "\\r").replace("\n", "\\n")


# -- HTML --------------------------------------------------------------------------------------

def html_text(value: object) -> str:
    """Text for an HTML page (element content or a quoted attribute value)."""
    return html.escape(str(value), quote=True)


# -- notebooks written for nbgrader's Formgrader -----------------------------------------------

#: Output types kept in a notebook written for Formgrader, and the data kept in each.
FORMGRADER_OUTPUT_TYPES = ("stream", "error", "execute_result", "display_data")
#: MIME types of display data kept (rendered as escaped text or as an ``<img>`` of base64 data).
_KEPT_MIME = ("text/plain", "image/png", "image/jpeg")
_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]*")
_GRADE_ID = re.compile(r"[A-Za-z0-9_.\-]{1,200}")
_NBGRADER_BOOLS = ("grade", "solution", "locked", "task")


def _text(value: Any, limit: int = 1_000_000) -> str:
    if isinstance(value, list):
        value = "".join(v for v in value if isinstance(v, str))
    return value[:limit] if isinstance(value, str) else ""


def _fenced(source: str) -> str:
    """Markdown that shows ``source`` as literal text: a fenced code block whose fence is
    longer than any run of backticks in it, so no line of ``source`` can close it (nothing
    inside is rendered: no HTML, no links, no images)."""
    longest = max((len(m) for m in re.findall(r"`+", source)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{source}\n{fence}"


def _nbgrader_meta(meta: Any) -> dict | None:
    """The cell's nbgrader metadata with plain values only (None when it is not usable)."""
    if not isinstance(meta, dict):
        return None
    grade_id = meta.get("grade_id")
    if not isinstance(grade_id, str) or not _GRADE_ID.fullmatch(grade_id):
        return None
    out: dict[str, Any] = {"grade_id": grade_id}
    for key in _NBGRADER_BOOLS:
        if isinstance(meta.get(key), bool):
            out[key] = meta[key]
    points = meta.get("points")
    if isinstance(points, (int, float)) and not isinstance(points, bool) and 0 <= points < 1e6:
        out["points"] = points
    if isinstance(meta.get("schema_version"), int) and not isinstance(meta["schema_version"], bool):
        out["schema_version"] = meta["schema_version"]
    checksum = meta.get("checksum")
    if isinstance(checksum, str) and re.fullmatch(r"[0-9a-f]{1,128}", checksum):
        out["checksum"] = checksum
    if meta.get("cell_type") in ("code", "markdown"):
        out["cell_type"] = meta["cell_type"]
    return out


def _output(out: Any) -> dict | None:
    if not isinstance(out, dict):
        return None
    kind = out.get("output_type")
    if kind == "stream":
        name = out.get("name") if out.get("name") in ("stdout", "stderr") else "stdout"
        return {"output_type": "stream", "name": name, "text": _text(out.get("text"))}
    if kind == "error":
        tb = out.get("traceback")
        return {"output_type": "error", "ename": _text(out.get("ename"), 200), "evalue": _text(out.get("evalue")),
                "traceback": [_text(line) for line in tb[:200]] if isinstance(tb, list) else []}
    if kind in ("execute_result", "display_data"):
        raw = out.get("data")
        data: dict = raw if isinstance(raw, dict) else {}
        kept: dict[str, str] = {}
        for mime in _KEPT_MIME:
            value = _text(data.get(mime))
            if mime.startswith("image/") and not _BASE64.fullmatch(value):
                continue  # anything but base64 could leave the <img> attribute it is written into
            if value:
                kept[mime] = value
        if not kept:
            dropped = ", ".join(sorted(str(k)[:40] for k in data)) or "nothing"
            kept["text/plain"] = f"[output not shown by course-grade: {dropped}]"
        new = {"output_type": kind, "data": kept, "metadata": {}}
        if kind == "execute_result":
            count = out.get("execution_count")
            new["execution_count"] = count if isinstance(count, int) and not isinstance(count, bool) else None
        return new
    return None


def formgrader_notebook(nb: Any) -> dict:
    """A learner's notebook made inert for nbgrader's Formgrader (and ``generate_feedback``),
    which render the ``autograded/`` copy as live HTML in the teacher's browser.

    * markdown cells: the source is shown as literal text (a fenced block), so raw HTML
      (``<img onerror>``, ``<script>``), ``javascript:`` links and images are never rendered;
      attachments are dropped;
    * raw cells: kept as raw text without a format (nbconvert renders no raw cell then);
    * code cells: the source (rendered as highlighted, escaped code) and outputs of the kinds
      that nbconvert shows as text - streams, errors, ``text/plain`` - and base64 PNG/JPEG
      images; HTML, JavaScript, SVG, markdown, LaTeX, widget and any other output is
      replaced by a line saying what was not shown;
    * metadata: only the cells' nbgrader metadata (plain values) and a fixed Python kernel;
      widget state and everything else is dropped.

    The input is not changed. Anything that is not a notebook gives an empty notebook.
    """
    cells_in = nb.get("cells") if isinstance(nb, dict) else None
    cells = []
    for cell in cells_in if isinstance(cells_in, list) else []:
        if not isinstance(cell, dict):
            continue
        kind = cell.get("cell_type")
        raw_meta = cell.get("metadata")
        meta_in: dict = raw_meta if isinstance(raw_meta, dict) else {}
        grader = _nbgrader_meta(meta_in.get("nbgrader"))
        meta = {"nbgrader": grader} if grader else {}
        source = _text(cell.get("source"))
        if kind == "code":
            outs = [o for o in map(_output, cell.get("outputs") or []) if o is not None] \
                if isinstance(cell.get("outputs"), list) else []
            count = cell.get("execution_count")
            cells.append({"cell_type": "code", "metadata": meta, "source": source, "outputs": outs,
                          "execution_count": count if isinstance(count, int) and not isinstance(count, bool)
                          else None})
        elif kind == "markdown":
            cells.append({"cell_type": "markdown", "metadata": meta, "source": _fenced(source) if source else ""})
        elif kind == "raw":
            cells.append({"cell_type": "raw", "metadata": meta, "source": source})
    for i, cell in enumerate(cells):
        cell["id"] = f"cell-{i}"
    return {"cells": cells, "nbformat": 4, "nbformat_minor": 5,
            "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
                         "language_info": {"name": "python"}}}
