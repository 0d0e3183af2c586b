"""The course website, built and read as a reader would (issue 34; site/build.py, docs/WEBSITE.md).

Builds the site once per module into a temporary folder (every edition whose lessons exist, with
a class-hub URL so the hub links are there), then checks the files:

* every lesson and assignment of every edition has its page, with the download, the
  assignment (or lesson) and the nbgitpuller link, and the language switcher on every page
  leads to the same page in each edition;
* no page or style sheet loads anything from outside the site;
* no hidden test and no solution reaches the site (lines taken from solutions/ that no public
  file has are searched for in the text of every built file);
* every internal link and anchor resolves; the glossary has an anchor per term; the licence
  and the data's attribution are stated; the CJK web font covers every CJK character used;

and serves it on 127.0.0.1 to Chromium (playwright) with every non-local request aborted, loads
every page and checks that math is typeset, every image loaded, Chinese text draws real glyphs
from the site's own font, no request failed, and that search finds a term in each language.
Screenshots and the counts go to ``$COURSE_SITE_SHOTS`` (else a temporary folder it prints).

``COURSE_SITE_DIR=path`` checks an already built site instead of building one (its
``build-info.json`` says with which hub URL).
"""

from __future__ import annotations

import functools
import html.parser
import http.server
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

import pytest

from course_tools import site_build as build
from course_tools import tiers as _tiers
from course_tools.tiers import in_ci

pytestmark = [pytest.mark.browser, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("COURSE_E2E_CHROMIUM", "/usr/bin/chromium")
HUB_URL = "https://hub.example.edu"
REPO_URL = "https://git.example.edu/course/attention-course.git"
CJK = re.compile(r"[\u4e00-\u9fff]")
SEARCH_TERMS = {"en": "attention", "zh-CN": "注意力", "zh-TW": "注意力"}


def _missing_site_tools() -> str | None:
    gone = [m for m in ("sphinx", "myst_nb", "sphinx_book_theme", "pagefind", "fontTools")
            if importlib.util.find_spec(m) is None]
    if importlib.util.find_spec("sphinx-mathjax-offline") is None:
        gone.append("sphinx-mathjax-offline")
    if gone:
        return (f"the site's build tools are missing ({', '.join(gone)}): install the site extra with "
                "`bash scripts/setup.sh` (or `.venv/bin/pip install -e '.[site]'`)")
    return None


@pytest.fixture(scope="module")
def site() -> Path:
    given = os.environ.get("COURSE_SITE_DIR")
    if given:
        yield Path(given)
        return
    why = _missing_site_tools()
    if why:
        if in_ci():
            pytest.fail(f"CI=true and a piece is missing: {why}", pytrace=False)
        pytest.skip(why)
    tmp = Path(tempfile.mkdtemp(prefix="course-site-test-"))
    out = tmp / "html"
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, str(REPO / "site" / "build.py"), "--out", str(out), "--hub-url", HUB_URL,
                          "--repo-url", REPO_URL, "--branch", "main"], capture_output=True, text=True, timeout=1800)
    assert res.returncode == 0, f"site/build.py failed:\n{res.stdout[-3000:]}\n{res.stderr[-6000:]}"
    print(f"\nsite built in {time.monotonic() - t0:.0f} s: {res.stdout.strip()}")
    yield out
    import shutil
    shutil.rmtree(tmp, ignore_errors=True)


def _info(site: Path) -> dict:
    return json.loads((site / "build-info.json").read_text())


def _editions(site: Path) -> list:
    codes = _info(site)["editions"]
    return [e for e in build.EDITIONS if e.code in codes]


def _pages(site: Path) -> list[Path]:
    return sorted(p for p in site.rglob("*.html") if "pagefind" not in p.parts and "_static" not in p.parts)


