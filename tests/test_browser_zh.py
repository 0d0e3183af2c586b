"""A Chinese lesson in JupyterLab's Chinese interface, in a real browser (issue 23), for each edition:
zh-CN in the Simplified Chinese interface, zh-TW in the Traditional Chinese one (issue 32).

Starts ``jupyter lab`` on 127.0.0.1 (a free port, token auth) with everything it writes in a
temporary folder - settings (locale ``zh_CN``, as the class hub presets it), workspaces,
runtime files, HOME - opens ``zh/notebooks/03_*.ipynb`` (the committed one, else one built
into the temporary folder with ``scripts/i18n.py``'s functions) in Chromium through
playwright, and checks that

* the interface is in Chinese (the menu bar says 文件, 编辑, ...);
* Chinese text renders with real glyphs, not empty boxes: in the page, each Chinese
  character of the menu bar, of the lesson's first heading (the menu's characters while the
  heading is not translated) and of its first cell is drawn on a canvas in that element's own
  font and compared with the drawing of U+10FFFD, a code point no font has (a missing glyph
  draws the same box as U+10FFFD, or nothing);

and keeps a screenshot in a temporary folder it prints (``$COURSE_E2E_ARTIFACTS`` if set).

Marker ``browser``: needs Chromium, changes nothing on the host, so it runs in the default
``python -m pytest`` (skipped with the install command where Chromium is missing; fails under
``CI=true``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from course_tools.grading_dev.zh import build_chinese

pytestmark = [pytest.mark.browser]

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("COURSE_E2E_CHROMIUM", "/usr/bin/chromium")
CJK = re.compile(r"[\u4e00-\u9fff]")
#: The editions in their JupyterLab interface (issue 32: zh-TW too): folder, notebook language
#: tag, JupyterLab locale (the language pack), and an element of the interface with the words it
#: must show in that language. The zh-TW language pack (4.5) leaves the main menu's titles in
#: English, but translates the file browser (名稱 for Name, "1 分鐘前" for "1 minute ago").
EDITIONS = {
    "zh-CN": ("zh", "zh-CN", "zh_CN", (".lm-MenuBar-itemLabel", {"文件", "编辑", "查看", "设置", "帮助"})),
    "zh-TW": ("zh-TW", "zh-TW", "zh_TW", (".jp-DirListing-headerItemText", {"名稱"})),
}


def _settings(locale: str) -> dict:
    """JupyterLab user settings of the test: the edition's interface, and no news pop-up."""
    return {
        "@jupyterlab/translation-extension/plugin.jupyterlab-settings": {"locale": locale},
        "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false",
                                                                            "checkForUpdates": False},
    }




def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _lesson(root: Path, folder: str = "zh") -> Path:
    """<folder>/notebooks/03_*.ipynb under ``root``: copied from the repository if committed, else
    built (zh/ only)."""
    committed = sorted((REPO / folder / "notebooks").glob("03_*.ipynb"))
    target_dir = root / folder / "notebooks"
    if committed or folder != "zh":
        assert committed, f"{folder}/notebooks/03_*.ipynb missing: run `scripts/i18n.py build`"
        target_dir.mkdir(parents=True)
        shutil.copy(committed[0], target_dir / committed[0].name)
        return target_dir / committed[0].name
    built = [p for p in build_chinese(root, lessons=["03"]).values()]
    assert len(built) == 1 and built[0].name.startswith("03_"), f"lesson 03 not built: {built}"
    return built[0]


@pytest.fixture(params=list(EDITIONS))
def lab(tmp_path, request):
    """A ``jupyter lab`` serving ``tmp_path/work`` with an edition's interface preset; yields
    (base URL, token, work folder, edition); stopped (with its kernels) at the end."""
    work, settings = tmp_path / "work", tmp_path / "settings"
    for rel, value in _settings(EDITIONS[request.param][2]).items():
        f = settings / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(json.dumps(value), encoding="utf-8")
    for d in ("home", "runtime", "config", "data", "ipython", "workspaces"):
        (tmp_path / d).mkdir()
    work.mkdir()
    port, token = _free_port(), os.urandom(16).hex()
    env = dict(os.environ, HOME=str(tmp_path / "home"), JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
               JUPYTER_CONFIG_DIR=str(tmp_path / "config"), JUPYTER_DATA_DIR=str(tmp_path / "data"),
               IPYTHONDIR=str(tmp_path / "ipython"), MPLCONFIGDIR=str(tmp_path / "home" / ".mpl"),
               JUPYTERLAB_SETTINGS_DIR=str(settings), JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"))
    log = (tmp_path / "lab.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
         "--port-retries=0", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={work}",
         f"--LabApp.user_settings_dir={settings}", f"--LabApp.workspaces_dir={tmp_path / 'workspaces'}",
         "--ServerApp.open_browser=False", *(["--allow-root"] if os.geteuid() == 0 else [])],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=work)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"jupyter lab exited ({proc.returncode}):\n"
                                     + (tmp_path / "lab.log").read_text(errors="replace")[-3000:])
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError("jupyter lab did not answer within 90 s:\n"
                                     + (tmp_path / "lab.log").read_text(errors="replace")[-3000:])
            time.sleep(0.5)
        yield base, token, work, request.param
    finally:
        try:
            os.killpg(proc.pid, 15)   # the server we started and the kernels it started
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
        log.close()


