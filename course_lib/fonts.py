"""Chinese text in figures: a CJK font as matplotlib's fallback (the Chinese edition, issue 23).

matplotlib's default font, DejaVu Sans, has no Chinese glyphs: a Chinese title or label is
drawn as empty boxes with a warning ("Glyph 27880 ... missing from font(s) DejaVu Sans").
:func:`use_cjk_font` appends the first installed CJK font to ``font.family``, after the
generic family (``sans-serif``, i.e. DejaVu Sans): Latin text, digits and the minus sign are
drawn exactly as before (the committed figures do not change), and matplotlib (3.6 and newer)
falls back, glyph by glyph, to the next family of ``font.family`` - the CJK font - for the
characters DejaVu Sans lacks. (Appending to ``font.sans-serif`` would not do: a generic
family resolves to one font.) ``setup_lesson()`` (the first cell of every lesson)
calls it. Linux: ``fonts-wqy-microhei`` (installed by ``scripts/setup_system.sh``); macOS and
Windows have PingFang SC / Microsoft YaHei.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["CJK_FONTS", "CJK_FONT_FILES", "CJK_FONT_PACKAGE", "find_cjk_font", "use_cjk_font"]

#: CJK font families, in order of preference.
CJK_FONTS = ("WenQuanYi Micro Hei", "Noto Sans CJK SC", "Noto Sans SC", "Source Han Sans SC",
             "Source Han Sans CN", "WenQuanYi Zen Hei", "Droid Sans Fallback", "PingFang SC",
             "Hiragino Sans GB", "Heiti SC", "Microsoft YaHei", "SimHei", "Arial Unicode MS")
#: Where Linux distributions put them, for a matplotlib font cache made before they were installed.
CJK_FONT_FILES = ("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc",
                  "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc",
                  "/usr/share/fonts/noto-cjk/NotoSansCJK-Regular.ttc",
                  "/usr/share/fonts/google-noto-cjk/NotoSansCJK-Regular.ttc",
                  "/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc")
#: What to install when there is none (Debian/Ubuntu).
CJK_FONT_PACKAGE = "fonts-wqy-microhei"


def find_cjk_font() -> str | None:
    """The family name of an installed CJK font that matplotlib can use, or None."""
    from matplotlib import font_manager

    known = {f.name for f in font_manager.fontManager.ttflist}
    for name in CJK_FONTS:
        if name in known:
            return name
    for path in CJK_FONT_FILES:   # installed after matplotlib built its font cache
        if Path(path).is_file():
            try:
                font_manager.fontManager.addfont(path)
            except (OSError, RuntimeError, ValueError):
                continue
            known = {f.name for f in font_manager.fontManager.ttflist}
            for name in CJK_FONTS:
                if name in known:
                    return name
    return None


def use_cjk_font() -> str | None:
    """Add an installed CJK font as matplotlib's fallback for Chinese text (see the module).

    Returns:
        The family added (or already there), or None when no CJK font is installed (figures
        then draw Chinese characters as boxes; install ``fonts-wqy-microhei``).
    """
    import matplotlib

    name = find_cjk_font()
    if name is None:
        return None
    families = list(matplotlib.rcParams["font.family"])
    if name not in families:
        matplotlib.rcParams["font.family"] = families + [name]
    return name
