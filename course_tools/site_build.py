"""Build the course website: every edition's lessons, the README overview, the glossary, the
benchmarks, the teacher's grading guide and each assignment's public page, as static HTML that
needs nothing from outside the site (docs/WEBSITE.md).

    .venv/bin/python site/build.py                       # -> site/_build/html
    .venv/bin/python site/build.py --out /srv/www/course \\
        --hub-url https://hub.example.edu --repo-url https://github.com/you/course.git --branch learner

Reads the committed notebooks and never executes them (their outputs are what nbval checks).
Editions: English (``notebooks/``), Simplified Chinese (``zh/notebooks/``) and Traditional
Chinese (``zh-TW/notebooks/``), each built if its folder exists. Assignment pages come from the
released notebooks in ``exercises/`` (``zh/exercises/``, ``zh-TW/exercises/``), never from
``solutions/``.

The stack is Jupyter Book 1's (Sphinx, MyST-NB, sphinx-book-theme), driven here directly: one
Sphinx project per edition, staged in a temporary folder, then MathJax and a subset of the WenQuanYi
Micro Hei font copied into ``_shared/``, and Pagefind's index of every edition in ``pagefind/``.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import posixpath
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
from dataclasses import asdict, dataclass, field
from pathlib import Path

from course_tools.lessons import NAME as LESSON_NAME
from course_tools.lessons import lesson_notebooks

REPO = Path(__file__).resolve().parents[1]
SITE = REPO / "site"  # conf.py, templates and static files (this module moved here from site/build.py)

#: The fonts the CJK web font is cut from, first found wins (Debian's fonts-wqy-microhei).
CJK_FONTS = [Path("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc"),
             Path("/usr/share/fonts/wqy-microhei/wqy-microhei.ttc")]
CJK_RE = re.compile(r"[\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef\u3000-\u303f]")


@dataclass
class Edition:
    code: str            # URL folder and html lang: en, zh-CN, zh-TW
    label: str           # what the language switcher shows
    sphinx_language: str
    lessons: str         # repository folders
    exercises: str
    readme: str

    def present(self) -> bool:
        return bool(lesson_notebooks(REPO / self.lessons))


EDITIONS = [
    Edition("en", "English", "en", "notebooks", "exercises", "README.md"),
    Edition("zh-CN", "简体中文", "zh_CN", "zh/notebooks", "zh/exercises", "README.zh-CN.md"),
    Edition("zh-TW", "繁體中文", "zh_TW", "zh-TW/notebooks", "zh-TW/exercises", "README.zh-TW.md"),
]

#: Words of the site's own making, per edition (the lessons bring their own).
LABELS = {
    "en": {
        "language": "Language", "download": "Download the notebook (.ipynb)",
        "assignment": "Graded assignment: {name}", "no_assignment": "No graded assignment: the exercises are in the lesson",
        "hub": "Open in your class hub", "lesson": "The lesson: {title}", "lessons": "Lessons",
        "assignments": "Assignments", "reference": "Reference", "overview": "Course overview",
        "glossary": "Glossary", "benchmarks": "Benchmarks", "grading": "Grading (for teachers)",
        "licence": "Licence and data", "english_only": "",
        "footer": "Course material under the MIT licence; lesson 12's sentences from Tatoeba "
                  "(www.manythings.org/anki and tatoeba.org), CC-BY 2.0 FR.",
        "search": "Search", "search_title": "Search the course",
        "points": "**{total} points.** The checks you can run in the notebook decide {public} of them; "
                  "{hidden} are decided by hidden tests that run only when your teacher grades "
                  "(the notebook's test cells say which).",
        "how": "Work in the notebook (download it, or open it in your class hub), run its checks, then "
               "check it from a terminal with `course-grade --check {path}`: it reports the public "
               "points out of the real maximum and names the tests with hidden parts. Your teacher "
               "grades the submitted notebook with `course-grade` in a sandbox.",
        "about": "About this assignment", "for_lesson": "Lesson: {links}.",
        "root_title": "Attention and Transformers: an open, offline course",
        "root_blurb": "Twelve lessons from RNN sequence-to-sequence models to the Transformer, GPT, BERT and a Vision Transformer.",
    },
    "zh-CN": {
        "language": "语言", "download": "下载笔记本（.ipynb）",
        "assignment": "评分练习：{name}", "no_assignment": "本课没有评分练习：练习就在课文里",
        "hub": "在班级 JupyterHub 中打开", "lesson": "对应课文：{title}", "lessons": "课文",
        "assignments": "评分练习", "reference": "参考", "overview": "课程概览",
        "glossary": "术语表", "benchmarks": "基准测试（英文）", "grading": "评分（教师用，英文）",
        "licence": "许可与数据来源", "english_only": "本页只有英文版。",
        "footer": "课程材料采用 MIT 许可；第 12 课的句子来自 Tatoeba（www.manythings.org/anki and tatoeba.org），"
                  "CC-BY 2.0 FR。",
        "search": "搜索", "search_title": "搜索课程",
        "points": "**共 {total} 分。** 笔记本里能运行的检查决定其中 {public} 分；{hidden} 分由隐藏测试决定，"
                  "只在教师评分时运行（测试单元格会说明是哪些）。",
        "how": "在笔记本里完成练习（下载它，或在班级 JupyterHub 中打开），运行其中的检查，再在终端里用 "
               "`course-grade --check {path}` 自查：它报告公开部分的得分和满分，并列出含隐藏测试的题目。"
               "教师用 `course-grade` 在沙箱中给提交的笔记本评分。",
        "about": "关于本练习", "for_lesson": "对应课文：{links}。",
        "root_title": "注意力机制与 Transformer：一门开放、可离线学习的课程",
        "root_blurb": "十二节课，从 RNN 序列到序列模型讲到 Transformer、GPT、BERT 和 Vision Transformer。",
    },
    "zh-TW": {
        "language": "語言", "download": "下載筆記本（.ipynb）",
        "assignment": "評分練習：{name}", "no_assignment": "本課沒有評分練習：練習就在課文裡",
        "hub": "在班級 JupyterHub 中開啟", "lesson": "對應課文：{title}", "lessons": "課文",
        "assignments": "評分練習", "reference": "參考", "overview": "課程概覽",
        "glossary": "術語表", "benchmarks": "基準測試（英文）", "grading": "評分（教師用，英文）",
        "licence": "授權與資料來源", "english_only": "本頁只有英文版。",
        "footer": "課程材料採用 MIT 授權；第 12 課的句子來自 Tatoeba（www.manythings.org/anki and tatoeba.org），"
                  "CC-BY 2.0 FR。",
        "search": "搜尋", "search_title": "搜尋課程",
        "points": "**共 {total} 分。** 筆記本裡能執行的檢查決定其中 {public} 分；{hidden} 分由隱藏測試決定，"
                  "只在教師評分時執行（測試儲存格會說明是哪些）。",
        "how": "在筆記本裡完成練習（下載它，或在班級 JupyterHub 中開啟），執行其中的檢查，再在終端機裡用 "
               "`course-grade --check {path}` 自我檢查：它報告公開部分的得分和滿分，並列出含隱藏測試的題目。"
               "教師用 `course-grade` 在沙箱中為提交的筆記本評分。",
        "about": "關於本練習", "for_lesson": "對應課文：{links}。",
        "root_title": "注意力機制與 Transformer：一門開放、可離線學習的課程",
        "root_blurb": "十二節課，從 RNN 序列到序列模型講到 Transformer、GPT、BERT 和 Vision Transformer。",
    },
}

#: Sections of docs/GRADING.md left off the site: how the grader's own isolation is tested and
#: how an assignment's hidden tests are written are for the course's developers, not teachers.
GRADING_DROP = ("### Tests of the isolation", "## Writing an assignment")


class BuildError(RuntimeError):
    """Something the build needs is missing or wrong; the message says what and how to fix it."""


# --- hub links ---------------------------------------------------------------------------------

def nbgitpuller_url(hub_url: str, repo_url: str, branch: str, path: str, target_dir: str | None = None,
                    app: str = "lab") -> str:
    """The link that makes the hub at ``hub_url`` pull ``repo_url`` at ``branch`` into the
    learner's home and open ``path`` (relative to the repository root) in JupyterLab, in
    nbgitpuller's documented scheme:
    ``<hub>/hub/user-redirect/git-pull?repo=..&branch=..&targetpath=<dir>&urlpath=lab/tree/<dir>/<path>``.
    ``<dir>`` is the folder in the learner's home: ``target_dir``, else the repository's name
    without ``.git``. It is always passed as ``targetpath``, because nbgitpuller's own default
    is the URL's last part as it is (``course.git``), which ``urlpath`` would have to repeat."""
    hub = hub_url.rstrip("/")
    if not re.match(r"https?://[^/]+", hub):
        raise BuildError(f"--hub-url {hub_url!r} is not an http(s) URL: give the hub's address, "
                         "e.g. https://hub.example.edu (the one learners log in at)")
    if not repo_url:
        raise BuildError("--hub-url needs --repo-url: the git URL the hub clones the course from "
                         "(e.g. https://github.com/you/attention-course.git)")
    name = target_dir or posixpath.basename(repo_url.rstrip("/"))
    if name.endswith(".git"):
        name = name[:-4]
    if not name or "/" in name or name in (".", ".."):
        raise BuildError(f"cannot use {name!r} as the folder nbgitpuller clones {repo_url!r} into; "
                         "give --hub-target-dir NAME")
    query = [("repo", repo_url), ("branch", branch), ("targetpath", name), ("urlpath", f"{app}/tree/{name}/{path}")]
    return f"{hub}/hub/user-redirect/git-pull?" + urllib.parse.urlencode(query, quote_via=urllib.parse.quote)


