"""The grader's learner-facing messages in the learner's language (gettext, PO catalogues).

A notebook says its language in its metadata: ``metadata.course.language`` (written by the
Chinese edition's build, ``scripts/i18n.py``) or ``metadata.language``. The learner controls
that metadata (docs/GRADING.md, threat model), so it is only ever looked up in a fixed table
(:data:`LANGUAGES`): anything else - a value of another type, a long string, an unknown tag -
means English, and nothing from it reaches a file name, a path or a message.

Messages are marked in the code as ``_("...")`` with a literal English text (the msgid), and
formatted after translation with ``str.format`` (named fields only). The Chinese texts are
in ``course_grader/locale/zh_CN/LC_MESSAGES/course_grader.po`` (package data), read with
polib when first needed; tests/test_grading_i18n.py fails when a marked message has no
Chinese entry, when an entry is fuzzy or no longer used, or when the fields of a translation
differ from its English. Only learner-facing text is translated (the ``--check`` report,
feedback pages, the "About the checks" cell of released notebooks); the teacher's
``grades.csv`` and ``grades.json`` stay in English.
"""

from __future__ import annotations

import gettext
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

__all__ = ["DEFAULT", "LANGUAGES", "DOMAIN", "LOCALE_DIR", "normalise_language", "notebook_language",
           "translation", "gettext_for", "catalogue_path", "html_lang"]

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
}
_HTML_LANG = {DEFAULT: "en", "zh_CN": "zh-CN"}
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


def gettext_for(language: str | None) -> Callable[[str], str]:
    """``_`` for one language: ``_("Score: {total}").format(total=...)``."""
    return translation(language or DEFAULT).gettext


def html_lang(language: str | None) -> str:
    """The ``lang`` attribute of an HTML page in ``language``."""
    return _HTML_LANG.get(language or DEFAULT, "en")


def N_(message: str) -> str:
    """Mark a message for the catalogue without translating it here (translated where shown)."""
    return message