#: Draws each character in the element's font on a canvas and compares it with U+10FFFD.
_GLYPH_JS = """
([selector, chars]) => {
  const el = document.querySelector(selector);
  if (!el) return {error: 'no element ' + selector};
  const style = getComputedStyle(el);
  const font = `${style.fontStyle} ${style.fontWeight} 40px ${style.fontFamily}`;
  const draw = (ch) => {
    const c = document.createElement('canvas');
    c.width = 64; c.height = 64;
    const ctx = c.getContext('2d');
    ctx.font = font; ctx.fillStyle = '#000'; ctx.textBaseline = 'top';
    ctx.fillText(ch, 4, 4);
    const d = ctx.getImageData(0, 0, 64, 64).data;
    let ink = 0, sig = [];
    for (let i = 3; i < d.length; i += 4) { if (d[i] > 0) ink++; sig.push(d[i]); }
    return {ink, sig: sig.join(',')};
  };
  const none = draw('\\u{10FFFD}');
  const other = draw('\\u{10FFFC}');
  const out = {font, noneInk: none.ink, baselineEqual: none.sig === other.sig, chars: {}};
  for (const ch of chars) { const g = draw(ch); out.chars[ch] = {ink: g.ink, box: g.sig === none.sig}; }
  return out;
}
"""


def _check_glyphs(page, selector: str, chars: str) -> dict:
    got = page.evaluate(_GLYPH_JS, [selector, chars])
    assert "error" not in got, got
    # the method: two code points that no font has draw the same (a box or nothing)
    assert got["baselineEqual"], f"U+10FFFD and U+10FFFC drew differently in {got['font']}: the check cannot work"
    boxes = [ch for ch, g in got["chars"].items() if g["box"] or g["ink"] == 0]
    assert boxes == [], (f"{selector}: {''.join(boxes)} drawn as empty boxes in {got['font']} (no CJK font? "
                         "install fonts-wqy-microhei: `sudo bash scripts/setup_system.sh`)")
    return got


def test_chinese_lesson_in_chinese_jupyterlab(lab, tmp_path):
    from playwright.sync_api import sync_playwright

    base, token, work, edition = lab
    folder, tag, _locale, (ui, words) = EDITIONS[edition]
    lesson = _lesson(work, folder)
    rel = lesson.relative_to(work).as_posix()
    nb = json.loads(lesson.read_text("utf-8"))
    assert nb["metadata"]["course"]["language"] == tag
    # the screenshot: in COURSE_E2E_ARTIFACTS if set (kept), else in pytest's tmp_path, removed
    # after a passing run and kept after a failing one (tmp_path_retention_policy = "failed")
    artifacts = Path(os.environ.get("COURSE_E2E_ARTIFACTS") or tmp_path)
    artifacts.mkdir(parents=True, exist_ok=True)
    print(f"\nbrowser test screenshot: {artifacts} (kept if the test fails; COURSE_E2E_ARTIFACTS keeps it always)")
    shot = artifacts / f"{folder}-lesson-03.png"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=["--disable-dev-shm-usage", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 860}, locale=tag)
            page.goto(f"{base}/lab/tree/{rel}?token={token}", wait_until="domcontentloaded", timeout=90_000)
            try:
                # the interface is in the edition's language: 文件 (File) in the menu bar, 名稱 (Name) in
                # the file browser
                page.locator(ui, has_text=sorted(words)[0]).first.wait_for(timeout=90_000)
                heading = page.locator(".jp-Notebook .jp-RenderedMarkdown h1").first
                heading.wait_for(timeout=90_000)
                # the fonts loaded and one frame drawn with them (a poll, not a fixed sleep: the
                # machine may be busy)
                page.evaluate("document.fonts.ready.then(() => new Promise(r => requestAnimationFrame(() => r(true))))")
            finally:
                page.screenshot(path=str(shot))
            labels = [t.strip() for t in page.locator(ui).all_inner_texts()]
            assert words <= set(labels), f"{ui} not in the {edition} interface: {labels}"
            menu_chars = "".join(dict.fromkeys(CJK.findall("".join(labels))))
            _check_glyphs(page, ui, menu_chars)
            # the lesson's Chinese text in its own fonts: the heading (translated, or not yet),
            # and the first markdown cell's text (its Chinese: the translation, or at least the
            # Chinese names of the key terms that the English lessons carry)
            title = heading.inner_text()
            _check_glyphs(page, ".jp-Notebook .jp-RenderedMarkdown h1",
                          "".join(dict.fromkeys(CJK.findall(title))) or menu_chars)
            body = page.locator(".jp-Notebook .jp-RenderedMarkdown").first.inner_text()
            body_chars = "".join(dict.fromkeys(CJK.findall(body)))
            assert body_chars, f"no Chinese text in the lesson's first cell: {body[:200]!r}"
            _check_glyphs(page, ".jp-Notebook .jp-RenderedMarkdown p", body_chars)
        finally:
            browser.close()
    assert shot.stat().st_size > 10_000, f"screenshot {shot} is (nearly) empty"