def ways_in_html(page: dict, labels: dict, pathto) -> str:
    """The ways in above a lesson or an assignment page: download the notebook, the lesson's
    assignment (or an assignment's lessons), and "Open in your class hub" when the site was
    built with a hub URL. ``pathto(target, resource)`` is Sphinx's relative-link helper."""
    esc = html.escape
    items = []
    if page.get("download"):
        items.append(f'<a class="course-download" href="{esc(pathto(page["download"], 1))}" download>'
                     f'{esc(labels["download"])}</a>')
    if page["kind"] == "lesson":
        if page.get("assignment"):
            items.append(f'<a class="course-assignment" href="{esc(pathto(page["assignment"], 0))}">'
                         f'{esc(labels["assignment"].format(name=page["assignment_name"]))}</a>')
        else:
            items.append(f'<span class="course-assignment none">{esc(labels["no_assignment"])}</span>')
    for doc, title in page.get("lessons") or []:
        items.append(f'<a class="course-lesson" href="{esc(pathto(doc, 0))}">'
                     f'{esc(labels["lesson"].format(title=title))}</a>')
    if page.get("hub"):
        items.append(f'<a class="course-hub" href="{esc(page["hub"])}">{esc(labels["hub"])}</a>')
    if not items:
        return ""
    return '<nav class="course-ways-in" data-pagefind-ignore="all">' + "".join(items) + "</nav>"


