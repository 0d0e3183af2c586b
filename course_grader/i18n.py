"""The grader's learner-facing messages in the learner's language (gettext, PO catalogues).

A notebook says its language in its metadata: ``metadata.course.language`` (written by the
Chinese edition's build, ``scripts/i18n.py``) or ``metadata.language``. The learner controls
that metadata (docs/GRADING.md, threat model), so it is only ever looked up in a fixed table
(:data:`LANGUAGES`): anything else - a value of another type, a long string, an unknown tag -
means English, and nothing from it reaches a file name, a path or a message.

Messages are marked in the code as ``_("...")`` with a literal English text (the msgid), and
formatted after translation with ``str.format`` (named fields only). The Chinese texts are
in ``course_grader/locale/zh_CN/LC_MESSAGES/course_grader.po`` (package data; the zh_TW one is
generated from it by ``scripts/i18n.py convert``), read with
polib when first needed; tests/test_grading_i18n.py fails when a marked message has no
Chinese entry, when an entry is fuzzy or no longer used, or when the fields of a translation
differ from its English. Only learner-facing text is translated (the ``--check`` report,
feedback pages, the "About the checks" cell of released notebooks); the teacher's
``grades.csv`` and ``grades.json`` stay in English.
"""

from __future__ import annotations

import gettext
import re
import unicodedata
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

__all__ = ["DEFAULT", "LANGUAGES", "DOMAIN", "LOCALE_DIR", "normalise_language", "notebook_language",
           "translation", "gettext_for", "catalogue_path", "html_lang", "translate_message", "label",
           "files_language"]

#: The language of every message when a notebook names none we know.
DEFAULT = "en"
#: Gettext domain of the grader's catalogue.
DOMAIN = "course_grader"
#: Where the catalogues live (installed with the package).
LOCALE_DIR = Path(__file__).resolve().parent / "locale"
#: Language tags a notebook may carry (compared lower-case, ``_`` read as ``-``) -> gettext
#: language; everything else is English.
LANGUAGES = {
    "en": DEFAULT, "en-us": DEFAULT, "en-gb": DEFAULT,
    "zh-cn": "zh_CN", "zh": "zh_CN", "zh-hans": "zh_CN", "zh-hans-cn": "zh_CN", "zh-sg": "zh_CN",
    # Traditional Chinese (the zh-TW edition, issue 32): Taiwan, Hong Kong, Macau
    "zh-tw": "zh_TW", "zh-hant": "zh_TW", "zh-hant-tw": "zh_TW", "zh-hk": "zh_TW", "zh-hant-hk": "zh_TW",
    "zh-mo": "zh_TW", "zh-hant-mo": "zh_TW",
}
_HTML_LANG = {DEFAULT: "en", "zh_CN": "zh-CN", "zh_TW": "zh-TW"}
_MAX_TAG = 32


def normalise_language(value: Any) -> str | None:
    """The gettext language of a language tag, or None when it is not one we know (any type)."""
    if not isinstance(value, str) or len(value) > _MAX_TAG:
        return None
    return LANGUAGES.get(value.strip().lower().replace("_", "-"))


def notebook_language(nb: Any) -> str:
    """The language of a notebook (a dict as loaded from JSON): ``metadata.course.language``,
    else ``metadata.language``; :data:`DEFAULT` when neither is a language we know."""
    meta = nb.get("metadata") if isinstance(nb, dict) else None
    if not isinstance(meta, dict):
        return DEFAULT
    course = meta.get("course")
    for value in (course.get("language") if isinstance(course, dict) else None, meta.get("language")):
        lang = normalise_language(value)
        if lang is not None:
            return lang
    return DEFAULT


def catalogue_path(language: str) -> Path:
    return LOCALE_DIR / language / "LC_MESSAGES" / f"{DOMAIN}.po"


class _POTranslations(gettext.NullTranslations):
    """gettext translations read from a PO catalogue (finished entries only)."""

    def __init__(self, catalogue: dict[str, str]) -> None:
        super().__init__()
        self._catalogue = catalogue

    def gettext(self, message: str) -> str:
        return self._catalogue.get(message, message)


@lru_cache(maxsize=None)
def translation(language: str) -> gettext.NullTranslations:
    """The translations of ``language`` (a value of :data:`LANGUAGES`); English: identity."""
    if language == DEFAULT or language not in set(LANGUAGES.values()):
        return gettext.NullTranslations()
    import polib

    path = catalogue_path(language)
    po = polib.pofile(str(path), encoding="utf-8")
    return _POTranslations({e.msgid: e.msgstr for e in po
                            if e.msgstr and not e.obsolete and "fuzzy" not in e.flags})


#: A message longer than this is shown as it is (matching it against the templates would cost
#: time on text the learner's code can make arbitrarily long; the grader caps messages anyway).
MAX_MATCHED = 600
# both read the catalogue's own msgids and msgstrs only, never a message
_FIELD = re.compile(r"\{(\w+)\}")
_CONVERSION = re.compile(r"\{(\w+)![rsa]\}")


