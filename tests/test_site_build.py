"""The course website's build script, piece by piece (site/build.py; docs/WEBSITE.md).

Fast: no Sphinx run. The built site itself is checked by tests/test_site.py.
"""

from __future__ import annotations

import importlib.util
import json
import re
import urllib.parse
from pathlib import Path

import pytest
from course_tools import learner_branch
from course_tools import site_build as build

TIER = "fast"  # course_tools/tiers.py

REPO = Path(__file__).resolve().parents[1]


# --- "Open in your class hub": nbgitpuller's link scheme ------------------------------------------

def test_nbgitpuller_url_follows_the_documented_scheme():
    url = build.nbgitpuller_url("https://hub.example.edu/", "https://github.com/you/attention-course.git",
                                "main", "notebooks/03_scoring_functions.ipynb")
    parts = urllib.parse.urlsplit(url)
    assert (parts.scheme, parts.netloc, parts.path) == ("https", "hub.example.edu", "/hub/user-redirect/git-pull")
    q = dict(urllib.parse.parse_qsl(parts.query))
    assert q == {"repo": "https://github.com/you/attention-course.git", "branch": "main",
                 "targetpath": "attention-course", "urlpath": "lab/tree/attention-course/notebooks/03_scoring_functions.ipynb"}
    # every reserved character of the values is escaped (a '/' or ':' in a value is fine, '&' is not)
    assert "&" not in urllib.parse.unquote(parts.query.split("urlpath=")[1])


def test_nbgitpuller_url_target_dir_and_local_repository():
    url = build.nbgitpuller_url("http://127.0.0.1:8000", "/srv/git/course.git", "site", "zh/notebooks/02_x.ipynb",
                                target_dir="my-course")
    q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query))
    assert q == {"repo": "/srv/git/course.git", "branch": "site", "targetpath": "my-course",
                 "urlpath": "lab/tree/my-course/zh/notebooks/02_x.ipynb"}
    # without a target: the repository's name without .git, passed as targetpath (nbgitpuller's
    # own default would be "course.git", the URL's last part as it is)
    q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(
        build.nbgitpuller_url("http://h", "/srv/git/course.git/", "main", "a.ipynb")).query))
    assert q["targetpath"] == "course" and q["urlpath"] == "lab/tree/course/a.ipynb"


def test_nbgitpuller_reads_the_parameters_the_links_send():
    """The query keys the site sends are the ones nbgitpuller's /git-pull handler reads."""
    spec = importlib.util.find_spec("nbgitpuller")
    if spec is None:
        pytest.skip("nbgitpuller is not installed (the hub extra: .venv/bin/pip install -e '.[hub]')")
    handlers = (Path(spec.origin).parent / "handlers.py").read_text()
    for key in ("repo", "branch", "urlpath", "targetpath"):
        assert f"get_argument('{key}'" in handlers or f'get_argument("{key}"' in handlers, key


@pytest.mark.parametrize("hub, repo, fragment", [
    ("hub.example.edu", "https://x/y.git", "not an http(s) URL"),
    ("https://hub.example.edu", "", "needs --repo-url"),
    ("https://hub.example.edu", "https://x/.git", "give --hub-target-dir"),
])
def test_nbgitpuller_url_refuses_bad_input(hub, repo, fragment):
    with pytest.raises(build.BuildError, match=re.escape(fragment)):
        build.nbgitpuller_url(hub, repo, "main", "notebooks/a.ipynb")


def test_ways_in_without_a_hub_url_has_no_hub_link():
    labels = build.LABELS["en"]
    page = {"kind": "lesson", "download": "notebooks/03_x.ipynb", "assignment": "assignments/lesson03_scoring",
            "assignment_name": "lesson03_scoring", "hub": None, "lessons": []}
    pathto = lambda target, resource=0: ("../" + target) if resource else f"../{target}.html"  # noqa: E731
    html = build.ways_in_html(page, labels, pathto)
    assert 'href="../notebooks/03_x.ipynb" download' in html
    assert 'href="../assignments/lesson03_scoring.html"' in html
    assert "course-hub" not in html and "git-pull" not in html
    page["hub"] = "https://hub.example.edu/hub/user-redirect/git-pull?repo=r&amp;x"
    assert 'class="course-hub"' in build.ways_in_html(page, labels, pathto)


# --- staging the pages -------------------------------------------------------------------------

def test_links_to_site_pages_are_rewritten_and_others_keep_their_text():
    pages = {"docs/GLOSSARY.md": "glossary.md", "notebooks/03_x.ipynb": "lessons/03_x.ipynb",
             "README.zh-CN.md": "index.md"}
    text = ("See [the glossary](docs/GLOSSARY.md#attention), [lesson 3](notebooks/03_x.ipynb), "
            "[中文](README.zh-CN.md), [the grader](course_grader/cli.py) and [D2L](https://d2l.ai).")
    out = build.rewrite_links(text, "README.md", "index", pages)
    assert "[the glossary](glossary.md#attention)" in out
    assert "[lesson 3](lessons/03_x.ipynb)" in out
    assert "[中文](index.md)" in out
    assert "the grader" in out and "course_grader/cli.py" not in out
    assert "[D2L](https://d2l.ai)" in out
    # from a page one folder down, relative to that page
    assert "[lesson 3](../lessons/03_x.ipynb)" in build.rewrite_links("[lesson 3](../notebooks/03_x.ipynb)",
                                                                     "docs/X.md", "assignments/a", pages)