# --- reading the course -------------------------------------------------------------------------

def read_nb(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise BuildError(f"{path.relative_to(REPO)}: not a readable notebook ({exc}); "
                         "restore it with git checkout") from exc


def nb_title(nb: dict, fallback: str) -> str:
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "markdown":
            for line in "".join(cell.get("source", "")).splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return fallback


def lessons_of(ed: Edition) -> list[Path]:
    return lesson_notebooks(REPO / ed.lessons)


def assignments_of(ed: Edition) -> dict[str, Path]:
    """Assignment name -> its released notebook (one per assignment folder)."""
    out: dict[str, Path] = {}
    root = REPO / ed.exercises
    if not root.is_dir():
        return out
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith("lesson")):
        nbs = sorted(folder.glob("*.ipynb"))
        if len(nbs) != 1:
            raise BuildError(f"{folder.relative_to(REPO)}: expected one released notebook, found {len(nbs)}; "
                             "regenerate with bash scripts/generate_exercises.sh")
        out[folder.name] = nbs[0]
    return out


def assignment_for(lesson: Path, assignments: dict[str, Path]) -> str | None:
    match = LESSON_NAME.fullmatch(lesson.name)
    if match is None:
        raise ValueError(f"{lesson.name!r} is not a lesson notebook name (NN_name.ipynb)")
    number = match["number"]
    hits = [a for a in assignments if a.startswith(f"lesson{number}_")]
    return hits[0] if hits else None


def points_of(nb: dict) -> tuple[float, float, float]:
    """(total, decided by public checks, decided by hidden tests) of a released notebook."""
    hidden = set((nb.get("metadata", {}).get("course_grade") or {}).get("hidden_tests") or [])
    total = public = 0.0
    for cell in nb["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader") or {}
        if cell.get("cell_type") == "code" and meta.get("grade") and not meta.get("solution"):
            pts = float(meta.get("points", 0) or 0)
            total += pts
            if meta.get("grade_id") not in hidden:
                public += pts
    return total, public, total - public


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