@lru_cache(maxsize=None)
def _templates(language: str) -> tuple[tuple[tuple[str, ...], tuple[str, ...], str], ...]:
    """The catalogue's messages with ``{fields}``, split into literal pieces and field names:
    ``"a {x} b {y}"`` is ``(("a ", " b ", ""), ("x", "y"), msgstr)``. Longest literal first;
    messages that are mostly fields (under 3 word characters of literal text) are left out."""
    trans = translation(language)
    out = []
    for msgid, msgstr in getattr(trans, "_catalogue", {}).items():
        # ``{name!r}``: the message already holds the field's repr, so the template reads it as
        # ``{name}`` and the translation writes it back unchanged (not a second repr)
        msgid, msgstr = _CONVERSION.sub(r"{\1}", msgid), _CONVERSION.sub(r"{\1}", msgstr)
        names = tuple(_FIELD.findall(msgid))
        literal = _FIELD.sub("", msgid)
        if not names or sum(ch.isalnum() or ch == "_" for ch in literal) < 3:
            continue
        pieces = tuple(_FIELD.split(msgid)[::2])  # split keeps the group: literal, name, literal, ...
        out.append((len(literal), pieces, names, msgstr))
    return tuple((pieces, names, msgstr) for _, pieces, names, msgstr in sorted(out, key=lambda t: -t[0]))


def _match(message: str, pieces: tuple[str, ...], names: tuple[str, ...]) -> dict[str, str] | None:
    """The fields of ``message`` read as the template ``pieces``/``names``, or None.

    No regular expression and no backtracking: the first piece must be a prefix and the last a
    suffix; each piece between is taken at its first place after the previous one (``str.find``,
    linear); a field is one line of text, and a field named twice must read the same twice. So
    one template costs one pass over the message, and a message the learner's code shaped cannot
    make the grader's process work harder than its length."""
    first, last = pieces[0], pieces[-1]
    if len(message) < len(first) + len(last) or not message.startswith(first) or not message.endswith(last):
        return None
    end = len(message) - len(last)
    pos, fields = len(first), dict[str, str]()
    for i, name in enumerate(names):
        if i + 1 < len(names):
            at = message.find(pieces[i + 1], pos, end)
            if at < 0:
                return None
        else:
            at = end
        value = message[pos:at]
        if "\n" in value or fields.setdefault(name, value) != value:
            return None
        pos = at + len(pieces[i + 1])
    return fields if pos == len(message) else None


def translate_message(message: str, language: str | None, _depth: int = 0) -> str:
    """A message the grader made in English (a check's failure, a test's or a cell's status, a
    note) in ``language``: an exact catalogue entry, or a marked template (``N_("... {name} ...")``)
    whose literal text matches (:func:`_match`, linear), translated with its fields filled in
    (each field translated in turn, at most three levels deep: a message may quote another).
    Anything else, such as the learner's own exception text, is left as it is; a message over
    :data:`MAX_MATCHED` characters is not matched at all."""
    language = language or DEFAULT
    if language == DEFAULT or type(message) is not str or not message or len(message) > MAX_MATCHED:
        return message
    trans = translation(language)
    exact = trans.gettext(message)
    if exact is not message and exact != message:
        return exact
    if _depth >= 3:
        return message
    for pieces, names, msgstr in _templates(language):
        fields = _match(message, pieces, names)
        if fields is not None:
            return msgstr.format(**{k: translate_message(v, language, _depth + 1) for k, v in fields.items()})
    return message


def files_language(paths: Any) -> str:
    """The language of a set of notebooks the teacher wrote (an assignment's source notebooks):
    the first one's :func:`notebook_language`; English when none can be read. The teacher's
    terminal lines follow it (a class made from zh/solutions reads Chinese)."""
    import json

    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                return notebook_language(json.load(f))
        except (OSError, ValueError, RecursionError):
            continue
    return DEFAULT


def label(text: str, width: int = 8) -> str:
    """``text`` centred in ``width`` columns as a terminal shows it (a CJK character takes two),
    so that ``[  通过  ]`` lines up with ``[ 未通过 ]`` and ``[  PASS  ]``."""
    wide = sum(2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1 for ch in text)
    pad = max(0, width - wide)
    return " " * (pad // 2) + text + " " * (pad - pad // 2)


def gettext_for(language: str | None) -> Callable[[str], str]:
    """``_`` for one language: ``_("Score: {total}").format(total=...)``."""
    return translation(language or DEFAULT).gettext


def html_lang(language: str | None) -> str:
    """The ``lang`` attribute of an HTML page in ``language``."""
    return _HTML_LANG.get(language or DEFAULT, "en")


def N_(message: str) -> str:
    """Mark a message for the catalogue without translating it here (translated where shown)."""
    return message


#: The words the grader shows for a learner cell's status (course_grader.rpc.CellRun.status) and a
#: submission's (course_grader.runner.Status): translated where shown, with translate_message.
STATUS_WORDS = (N_("error"), N_("died"), N_("skipped"), N_("timeout"))
