"""Sphinx configuration of one edition of the course website.

course_tools/site_build.py (``site/build.py``) copies this file into each edition's staged source folder next to
``_course.json`` (the edition, its pages and their ways in), and runs Sphinx there.
Nothing in the output may load from outside the site: MathJax is served from ``_shared/``,
the theme's own assets from ``_static/``, and notebook widgets' CDN scripts are switched off.
"""

from __future__ import annotations

import json
from pathlib import Path

from markupsafe import Markup

from course_tools.site_build import ways_in_html

HERE = Path(__file__).resolve().parent
COURSE = json.loads((HERE / "_course.json").read_text(encoding="utf-8"))
EDITION = COURSE["edition"]
LABELS = COURSE["labels"]
SITE_DIR = Path(COURSE["site_dir"])

project = LABELS["root_title"]
author = "The attention course authors"
copyright = "2026, the attention course authors (MIT licence)"
language = EDITION["sphinx_language"]

extensions = ["myst_nb"]
exclude_patterns = ["_course.json", "**.ipynb_checkpoints"]
templates_path = [str(SITE_DIR / "templates")]
html_static_path = [str(SITE_DIR / "static")]
html_extra_path = [COURSE["extra"]]
html_css_files = ["course.css"]
html_theme = "sphinx_book_theme"
html_title = LABELS["root_title"]
html_copy_source = False
html_show_sourcelink = False
html_last_updated_fmt = None
html_theme_options = {
    "home_page_in_toc": True,
    "show_toc_level": 2,
    "use_download_button": False,
    "use_fullscreen_button": False,
    "use_repository_button": False,
    "use_sidenotes": False,
    "article_header_end": ["course-languages.html", "toggle-secondary-sidebar.html"],
    "navigation_with_keys": False,
    "extra_footer": "",
    "footer_content_items": ["course-footer.html"],
}
html_sidebars = {"**": ["navbar-logo.html", "course-languages-side.html", "search-button-field.html",
                        "sbt-sidebar-nav.html"]}

# MyST / MyST-NB: read the committed outputs, never execute
nb_execution_mode = "off"
nb_ipywidgets_js = {}          # no require.js / widget manager from a CDN
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "html_image"]
myst_heading_anchors = 3
suppress_warnings = ["myst.header", "mystnb.unknown_mime_type", "misc.highlighting_failure",
                     "myst.xref_missing"]

# MathJax from the site itself (site/build.py copies it to _shared/mathjax); Sphinx prefixes
# _static/, so climb out of it.
mathjax_path = "../../_shared/mathjax/tex-chtml.js"
mathjax3_config = {"tex": {"inlineMath": [["\\(", "\\)"]], "displayMath": [["\\[", "\\]"]]},
                   "options": {"enableMenu": True}, "loader": {"load": []}}


def _ways_in(app, pagename, templatename, context, doctree):
    """Per page: links to the same page in the other editions, and a lesson's or assignment's
    ways in (download, assignment or lesson, class hub)."""
    pathto = context["pathto"]
    depth = pagename.count("/")
    up = "../" * (depth + 1)
    langs = []
    for ed in COURSE["editions"]:
        href = f"{up}{ed['code']}/{pagename}.html"
        langs.append({"code": ed["code"], "label": ed["label"], "href": href, "current": ed["code"] == EDITION["code"]})
    context["course_languages"] = langs
    context["course_language_label"] = LABELS["language"]
    context["course_labels"] = LABELS
    page = COURSE["pages"].get(pagename)
    context["course_ways_in"] = Markup(ways_in_html(page, LABELS, pathto)) if page else ""


def setup(app):
    app.connect("html-page-context", _ways_in)