# --- markdown staging ---------------------------------------------------------------------------

LINK = re.compile(r"(!?)\[([^\]\n]*)\]\(([^)\s]+)\)")


def rewrite_links(text: str, source: str, page: str, pages: dict[str, str]) -> str:
    """Markdown links of ``source`` (a repository path) for the page ``page`` (a docname):
    a link to a file the site has as a page points at that page; a link to any other repository
    file keeps its text only (the site does not carry the repository); web links stay."""
    def sub(m: re.Match) -> str:
        bang, label, target = m.groups()
        if re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith("#"):
            return m.group(0)
        path, _, anchor = target.partition("#")
        repo_path = posixpath.normpath(posixpath.join(posixpath.dirname(source), path))
        if repo_path in pages:
            rel = posixpath.relpath(pages[repo_path], posixpath.dirname(page) or ".")
            return f"{bang}[{label}]({rel}{'#' + anchor if anchor else ''})"
        return label
    return LINK.sub(sub, text)


def link_code_paths(text: str, page: str, pages: dict[str, str]) -> str:
    """`notebooks/X.ipynb` and `lessonNN_name` written as code in the README become links."""
    def sub(m: re.Match) -> str:
        code = m.group(1)
        key = code if code in pages else f"assignment:{code}"
        if key not in pages:
            return m.group(0)
        rel = posixpath.relpath(pages[key], posixpath.dirname(page) or ".")
        return f"[`{code}`]({rel})"
    return re.sub(r"(?<!\[)`([A-Za-z0-9_./-]+)`", sub, text)


def drop_sections(text: str, headings: tuple[str, ...]) -> str:
    """Removes each section that starts with one of ``headings`` (up to the next heading of the
    same or a higher level)."""
    out, skipping, level = [], False, 0
    fence = False
    for line in text.splitlines(keepends=True):
        if line.lstrip().startswith("```"):
            fence = not fence
        m = None if fence else re.match(r"(#+) ", line)
        if m and skipping and len(m.group(1)) <= level:
            skipping = False
        if m and any(line.startswith(h + "\n") or line.rstrip() == h or line.startswith(h + " ")
                     for h in headings):
            skipping, level = True, len(m.group(1))
        if not skipping:
            out.append(line)
    return "".join(out)


def glossary_with_anchors(text: str) -> str:
    """docs/GLOSSARY.md with an anchor per term: each row of the terms table gets
    ``id="term-<slug>"`` on its English name, which links to itself; the rows of the
    translation's word list ("Words of the translation", which names some terms again)
    get ``id="usage-<slug>"``, so no two rows share an anchor."""
    out = []
    prefix = "term"
    for line in text.splitlines():
        if line.startswith("## "):
            prefix = "usage" if "Words of the translation" in line else "term"
        m = re.match(r"\| ([^|]+?) \| (.*)$", line)
        if m and not line.startswith("| English") and not line.startswith("| ---"):
            term = m.group(1).strip()
            slug = term_slug(term)
            line = (f'| <a class="{prefix}" id="{prefix}-{slug}" href="#{prefix}-{slug}">{html.escape(term)}</a> '
                    f'| {m.group(2)}')
        out.append(line)
    return "\n".join(out) + "\n"


