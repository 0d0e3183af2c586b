"""The Chinese edition for tests: build Chinese sources in a temporary folder with the
functions of ``course_tools.i18n`` (the lead's tool, ``scripts/i18n.py``), whatever the state of the translations.

Untranslated or fuzzy cells keep their English (``allow_incomplete``), so tests that need a
Chinese notebook (its metadata says ``zh-CN``; its code cells are the English ones byte for
byte) work before the translators finish, and with the real translations once they are in.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

__all__ = ["REPO", "load_i18n_script", "build_chinese"]

REPO = Path(__file__).resolve().parents[2]


def load_i18n_script() -> ModuleType:
    """``course_tools.i18n``, the Chinese edition's build tool (kept for the callers of the days
    when it was a script)."""
    from course_tools import i18n

    return i18n


def build_chinese(dest: str | Path, *, lessons: list[str] | None = None,
                  assignments: list[str] | None = None) -> dict[str, Path]:
    """Write ``dest/zh/notebooks/NN_*.ipynb`` and ``dest/zh/solutions/<a>/<nb>.ipynb`` as
    ``scripts/i18n.py build --allow-incomplete`` would write them under ``zh/``.

    Args:
        dest: the folder that gets ``zh/``.
        lessons: lesson stems or prefixes to build (e.g. ``["03"]``); None: none; ``[]``: all.
        assignments: assignment names to build; None: none; ``[]``: all.

    Returns:
        {English path relative to the repository: the Chinese notebook written}.
    """
    i18n = load_i18n_script()
    dest = Path(dest)
    out: dict[str, Path] = {}
    for doc in i18n.documents(REPO):
        rel = doc.english.relative_to(REPO)
        if rel.parts[0] == "notebooks":
            wanted = lessons is not None and (not lessons or any(doc.english.stem.startswith(x) for x in lessons))
        else:
            wanted = assignments is not None and (not assignments or doc.english.parent.name in assignments)
        if not wanted:
            continue
        nb = i18n.build(doc, allow_incomplete=True)
        target = dest / doc.output.relative_to(REPO)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(i18n.notebook_text(nb), encoding="utf-8")
        out[rel.as_posix()] = target
    missing = set(assignments or []) - {Path(k).parent.name for k in out}
    if missing:
        raise FileNotFoundError(f"no English source for assignment(s) {sorted(missing)} in {REPO / 'solutions'}")
    return out


if __name__ == "__main__":   # pragma: no cover - a developer's preview
    print("\n".join(str(p) for p in build_chinese(sys.argv[1], lessons=[], assignments=[]).values()))
