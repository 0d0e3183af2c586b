"""Chinese text in the lessons' figures: a CJK font is matplotlib's fallback (issue 23)."""

from __future__ import annotations

import warnings

import matplotlib
import matplotlib.pyplot as plt
import pytest

from course_lib.fonts import CJK_FONT_PACKAGE, find_cjk_font, use_cjk_font
from course_lib.training import setup_lesson

TIER = "fast"  # course_tools/tiers.py

TEXT = "注意力汇聚：查询、键和值"


def _missing_glyph_warnings(families: list[str]) -> list[str]:
    with matplotlib.rc_context({"font.family": families}):
        fig, ax = plt.subplots()
        ax.set_title(TEXT)
        ax.set_xlabel("位置 position −1")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fig.canvas.draw()
        plt.close(fig)
    return [str(w.message) for w in caught if "missing from font" in str(w.message)]


@pytest.fixture
def cjk_font():
    name = find_cjk_font()
    if name is None:
        pytest.skip(f"no CJK font installed: install {CJK_FONT_PACKAGE} "
                    f"(`sudo apt-get install {CJK_FONT_PACKAGE}`, or `sudo bash scripts/setup_system.sh`)")
    return name


def test_setup_lesson_draws_chinese_without_missing_glyphs(cjk_font):
    before = list(matplotlib.rcParams["font.family"])
    try:
        setup_lesson()
        families = list(matplotlib.rcParams["font.family"])
        assert cjk_font in families
        assert families[: len(before)] == before, "Latin text must keep its font (the CJK font is a fallback)"
        setup_lesson()
        assert matplotlib.rcParams["font.family"].count(cjk_font) == 1, "added once"
        assert _missing_glyph_warnings(families) == []
    finally:
        matplotlib.rcParams["font.family"] = before


def test_without_the_fallback_chinese_glyphs_are_missing(cjk_font):
    # what the test above guards against: DejaVu Sans alone draws boxes and says so
    warned = _missing_glyph_warnings(["sans-serif"])
    assert warned and any("DejaVu Sans" in w for w in warned)


def test_use_cjk_font_names_the_family(cjk_font):
    before = list(matplotlib.rcParams["font.family"])
    try:
        assert use_cjk_font() == cjk_font
    finally:
        matplotlib.rcParams["font.family"] = before