def term_slug(term: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", term.lower()).strip("-")
    return slug or "x" + term.encode("utf-8").hex()


# --- one edition ----------------------------------------------------------------------------------

@dataclass
class Page:
    docname: str
    kind: str                       # lesson, assignment, doc
    source: str = ""                # repository path it is built from
    download: str | None = None     # site path of the notebook to download (relative to the edition)
    hub: str | None = None          # nbgitpuller link
    assignment: str | None = None   # docname of the lesson's assignment page
    assignment_name: str | None = None
    lessons: list[tuple[str, str]] = field(default_factory=list)  # (docname, title) of an assignment's lessons
    english_only: bool = False


def stage_edition(ed: Edition, editions: list[Edition], stage: Path, opts: argparse.Namespace) -> dict:
    """Writes the Sphinx source of one edition into ``stage``; returns its context (pages)."""
    labels = LABELS[ed.code]
    src = stage / "src"
    extra = stage / "extra"
    src.mkdir(parents=True)
    extra.mkdir(parents=True)
    lessons = lessons_of(ed)
    assignments = assignments_of(ed)
    if not lessons:
        raise BuildError(f"{ed.lessons}/ has no lesson notebooks")

    def hub_link(repo_path: str) -> str | None:
        if not opts.hub_url:
            return None
        return nbgitpuller_url(opts.hub_url, opts.repo_url, opts.branch, repo_path, opts.hub_target_dir)

    # repository path -> docname (+ the source suffix MyST resolves), for links between pages
    pages_map: dict[str, str] = {}
    for lesson in lessons:
        pages_map[f"{ed.lessons}/{lesson.name}"] = f"lessons/{lesson.stem}.ipynb"
    for name in assignments:
        pages_map[f"assignment:{name}"] = f"assignments/{name}.ipynb"
    for repo_path, doc in ((ed.readme, "index.md"), ("docs/GLOSSARY.md", "glossary.md"),
                           ("docs/BENCHMARKS.md", "benchmarks.md"), ("docs/GRADING.md", "grading.md"),
                           ("LICENSE", "licence.md")):
        pages_map[repo_path] = doc
    for other in editions:   # README.zh-CN.md and the like: the other edition's overview
        pages_map.setdefault(other.readme, "index.md")
    if ed.code != "en":      # the English lesson paths the Chinese README names
        for lesson in lessons:
            pages_map.setdefault(f"notebooks/{lesson.name}", f"lessons/{lesson.stem}.ipynb")

    pages: list[Page] = []
    lesson_titles: dict[str, str] = {}

    # lessons: the committed notebooks, outputs and all
    (src / "lessons").mkdir()
    (extra / "notebooks").mkdir()
    for lesson in lessons:
        nb = read_nb(lesson)
        title = nb_title(nb, lesson.stem)
        lesson_titles[lesson.stem] = title
        repo_path = f"{ed.lessons}/{lesson.name}"
        for cell in nb["cells"]:
            if cell.get("cell_type") == "markdown":
                cell["source"] = rewrite_links("".join(cell["source"]), repo_path, f"lessons/{lesson.stem}", pages_map)
        (src / "lessons" / lesson.name).write_text(json.dumps(nb, ensure_ascii=False), encoding="utf-8")
        shutil.copy2(lesson, extra / "notebooks" / lesson.name)
        a = assignment_for(lesson, assignments)
        pages.append(Page(f"lessons/{lesson.stem}", "lesson", repo_path, f"notebooks/{lesson.name}",
                          hub_link(repo_path), f"assignments/{a}" if a else None, a))

    # assignments: the released notebooks (exercises/), with a note on what is graded and how
    (src / "assignments").mkdir()
    for name, path in assignments.items():
        nb = read_nb(path)
        repo_path = path.relative_to(REPO).as_posix()
        total, public, hidden = points_of(nb)
        mine = [l for l in lessons if assignment_for(l, assignments) == name]
        links = ", ".join(f"[{lesson_titles[l.stem]}](../lessons/{l.name})" for l in mine)
        note = [f"```{{admonition}} {labels['about']}", ":class: note", ""]
        if links:
            note += [labels["for_lesson"].format(links=links), ""]
        note += [labels["points"].format(total=_num(total), public=_num(public), hidden=_num(hidden)), "",
                 labels["how"].format(path=repo_path), "```"]
        for cell in nb["cells"]:
            if cell.get("cell_type") == "markdown":
                cell["source"] = rewrite_links("".join(cell["source"]), repo_path, f"assignments/{name}", pages_map)
        # after the notebook's title, so the page keeps it as its heading
        first_md = next((i for i, c in enumerate(nb["cells"]) if c.get("cell_type") == "markdown"), -1)
        nb["cells"].insert(first_md + 1, {"cell_type": "markdown", "metadata": {}, "source": "\n".join(note)})
        (src / "assignments" / f"{name}.ipynb").write_text(json.dumps(nb, ensure_ascii=False), encoding="utf-8")
        dest = extra / "exercises" / name
        dest.mkdir(parents=True)
        shutil.copy2(path, dest / path.name)
        pages.append(Page(f"assignments/{name}", "assignment", repo_path, f"exercises/{name}/{path.name}",
                          hub_link(repo_path), lessons=[(f"lessons/{l.stem}", lesson_titles[l.stem]) for l in mine]))

    # documents
    readme = REPO / ed.readme
    if not readme.is_file():
        readme = REPO / "README.md"
    text = rewrite_links(readme.read_text(encoding="utf-8"), ed.readme, "index", pages_map)
    text = link_code_paths(text, "index", pages_map)
    toc = ["", "```{toctree}", f":caption: {labels['lessons']}", ":hidden:", ""]
    toc += [f"lessons/{l.stem}" for l in lessons] + ["```", ""]
    if assignments:
        toc += ["```{toctree}", f":caption: {labels['assignments']}", ":hidden:", ""]
        toc += [f"assignments/{a}" for a in assignments] + ["```", ""]
    toc += ["```{toctree}", f":caption: {labels['reference']}", ":hidden:", "",
            "glossary", "benchmarks", "grading", "licence", "```", ""]
    (src / "index.md").write_text(text + "\n".join(toc), encoding="utf-8")
    pages.append(Page("index", "doc", ed.readme))

    glossary = rewrite_links((REPO / "docs/GLOSSARY.md").read_text(encoding="utf-8"), "docs/GLOSSARY.md",
                             "glossary", pages_map)
    (src / "glossary.md").write_text(glossary_with_anchors(glossary), encoding="utf-8")
    pages.append(Page("glossary", "doc", "docs/GLOSSARY.md"))

    english_note = f"```{{note}}\n{labels['english_only']}\n```\n\n" if labels["english_only"] else ""
    for doc, repo_path, drop in (("benchmarks", "docs/BENCHMARKS.md", ()), ("grading", "docs/GRADING.md", GRADING_DROP)):
        text = (REPO / repo_path).read_text(encoding="utf-8")
        text = rewrite_links(drop_sections(text, drop), repo_path, doc, pages_map)
        first, _, rest = text.partition("\n")
        (src / f"{doc}.md").write_text(f"{first}\n\n{english_note}{rest}", encoding="utf-8")
        pages.append(Page(doc, "doc", repo_path, english_only=bool(english_note)))

    data_readme = (REPO / "course_lib/data_files/README.md").read_text(encoding="utf-8")
    m = re.search(r"^## Source and licence\n(.*?)(?=^## )", data_readme, re.S | re.M)
    if not m:
        raise BuildError("course_lib/data_files/README.md has no '## Source and licence' section: the site "
                         "states the data's attribution from it; restore the section")
    lic = (REPO / "LICENSE").read_text(encoding="utf-8")
    licence_md = (f"# {LABELS[ed.code]['licence']}\n\n"
                  "## The course (LICENSE)\n\nThe lessons, the library, the grader and this website are under the "
                  "MIT licence:\n\n```text\n" + lic.strip() + "\n```\n\n"
                  "## Lesson 12's sentences (course_lib/data_files/README.md)\n" + m.group(1).replace("`LICENSE-data` in this folder", "`course_lib/data_files/LICENSE-data` in the repository"))
    (src / "licence.md").write_text(licence_md, encoding="utf-8")
    pages.append(Page("licence", "doc", "LICENSE"))

    context = {
        "edition": asdict(ed),
        "editions": [asdict(e) for e in editions],
        "labels": labels,
        "pages": {p.docname: asdict(p) for p in pages},
        "site_dir": str(SITE),
        "repo": str(REPO),
        "extra": str(extra),
        "hub_url": opts.hub_url or "",
    }
    (src / "_course.json").write_text(json.dumps(context, ensure_ascii=False, indent=1), encoding="utf-8")
    shutil.copy2(SITE / "conf.py", src / "conf.py")
    return context


def run_sphinx(src: Path, out: Path, doctrees: Path, jobs: int, quiet: bool) -> None:
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-E", "-j", str(jobs), "-d", str(doctrees),
           str(src), str(out)]
    if quiet:
        cmd.insert(3, "-q")
    res = subprocess.run(cmd, cwd=src, capture_output=True, text=True)
    warnings = [l for l in res.stderr.splitlines() if "WARNING" in l or "ERROR" in l]
    if res.returncode != 0:
        raise BuildError(f"sphinx failed on {src.name} ({res.returncode}):\n{res.stdout[-3000:]}\n{res.stderr[-5000:]}")
    if warnings:
        raise BuildError("sphinx warned (the site must build clean; fix the source or the link):\n"
                         + "\n".join(warnings[:40]))