class _Doc(html.parser.HTMLParser):
    """Links, resources, ids and text of one HTML page."""

    SKIP_TEXT = {"script", "style"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[tuple[str, dict]] = []
        self.resources: list[tuple[str, str, str]] = []   # (tag, attribute, value)
        self.ids: set[str] = set()
        self.text: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "a" and a.get("name"):
            self.ids.add(a["name"])
        if tag == "a" and "href" in a:
            self.links.append((a["href"], a))
        for attr in ("src", "data", "poster", "srcset"):
            if a.get(attr):
                self.resources.append((tag, attr, a[attr]))
        if tag == "link" and a.get("href"):
            self.resources.append((tag, "href", a["href"]))
        if tag in self.SKIP_TEXT:
            self._skip += 1

    def handle_endtag(self, tag):
        if tag in self.SKIP_TEXT and self._skip:
            self._skip -= 1

    def handle_data(self, data):
        if not self._skip:
            self.text.append(data)


@functools.lru_cache(maxsize=None)
def _parse(path: Path) -> _Doc:
    doc = _Doc()
    doc.feed(path.read_text(encoding="utf-8", errors="replace"))
    return doc


def _external(url: str) -> bool:
    return bool(re.match(r"([a-zA-Z][a-zA-Z0-9+.-]*:|//)", url)) and not url.startswith(("data:", "blob:"))


# --- the files ------------------------------------------------------------------------------------

def test_every_lesson_and_assignment_has_its_page_and_ways_in(site):
    eds = _editions(site)
    assert {"en", "zh-CN"} <= {e.code for e in eds}
    if (REPO / "zh-TW" / "notebooks").is_dir():
        assert "zh-TW" in {e.code for e in eds}, "zh-TW/notebooks exists but the site has no zh-TW edition"
    checked = 0
    for ed in eds:
        assignments = build.assignments_of(ed)
        for lesson in build.lessons_of(ed):
            page = site / ed.code / "lessons" / f"{lesson.stem}.html"
            assert page.is_file(), f"no page for {ed.lessons}/{lesson.name}"
            doc = _parse(page)
            classes = {a.get("class", ""): href for href, a in doc.links}
            dl = classes.get("course-download")
            assert dl and (page.parent / dl).resolve() == (site / ed.code / "notebooks" / lesson.name).resolve(), dl
            assert (page.parent / dl).read_bytes() == lesson.read_bytes(), "the download is not the committed notebook"
            a = build.assignment_for(lesson, assignments)
            if a:
                assert (page.parent / classes["course-assignment"]).resolve() == (site / ed.code / "assignments" / f"{a}.html")
            hub = classes.get("course-hub")
            assert hub == build.nbgitpuller_url(HUB_URL, REPO_URL, "main", f"{ed.lessons}/{lesson.name}"), hub
            checked += 1
        for name, released in assignments.items():
            page = site / ed.code / "assignments" / f"{name}.html"
            assert page.is_file(), f"no page for {name}"
            hrefs = {a.get("class", ""): href for href, a in _parse(page).links}
            assert (page.parent / hrefs["course-download"]).read_bytes() == released.read_bytes()
            assert "course-hub" in hrefs and "course-lesson" in hrefs
            checked += 1
    print(f"\nlesson and assignment pages checked: {checked}")


def test_language_switcher_on_every_page_leads_to_the_same_page(site):
    eds = [e.code for e in _editions(site)]
    n = 0
    for ed in eds:
        for page in (site / ed).rglob("*.html"):
            if "_static" in page.parts:
                continue
            rel = page.relative_to(site / ed).as_posix()
            langs = [(href, a) for href, a in _parse(page).links if a.get("class") == "course-language"]
            targets = {a["hreflang"]: (page.parent / href).resolve() for href, a in langs}
            assert set(targets) == set(eds) - {ed}, f"{ed}/{rel}: switcher offers {sorted(targets)}"
            for code, target in targets.items():
                assert target == (site / code / rel).resolve() and target.is_file(), f"{ed}/{rel} -> {target}"
            n += 1
    assert n > 30 * len(eds)
    print(f"\npages with a language switcher: {n}")


def test_nothing_is_loaded_from_outside_the_site(site):
    bad = []
    for page in _pages(site):
        for tag, attr, value in _parse(page).resources:
            if _external(value):
                bad.append(f"{page.relative_to(site)}: <{tag} {attr}={value!r}>")
        raw = page.read_text(encoding="utf-8", errors="replace")
        for m in re.finditer(r"""@import\s+(?:url\()?["']?((?:https?:)?//[^"')]+)""", raw):
            bad.append(f"{page.relative_to(site)}: @import {m.group(1)}")
    for css in site.rglob("*.css"):
        for m in re.finditer(r"""(?:url\(\s*["']?|@import\s+["'])((?:https?:)?//[^"')\s]+)""", css.read_text(errors="replace")):
            bad.append(f"{css.relative_to(site)}: {m.group(1)}")
    assert not bad, "outside resources:\n" + "\n".join(bad[:30])
    # and MathJax, the font and the search index are in the site
    assert (site / "_shared" / "mathjax" / "tex-chtml.js").is_file()
    assert (site / "_shared" / "fonts" / "course-cjk.woff2").is_file()
    assert (site / "pagefind" / "pagefind-ui.js").is_file()


def _distinctive_private_lines() -> dict[str, list[str]]:
    """Per assignment: lines of solutions/ that are solution bodies or hidden tests and that no
    public file (released exercises, lessons, docs, README) has."""
    public = []
    for pattern in ("exercises/*/*.ipynb", "zh/exercises/*/*.ipynb", "zh-TW/exercises/*/*.ipynb",
                    "notebooks/*.ipynb", "zh/notebooks/*.ipynb", "zh-TW/notebooks/*.ipynb", "docs/*.md", "README*.md"):
        for f in REPO.glob(pattern):
            if f.suffix == ".ipynb":   # the cells' text, not the JSON (whose quotes are escaped)
                nb = json.loads(f.read_text(encoding="utf-8"))
                for cell in nb["cells"]:
                    public.append("".join(cell["source"]))
                    for o in cell.get("outputs", []):
                        public.append("".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", "")))
            else:
                public.append(f.read_text(encoding="utf-8", errors="replace"))
    public_text = "\n".join(public)
    public_lines = {l.strip() for t in public for l in t.splitlines()}
    out: dict[str, list[str]] = {}
    for nb_path in sorted(REPO.glob("solutions/*/*.ipynb")) + sorted(REPO.glob("zh/solutions/*/*.ipynb")):
        nb = json.loads(nb_path.read_text(encoding="utf-8"))
        lines = []
        for cell in nb["cells"]:
            src = "".join(cell["source"])
            for begin, end in (("### BEGIN SOLUTION", "### END SOLUTION"),
                               ("### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")):
                for block in re.findall(re.escape(begin) + r"(.*?)" + re.escape(end), src, re.S):
                    for line in block.splitlines():
                        s = line.strip()
                        if (len(s) >= 24 and not s.startswith("#") and s not in public_lines
                                and s not in public_text):
                            lines.append(s)
        if lines:
            out[nb_path.relative_to(REPO).as_posix()] = sorted(set(lines))
    return out


def _site_text(site: Path) -> str:
    """What a reader of the site can get: the text of every page (tags stripped, entities
    decoded, so highlighted code reads as it was written) and every other text file."""
    parts = []
    for f in site.rglob("*"):
        if not f.is_file() or "pagefind" in f.parts:
            continue
        if f.suffix == ".html":
            parts.append("".join(_parse(f).text))
        elif f.suffix in (".ipynb", ".txt", ".js", ".json", ".md", ".py"):
            parts.append(f.read_text(encoding="utf-8", errors="replace"))
    return "\n".join(parts)


def _leaks(private: dict[str, list[str]], text: str) -> dict[str, list[str]]:
    """The private lines that are lines of ``text`` (code reaches a page line by line: a
    highlighted cell's text, tags stripped, has the source's lines)."""
    lines = {l.strip() for l in text.splitlines()}
    found = {nb: [l for l in ls if l in lines] for nb, ls in private.items()}
    return {nb: ls for nb, ls in found.items() if ls}


def test_no_hidden_test_or_solution_reaches_the_site(site):
    private = _distinctive_private_lines()
    assert len(private) >= 10, f"too few assignments with distinctive private lines: {sorted(private)}"
    total = sum(len(v) for v in private.values())
    assert total >= 100, total
    text = _site_text(site)
    # the method works: the public checks of a released notebook are found in the same text
    released = json.loads((REPO / "exercises" / "lesson03_scoring" / "scoring.ipynb").read_text(encoding="utf-8"))
    public_test = next("".join(c["source"]) for c in released["cells"]
                       if c["metadata"].get("nbgrader", {}).get("grade_id") == "test_masked_softmax_public")
    probe = max((l.strip() for l in public_test.splitlines()), key=len)
    assert probe in text, f"a public test line is not found in the site's text: the search cannot work ({probe!r})"
    leaked = _leaks(private, text)
    # and it would see a leak: the instructor's lesson 3 notebook, rendered as a page would be
    solution_src = "\n".join("".join(c["source"]) for c in json.loads(
        (REPO / "solutions" / "lesson03_scoring" / "scoring.ipynb").read_text(encoding="utf-8"))["cells"])
    assert "solutions/lesson03_scoring/scoring.ipynb" in _leaks(private, solution_src), "the leak check sees nothing"
    assert not leaked, "solution or hidden-test lines on the site:\n" + json.dumps(leaked, indent=1, ensure_ascii=False)[:3000]
    print(f"\nprivate lines searched for: {total} from {len(private)} instructor notebooks; none on the site")


def test_every_internal_link_and_anchor_resolves(site):
    broken, n = [], 0
    for page in _pages(site):
        for href, _a in _parse(page).links:
            if _external(href) or href.startswith("mailto:"):
                continue
            n += 1
            path, _, anchor = href.partition("#")
            target = (page.parent / urllib.parse.unquote(path)).resolve() if path else page
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file() or site.resolve() not in target.parents:
                broken.append(f"{page.relative_to(site)} -> {href}")
                continue
            if anchor and target.suffix == ".html" and urllib.parse.unquote(anchor) not in _parse(target).ids:
                broken.append(f"{page.relative_to(site)} -> {href} (no such anchor)")
    assert not broken, f"{len(broken)} broken of {n} internal links:\n" + "\n".join(broken[:40])
    assert n > 1000
    print(f"\ninternal links checked: {n}")


def test_glossary_anchors_licence_and_attribution(site):
    anchors, prefix = [], "term"  # the terms table: term-<slug>; the translation's word list: usage-<slug>
    for line in (REPO / "docs" / "GLOSSARY.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            prefix = "usage" if "Words of the translation" in line else "term"
        elif line.startswith("| ") and not line.startswith(("| English", "| ---")):
            anchors.append(f"{prefix}-{build.term_slug(line.split('|')[1].strip())}")
    assert any(a.startswith("usage-") for a in anchors) and len(anchors) > 50
    for ed in _editions(site):
        ids = _parse(site / ed.code / "glossary.html").ids
        missing = [a for a in anchors if a not in ids]
        assert not missing, f"{ed.code}/glossary.html: no anchor for {missing[:10]}"
        lic = "".join(_parse(site / ed.code / "licence.html").text)
        assert "MIT License" in lic and "www.manythings.org/anki and tatoeba.org" in lic and "CC-BY 2.0 FR" in lic
        for page in (site / ed.code).rglob("*.html"):
            if "_static" not in page.parts:
                assert any(h.endswith("licence.html") for h, _ in _parse(page).links), f"{page}: no licence link"


def test_cjk_font_covers_every_cjk_character_on_the_site(site):
    from fontTools.ttLib import TTFont

    cmap = TTFont(str(site / "_shared" / "fonts" / "course-cjk.woff2")).getBestCmap()
    used = set()
    for page in _pages(site):
        used.update(CJK.findall("".join(_parse(page).text)))
    assert len(used) > 500
    missing = sorted(c for c in used if ord(c) not in cmap)
    assert not missing, f"the web font lacks {''.join(missing[:50])}"


# --- in a browser ----------------------------------------------------------------------------------

class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def served(site):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


_PAGE_JS = r"""
async () => {
  const out = {};
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) { await MathJax.startup.promise; }
  out.mathSource = document.querySelectorAll('.math, div.math, span.math').length;
  out.mathTypeset = document.querySelectorAll('mjx-container').length;
  // raw TeX left in the reading text (code, outputs and typeset math excluded)
  const raw = [];
  const walker = document.createTreeWalker(document.querySelector('article') || document.body, NodeFilter.SHOW_TEXT);
  const skip = (n) => n.parentElement.closest('pre, code, script, style, mjx-container, textarea, .highlight, .output, .cell_output');
  const pat = /\$\$|\\\(|\\\[|\\begin\{|(^|[^\w$])\$[A-Za-z\\][^$\n]{0,60}\$/;
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (!skip(n) && pat.test(n.textContent)) raw.push(n.textContent.trim().slice(0, 80));
  }
  out.rawTex = raw.slice(0, 5);
  const imgs = [...document.images];
  for (const img of imgs) { img.loading = 'eager'; }
  await Promise.all(imgs.map(img => img.complete ? null : new Promise(r => { img.onload = img.onerror = r; })));
  out.images = imgs.length;
  out.brokenImages = imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute('src'));
  await document.fonts.ready;
  out.cjkFont = [...document.fonts].filter(f => f.family.replace(/"/g, '') === 'Course CJK').map(f => f.status);
  return out;
}
"""

#: Draws each character in the site's CJK web font, and in the element's own font, on a canvas
#: and compares it with U+10FFFD, a code point no font has (as tests/test_browser_zh.py does).
_GLYPH_JS = r"""
([selector, chars]) => {
  const el = document.querySelector(selector);
  if (!el) return {error: 'no element ' + selector};
  const style = getComputedStyle(el);
  const fonts = [`40px "Course CJK"`, `${style.fontStyle} ${style.fontWeight} 40px ${style.fontFamily}`];
  const draw = (font, ch) => {
    const c = document.createElement('canvas'); c.width = 64; c.height = 64;
    const ctx = c.getContext('2d'); ctx.font = font; ctx.fillStyle = '#000'; ctx.textBaseline = 'top';
    ctx.fillText(ch, 4, 4);
    const d = ctx.getImageData(0, 0, 64, 64).data;
    let ink = 0, sig = [];
    for (let i = 3; i < d.length; i += 4) { if (d[i] > 0) ink++; sig.push(d[i]); }
    return {ink, sig: sig.join(',')};
  };
  const out = {bad: [], fonts};
  for (const font of fonts) {
    const none = draw(font, '\u{10FFFD}');
    for (const ch of chars) { const g = draw(font, ch); if (g.ink === 0 || g.sig === none.sig) out.bad.push(font + ': ' + ch); }
  }
  return out;
}
"""


def _shots() -> Path:
    return _tiers.keep_folder("the website's screenshots and counts", "COURSE_SITE_SHOTS", "course-site-shots-")


def test_every_page_in_a_browser_with_outside_requests_blocked(site, served):
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
    from playwright.sync_api import sync_playwright

    shots = _shots()
    eds = _editions(site)
    pages = [p.relative_to(site).as_posix() for p in _pages(site)]
    outside, failed, problems = [], [], []
    counts = {"pages": 0, "math_pages": 0, "typeset": 0, "images": 0, "search_hits": {}}
    args = ["--disable-dev-shm-usage", "--disable-gpu"] + (["--no-sandbox"] if os.geteuid() == 0 else [])
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=args)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900})

            def route(r):
                if r.request.url.startswith(served + "/") or r.request.url.startswith(("data:", "blob:")):
                    r.continue_()
                else:
                    outside.append(r.request.url)
                    r.abort()

            context.route("**/*", route)
            page = context.new_page()
            page.on("response", lambda resp: failed.append(f"{resp.status} {resp.url}") if resp.status >= 400 else None)
            page.on("requestfailed", lambda req: failed.append(f"failed {req.url}")
                    if req.url.startswith(served) else None)
            for rel in pages:
                page.goto(f"{served}/{rel}", wait_until="load", timeout=120_000)
                got = page.evaluate(_PAGE_JS)
                counts["pages"] += 1
                counts["images"] += got["images"]
                if got["mathSource"]:
                    counts["math_pages"] += 1
                    counts["typeset"] += got["mathTypeset"]
                    if got["mathTypeset"] < got["mathSource"]:
                        problems.append(f"{rel}: {got['mathSource']} math elements, {got['mathTypeset']} typeset")
                if got["rawTex"]:
                    problems.append(f"{rel}: raw TeX left: {got['rawTex']}")
                if got["brokenImages"]:
                    problems.append(f"{rel}: images not loaded: {got['brokenImages'][:5]}")
                text = page.locator("main").first.inner_text() if page.locator("main").count() else ""
                chars = "".join(dict.fromkeys(CJK.findall(text)))[:40]
                if rel.startswith("zh-") and chars:
                    if got["cjkFont"] != ["loaded"]:
                        problems.append(f"{rel}: the site's CJK font is {got['cjkFont']}, not loaded")
                    glyphs = page.evaluate(_GLYPH_JS, ["main h1, main p", chars])
                    if glyphs.get("error") or glyphs["bad"]:
                        problems.append(f"{rel}: CJK drawn as boxes: {glyphs}")
                elif rel.startswith("zh-"):
                    problems.append(f"{rel}: a Chinese-edition page without Chinese text")

            # screenshots: a lesson with math and a figure, in each language; the switcher; search
            for ed in eds:
                lesson = f"{served}/{ed.code}/lessons/02_attention_pooling.html"
                page.goto(lesson, wait_until="load")
                page.evaluate(_PAGE_JS)
                page.screenshot(path=str(shots / f"lesson-02-{ed.code}-top.png"))
                page.locator("article img").first.scroll_into_view_if_needed()
                page.evaluate("window.scrollBy(0, -250)")
                page.wait_for_timeout(300)
                page.screenshot(path=str(shots / f"lesson-02-{ed.code}-figure.png"))
            page.goto(f"{served}/en/lessons/03_scoring_functions.html", wait_until="load")
            page.locator(".course-languages").first.screenshot(path=str(shots / "language-switcher.png"))
            page.locator("a.course-language[hreflang='zh-CN']").first.click()
            page.wait_for_load_state("load")
            assert page.url.endswith("/zh-CN/lessons/03_scoring_functions.html"), page.url
            page.screenshot(path=str(shots / "after-switch-zh-CN.png"))

            for ed in eds:
                term = SEARCH_TERMS[ed.code]
                page.goto(f"{served}/{ed.code}/search.html?q={urllib.parse.quote(term)}", wait_until="load")
                results = page.locator(".pagefind-ui__result")
                try:
                    results.first.wait_for(timeout=60_000)
                except PlaywrightTimeoutError as err:
                    page.screenshot(path=str(shots / f"search-{ed.code}-FAILED.png"))
                    raise AssertionError(f"search for {term!r} in {ed.code}: no result") from err
                page.wait_for_timeout(500)
                hrefs = page.locator(".pagefind-ui__result-link").evaluate_all("els => els.map(e => e.href)")
                counts["search_hits"][ed.code] = len(hrefs)
                assert hrefs and all(f"/{ed.code}/" in h for h in hrefs), f"{ed.code}: results from elsewhere: {hrefs[:5]}"
                page.screenshot(path=str(shots / f"search-{ed.code}.png"))
        finally:
            browser.close()
    counts["outside_requests_blocked"] = len(outside)
    (shots / "counts.json").write_text(json.dumps(counts, indent=1, ensure_ascii=False) + "\n")
    print(f"\nbrowser: {json.dumps(counts, ensure_ascii=False)}")
    assert not outside, f"requests outside the site (blocked): {sorted(set(outside))[:20]}"
    assert not failed, f"requests that failed: {failed[:20]}"
    assert not problems, "\n".join(problems[:40])
    assert counts["pages"] == len(pages) and counts["math_pages"] >= 20 and counts["images"] >= 50