def test_drop_sections_removes_a_section_and_its_subsections_only():
    text = "# T\nintro\n## Keep\na\n## Writing an assignment\nsecret\n### sub\nmore\n## After\nb\n"
    out = build.drop_sections(text, ("## Writing an assignment",))
    assert out == "# T\nintro\n## Keep\na\n## After\nb\n"


def test_grading_page_keeps_the_teacher_sections_and_drops_the_developer_ones():
    text = (REPO / "docs" / "GRADING.md").read_text(encoding="utf-8")
    for heading in build.GRADING_DROP:
        assert heading in text.splitlines(), f"docs/GRADING.md has no '{heading}' any more: update GRADING_DROP"
    out = build.drop_sections(text, build.GRADING_DROP)
    assert "## The teacher's workflow, end to end" in out
    assert not any(h in out.splitlines() for h in build.GRADING_DROP)


def test_glossary_has_one_anchor_per_term():
    text = (REPO / "docs" / "GLOSSARY.md").read_text(encoding="utf-8")
    out = build.glossary_with_anchors(text)
    tables: dict[str, list[str]] = {"term": [], "usage": []}
    prefix = "term"
    for line in text.splitlines():
        if line.startswith("## "):
            prefix = "usage" if "Words of the translation" in line else "term"
        if line.startswith("| ") and not line.startswith(("| English", "| ---")):
            tables[prefix].append(line.split("|")[1].strip())
    assert len(tables["term"]) > 50
    ids = [f"{prefix}-{build.term_slug(t)}" for prefix, terms in tables.items() for t in terms]
    assert len(set(ids)) == len(ids), "two rows share an anchor"
    for anchor in ids:
        assert out.count(f'id="{anchor}"') == 1, anchor
    assert out.count('class="term" id="term-') == len(tables["term"])
    assert out.count('class="usage" id="usage-') == len(tables["usage"])


def test_assignment_points_split_public_and_hidden():
    nb = json.loads((REPO / "exercises" / "lesson03_scoring" / "scoring.ipynb").read_text(encoding="utf-8"))
    total, public, hidden = build.points_of(nb)
    assert total == public + hidden and hidden > 0 and public > 0
    graded = sum(c["metadata"]["nbgrader"].get("points", 0) for c in nb["cells"]
                 if c["metadata"].get("nbgrader", {}).get("grade") and not c["metadata"]["nbgrader"].get("solution"))
    assert total == graded


def test_every_present_edition_is_built_and_an_unknown_one_is_refused(tmp_path):
    present = [e.code for e in build.EDITIONS if e.present()]
    assert "en" in present and "zh-CN" in present
    assert ("zh-TW" in present) == (REPO / "zh-TW" / "notebooks").is_dir()
    opts = build.parse_args(["--out", str(tmp_path / "out"), "--editions", "en,fr"])
    with pytest.raises(build.BuildError, match="unknown"):
        build.build(opts)
    opts = build.parse_args(["--out", str(tmp_path / "out"), "--hub-url", "https://hub.example.edu"])
    with pytest.raises(build.BuildError, match="--repo-url"):
        build.build(opts)


def test_build_refuses_to_replace_a_folder_it_did_not_make(tmp_path):
    (tmp_path / "precious.txt").write_text("keep me")
    with pytest.raises(build.BuildError, match="not a site this script built"):
        build.build(build.parse_args(["--out", str(tmp_path)]))
    assert (tmp_path / "precious.txt").read_text() == "keep me"


# --- the branch the hub links pull ---------------------------------------------------------------

@pytest.mark.slow
def test_learner_branch_has_the_lessons_and_no_solutions(tmp_path):
    import subprocess

    lb = learner_branch
    bare = tmp_path / "course.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(REPO), str(bare)], check=True)
    commit = lb.make_learner_branch(str(bare), "HEAD", "learner")
    assert commit
    names = subprocess.run(["git", "-C", str(bare), "ls-tree", "-r", "--name-only", "learner"],
                           capture_output=True, text=True, check=True).stdout.split()
    assert "notebooks/03_scoring_functions.ipynb" in names and "exercises/lesson03_scoring/scoring.ipynb" in names
    assert not [n for n in names if "solutions/" in n or n.endswith("mistakes.py")]
    blob = subprocess.run(["git", "-C", str(bare), "grep", "-l", "BEGIN HIDDEN TESTS", "learner"],
                          capture_output=True, text=True).stdout
    assert blob == "", f"hidden tests in the learner branch: {blob}"
    # again: nothing changed, no new commit; the branch only ever moves forward
    assert lb.make_learner_branch(str(bare), "HEAD", "learner") is None
    # refused: a source that would carry solutions (a changed path list)
    lb.LEARNER_PATHS = [*lb.LEARNER_PATHS, "solutions"]
    with pytest.raises(lb.BranchError, match="instructor files"):
        lb.make_learner_branch(str(bare), "HEAD", "learner2")