# --- shared assets ------------------------------------------------------------------------------

#: The parts of MathJax 3 a page loads: the TeX-to-CommonHTML component, the TeX extensions it
#: autoloads, its fonts, and the menu's and accessibility pieces it fetches on demand.
MATHJAX_PARTS = ["tex-chtml.js", "input/tex/extensions", "output/chtml/fonts/woff-v2", "ui", "a11y", "sre"]


def vendor_mathjax(shared: Path) -> None:
    try:
        import importlib.util
        spec = importlib.util.find_spec("sphinx-mathjax-offline")
        if spec is None or not spec.submodule_search_locations:
            raise ImportError
        base = Path(list(spec.submodule_search_locations)[0]) / "static" / "mathjax"
    except (ImportError, ValueError):
        raise BuildError("MathJax is not installed: the site ships it from the sphinx-mathjax-offline package; "
                         "install the site's tools with: .venv/bin/pip install -e '.[site]'") from None
    dest = shared / "mathjax"
    for part in MATHJAX_PARTS:
        s = base / part
        if s.is_dir():
            shutil.copytree(s, dest / part)
        elif s.is_file():
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copy2(s, dest / part)
    if not (dest / "tex-chtml.js").is_file():
        raise BuildError(f"{base}/tex-chtml.js is missing: reinstall sphinx-mathjax-offline")


