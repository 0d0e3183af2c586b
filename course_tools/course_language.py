"""The language a class is run in: English (default) or Simplified Chinese (issue 23).

Used by ``deploy/install.sh`` (``COURSE_LANGUAGE=zh-CN``) and ``deploy/make_course.py``
(``--language zh-CN``, default ``$COURSE_LANGUAGE``). Standard library and ``course_tools.lessons``
(standard library too) only: install.sh runs it with the system's Python from the checkout
(``python3 -m deploy.course_language``, a thin wrapper, so that ``course_tools`` is found there)
before the course environment exists.

For a class run in Chinese:

* JupyterLab's interface is preset to Chinese for every user: the class-wide settings
  (``deploy/jupyter/lab-overrides.json``, installed as the course environment's
  ``share/jupyter/lab/settings/overrides.json``) get
  ``"@jupyterlab/translation-extension:plugin": {"locale": "zh_CN"}`` (the language pack,
  ``jupyterlab-language-pack-zh-CN``, is a dependency of the course); a learner can still
  switch in Settings > Language;
* the lessons each learner gets are the Chinese ones, ``zh/notebooks/``;
* the assignments are the Chinese ones, ``zh/solutions/`` (released as ``zh/exercises/`` is
  generated; graded by the same answer key: the code and tests are the English ones).

    python3 -m deploy.course_language overrides --language zh-CN [--base deploy/jupyter/lab-overrides.json]
    python3 -m deploy.course_language lessons --language zh-CN       # the folder of lessons to install
    python3 -m deploy.course_language solutions --language zh-CN     # the folder of source assignments
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

from course_tools.lessons import lesson_notebooks

REPO = Path(__file__).resolve().parents[1]
#: Language of a class -> (lessons folder, source assignments folder, JupyterLab locale or None).
LANGUAGES = {
    "en": ("notebooks", "solutions", None),
    "zh-CN": ("zh/notebooks", "zh/solutions", "zh_CN"),
    # Traditional Chinese (Taiwan, Hong Kong): JupyterLab's language pack jupyterlab-language-pack-zh-TW
    "zh-TW": ("zh-TW/notebooks", "zh-TW/solutions", "zh_TW"),
}
TRANSLATION_PLUGIN = "@jupyterlab/translation-extension:plugin"
BUILD_HINT = ("build the Chinese editions first: `.venv/bin/python scripts/i18n.py build` "
              "and `bash scripts/generate_exercises.sh` (README.zh-CN.md, README.zh-TW.md)")


def language(value: str | None) -> str:
    """The class language for ``value`` (``en``, ``zh-CN``, ``zh-TW``; ``zh_CN`` and case accepted;
    empty: ``en``); a clear error for anything else."""
    raw = (value or "en").strip()
    for name in LANGUAGES:
        if raw.lower().replace("_", "-") == name.lower():
            return name
    raise SystemExit(f"unknown course language {raw!r}: use one of {', '.join(LANGUAGES)} "
                     "(COURSE_LANGUAGE or --language)")


def lab_overrides(base: dict, lang: str) -> dict:
    """JupyterLab's class-wide settings (``overrides.json``) for a class in ``lang``."""
    out = json.loads(json.dumps(base))
    locale = LANGUAGES[language(lang)][2]
    if locale:
        out[TRANSLATION_PLUGIN] = {**out.get(TRANSLATION_PLUGIN, {}), "locale": locale}
    return out


def lessons_dir(lang: str, repo: Path = REPO) -> Path:
    """The lessons of a class in ``lang``: every English lesson, in that language."""
    folder = repo / LANGUAGES[language(lang)][0]
    english = [p.name for p in lesson_notebooks(repo / "notebooks")]
    have = {p.name for p in lesson_notebooks(folder)} if folder.is_dir() else set()
    missing = [n for n in english if n not in have]
    if missing:
        raise SystemExit(f"{folder}: lessons missing ({', '.join(missing[:4])}{' ...' if len(missing) > 4 else ''}); "
                         + BUILD_HINT)
    return folder


def solutions_dir(lang: str, repo: Path = REPO) -> Path:
    """The source assignments of a class in ``lang`` (every English assignment, in that language)."""
    folder = repo / LANGUAGES[language(lang)][1]
    english = sorted(p.name for p in (repo / "solutions").iterdir() if p.is_dir() and any(p.glob("*.ipynb")))
    missing = [a for a in english if not (folder / a).is_dir() or not any((folder / a).glob("*.ipynb"))]
    if missing:
        raise SystemExit(f"{folder}: assignments missing ({', '.join(missing[:4])}"
                         f"{' ...' if len(missing) > 4 else ''}); " + BUILD_HINT)
    return folder


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=("overrides", "lessons", "solutions"))
    p.add_argument("--language", default=None, help="en, zh-CN or zh-TW (default: $COURSE_LANGUAGE, else en)")
    p.add_argument("--base", type=Path, default=REPO / "deploy" / "jupyter" / "lab-overrides.json")
    args = p.parse_args(argv)
    import os
    lang = language(args.language if args.language is not None else os.environ.get("COURSE_LANGUAGE"))
    if args.what == "overrides":
        print(json.dumps(lab_overrides(json.loads(args.base.read_text(encoding="utf-8")), lang), indent=2,
                         ensure_ascii=False))
    elif args.what == "lessons":
        print(lessons_dir(lang))
    else:
        print(solutions_dir(lang))
    return 0


if __name__ == "__main__":
    sys.exit(main())