def cjk_font(shared: Path, out: Path) -> int:
    """Cuts the characters the site uses (CJK and full-width) out of WenQuanYi Micro Hei into
    ``_shared/fonts/course-cjk.woff2``; returns the number of characters."""
    font = next((f for f in CJK_FONTS if f.is_file()), None)
    if font is None:
        raise BuildError("no CJK font to serve: install Debian's fonts-wqy-microhei "
                         "(sudo apt-get install fonts-wqy-microhei, or bash scripts/setup_system.sh)")
    chars: set[str] = set()
    for f in out.rglob("*.html"):
        chars.update(CJK_RE.findall(f.read_text(encoding="utf-8", errors="replace")))
    for labels in LABELS.values():
        for v in labels.values():
            chars.update(CJK_RE.findall(v))
    chars.update("简体中文繁體")
    try:
        from fontTools import subset
    except ImportError:
        raise BuildError("fonttools is missing: .venv/bin/pip install -e '.[site]'") from None
    import logging
    logging.getLogger("fontTools.subset").setLevel(logging.ERROR)   # "FFTM NOT subset": a table it drops
    dest = shared / "fonts"
    dest.mkdir(parents=True)
    options = subset.Options()
    options.flavor = "woff2"
    options.font_number = 0
    options.layout_features = ["*"]
    options.name_IDs = ["*"]
    options.notdef_outline = True
    f = subset.load_font(str(font), options, dontLoadGlyphNames=True)
    sub = subset.Subsetter(options)
    sub.populate(text="".join(sorted(chars)))
    sub.subset(f)
    subset.save_font(f, str(dest / "course-cjk.woff2"), options)
    return len(chars)


ROOT_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<link rel="stylesheet" href="_shared/root.css">
<link rel="icon" href="data:,">
</head>
<body>
<main data-pagefind-ignore="all">
{blocks}
<p class="licence"><a href="en/licence.html">MIT licence; lesson 12's data: Tatoeba, CC-BY 2.0 FR</a></p>
</main>
</body>
</html>
"""


def root_page(out: Path, editions: list[Edition]) -> None:
    blocks = []
    for ed in editions:
        lab = LABELS[ed.code]
        blocks.append(f'<section lang="{ed.code}"><h1><a href="{ed.code}/index.html">{html.escape(lab["root_title"])}</a></h1>'
                      f'<p>{html.escape(lab["root_blurb"])}</p><p><a class="edition" href="{ed.code}/index.html">'
                      f'{html.escape(ed.label)}</a></p></section>')
    (out / "index.html").write_text(ROOT_PAGE.format(title=html.escape(LABELS["en"]["root_title"]),
                                                     blocks="\n".join(blocks)), encoding="utf-8")
    shutil.copy2(SITE / "static" / "root.css", out / "_shared" / "root.css")


def run_pagefind(out: Path) -> None:
    cmd = [sys.executable, "-m", "pagefind", "--site", str(out), "--root-selector", "article.bd-article",
           "--exclude-selectors", "a.headerlink", "--output-subdir", "pagefind"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise BuildError("pagefind failed (install the site's tools: .venv/bin/pip install -e '.[site]'):\n"
                         + res.stdout[-2000:] + res.stderr[-2000:])


def dir_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _children_cpu() -> float:
    import resource
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def build(opts: argparse.Namespace) -> dict:
    t0, c0, k0 = time.monotonic(), time.process_time(), _children_cpu()
    editions = [e for e in EDITIONS if e.present()]
    if opts.editions:
        wanted = opts.editions.split(",")
        unknown = set(wanted) - {e.code for e in EDITIONS}
        if unknown:
            raise BuildError(f"--editions: unknown {sorted(unknown)}; choose from {[e.code for e in EDITIONS]}")
        missing = [w for w in wanted if w not in {e.code for e in editions}]
        if missing:
            raise BuildError(f"--editions: {missing} have no lesson notebooks in this checkout")
        editions = [e for e in editions if e.code in wanted]
    if opts.hub_url and not opts.repo_url:
        raise BuildError("--hub-url needs --repo-url: the git URL the hub clones the course from")
    out = Path(opts.out).resolve()
    if out.exists():
        if not (out / ".course-site").is_file() and any(out.iterdir()):
            raise BuildError(f"{out} exists and is not a site this script built: choose an empty or new --out")
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / ".course-site").write_text("built by site/build.py; the folder is replaced on each build\n")
    stage_root = Path(tempfile.mkdtemp(prefix="course-site-"))
    try:
        shared = out / "_shared"
        shared.mkdir()
        vendor_mathjax(shared)
        for ed in editions:
            stage = stage_root / ed.code
            stage_edition(ed, editions, stage, opts)
            # MyST-NB writes the notebooks' outputs beside the output folder (../jupyter_execute):
            # build in the staging folder, then move the edition into the site
            run_sphinx(stage / "src", stage / "html", stage / "doctrees", opts.jobs, quiet=not opts.verbose)
            shutil.move(stage / "html", out / ed.code)
            print(f"  {ed.code}: built", file=sys.stderr)
        root_page(out, editions)
        nchars = cjk_font(shared, out)
        (out / ".nojekyll").write_text("")   # GitHub Pages: serve _static/ and _shared/ as they are
        run_pagefind(out)
    finally:
        if not opts.keep_staging:
            shutil.rmtree(stage_root, ignore_errors=True)
        else:
            print(f"staging kept in {stage_root}", file=sys.stderr)
    info = {
        "editions": [e.code for e in editions],
        "pages": len(list(out.rglob("*.html"))),
        "bytes": dir_size(out),
        "cjk_characters": nchars,
        "hub_url": opts.hub_url or None,
        "repo_url": opts.repo_url or None,
        "branch": opts.branch,
        "wall_seconds": round(time.monotonic() - t0, 1),
        "cpu_seconds": round(time.process_time() - c0 + _children_cpu() - k0, 1),
    }
    (out / "build-info.json").write_text(json.dumps(info, indent=1) + "\n")
    return info


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=str(SITE / "_build" / "html"), help="output folder (replaced; default site/_build/html)")
    p.add_argument("--hub-url", default=os.environ.get("COURSE_HUB_URL", ""),
                   help="your class hub's URL: every lesson and assignment page gets an 'Open in your class hub' "
                        "nbgitpuller link (none without it); env COURSE_HUB_URL")
    p.add_argument("--repo-url", default=os.environ.get("COURSE_REPO_URL", ""),
                   help="the git URL the hub clones the course from (needed with --hub-url); env COURSE_REPO_URL")
    p.add_argument("--branch", default=os.environ.get("COURSE_BRANCH", "learner"),
                   help="the branch the hub pulls (default learner: the lessons and released assignments without "
                        "solutions/, made by site/learner_branch.py); env COURSE_BRANCH")
    p.add_argument("--hub-target-dir", default=None,
                   help="folder in the learner's home to clone into (default: the repository's name)")
    p.add_argument("--editions", default="", help="comma-separated subset of en,zh-CN,zh-TW (default: every one present)")
    p.add_argument("--jobs", type=int, default=1, help="Sphinx processes per edition (default 1)")
    p.add_argument("--keep-staging", action="store_true", help="keep the generated Sphinx sources (debugging)")
    p.add_argument("-v", "--verbose", action="store_true")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    try:
        info = build(opts)
    except BuildError as exc:
        print(f"site/build.py: {exc}", file=sys.stderr)
        return 2
    print(f"site built in {opts.out}: {info['pages']} pages, {info['bytes'] / 1e6:.1f} MB, editions "
          f"{', '.join(info['editions'])}, {info['wall_seconds']} s ({info['cpu_seconds']} s CPU)"
          + (f"; hub links to {info['hub_url']}" if info["hub_url"] else "; no hub links (no --hub-url)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
