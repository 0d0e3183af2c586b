"""Issue 29 (grader, fourth edition): identity and sinks.

Where learner bytes leave the grader, each through one guard (course_grader.sinks): the
teacher's terminal, the CSV files, the HTML pages, the notebooks written for nbgrader's
Formgrader; and who a learner is (ids validated once, when the submissions are read, never
transformed, never shadowed) and where the answer key may come from. The class-run parts
here use the real command line (``cli.main``) with the grading itself replaced by a stand-in
that records what it was given (no sandbox: fast tier, except the nbgrader database ones);
tests/test_grading_attacks_fourth.py grades the same attacks for real in the sandbox.
Each test fails on the grader of commit f5ff00a (see the commit message).
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from course_grader import cli, sinks
from course_grader.notebook import Assignment, NotebookError
from course_grader.runner import NotebookResult, Status, SubmissionResult
from course_grader.runner import TestOutcome as Outcome
from course_tools.grading_dev.points import assignment_points, fmt
from course_tools.grading_dev.testing import write_notebook

TIER = "fast"  # course_tools/tiers.py

ROOT = Path(__file__).resolve().parents[1]
SOLUTION = ROOT / "solutions" / "lesson03_scoring"
NAME = "lesson03_scoring"
#: lesson 3's points from its instructor notebook: full marks (auto) and the maximum (with the written cells)
POINTS = assignment_points(SOLUTION)

#: What a hostile string puts on a terminal: OSC 52 (write the clipboard), cursor up + erase
#: line + a forged line, a carriage return, a C1 CSI, a bidi override.
ESCAPES = ("\x1b]52;c;ZWNobyBwd25lZA==\x07\x1b[1A\x1b[2K  b_victim: 0/15  refused\r\x9b2J"
           "\u202etxt.exe")
RAW = ("\x1b", "\x07", "\r", "\x9b", "\u202e")


def _no_raw_escape(text: str) -> None:
    for ch in RAW:
        assert ch not in text, (ch, text[:300])


# -- the terminal sink ----------------------------------------------------------------------

def test_terminal_guard_shows_every_control_and_keeps_text():
    shown = sinks.terminal("alice " + ESCAPES)
    _no_raw_escape(shown)
    assert "\n" not in shown and shown.startswith("alice ")
    assert "\\x1b]52;c;" in shown and "\\u202e" in shown  # visible, not silently dropped
    assert sinks.terminal("jos\udce9") == "jos\\xe9"  # a byte that was not UTF-8, as the byte
    assert sinks.terminal("José 王") == "José 王"
    block = sinks.terminal_block("line 1\nline 2 " + ESCAPES)
    assert block.count("\n") == 1
    _no_raw_escape(block)
    assert sinks.terminal(sinks.terminal(ESCAPES)) == sinks.terminal(ESCAPES)  # idempotent


# -- identity: ids validated once, never shadowed, never merged ------------------------------

def _learner(sub: Path, name, nb: str = "scoring.ipynb", text: str | None = None) -> Path:
    folder = os.path.join(os.fsencode(sub), name if isinstance(name, bytes) else os.fsencode(name))
    os.makedirs(folder, exist_ok=True)
    path = Path(os.fsdecode(folder)) / nb
    path.write_text(text if text is not None else (SOLUTION / "scoring.ipynb").read_text())
    return path


def test_two_submissions_claiming_one_id_are_refused_naming_both(tmp_path):
    assignment = Assignment.load(SOLUTION)
    sub = tmp_path / "submitted"
    _learner(sub, "bob")
    (sub / "bob.ipynb").write_text("{}")  # a stub beside bob's folder
    _learner(sub, "carol")
    found = cli.find_submissions(sub, assignment)
    assert sorted(found) == ["carol"]  # bob is not graded on either one
    (entry, why), = found.refused
    assert entry == "bob" and "bob/ (a folder)" in why and "bob.ipynb (a notebook)" in why


def test_ids_that_would_collide_after_transformation_are_refused_once_at_discovery(tmp_path):
    assignment = Assignment.load(SOLUTION)
    sub = tmp_path / "submitted"
    _learner(sub, b"jos\xe9")  # not UTF-8: used to become 'jos\\udce9'...
    _learner(sub, "jos\\udce9")  # ...the name of this folder, a backslash and 'udce9'
    _learner(sub, "a" * 200 + "1")  # two long ids with a common 200-character prefix
    _learner(sub, "a" * 200 + "2")
    _learner(sub, "Dana")
    _learner(sub, "dana")  # one id for LMS imports and case-insensitive file systems
    _learner(sub, "=HYPERLINK(1)")
    _learner(sub, "eve\x1b[2J")
    _learner(sub, "zoe\u0301")  # not NFC
    _learner(sub, "ok-id_1.x@y")
    found = cli.find_submissions(sub, assignment)
    assert sorted(found) == ["jos\\udce9", "ok-id_1.x@y"]
    refused = dict(found.refused)
    assert len(found.refused) == 8, found.refused
    for entry, why in found.refused:
        _no_raw_escape(entry + why)
    assert "not valid UTF-8" in refused["jos\\xe9/ (a folder)"]
    assert sum("characters long" in why for why in refused.values()) == 2
    assert "letter case" in refused["Dana"] and "letter case" in refused["dana"]


def test_the_result_keeps_the_id_it_was_given(tmp_path):
    from course_grader.runner import grade_submission
    assignment = Assignment.load(SOLUTION)
    for ident in ("x" * 128, "é" * 250):  # the runner used to cut at 200 characters
        res = grade_submission(assignment, ident, {"scoring": None})  # missing: no sandbox needed
        assert res.student == ident


# -- the answer key never comes from a learner-writable place --------------------------------

def _course(tmp_path: Path) -> Path:
    course = tmp_path / "course"
    assert cli.main(["init-course", str(course), NAME, "--from", str(ROOT / "solutions")]) == 0
    return course


def test_a_learner_named_after_the_assignment_is_never_the_answer_key(tmp_path, monkeypatch):
    course = _course(tmp_path)
    sub = course / "submitted"
    evil = _learner(sub, NAME)  # the learner whose id is the assignment's name
    _learner(sub, "honest")
    monkeypatch.chdir(sub)  # the teacher grades from inside submitted/: `course-grade lesson03_scoring .`
    key = cli.resolve_assignment(NAME, search_from=["."])
    assert key.path == (course / "source" / NAME).resolve(), key
    assert evil.parent.resolve() not in (key.path, *key.path.parents)
    with pytest.raises(NotebookError, match="inside the submissions folder"):  # said as a path: refused
        cli.resolve_assignment(f"./{NAME}", search_from=["."], submissions=".")
    with pytest.raises(NotebookError, match="inside the submissions folder"):
        cli.resolve_assignment(NAME, answer_key=str(sub / NAME), submissions=sub)
    elsewhere = tmp_path / "other-class"
    elsewhere.mkdir()
    with pytest.raises(NotebookError, match="inside the nbgrader course's submitted"):
        cli.resolve_assignment(NAME, answer_key=str(sub / NAME), submissions=elsewhere, search_from=[sub])
    # a key any user may replace is refused too
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    write_notebook(json.loads((SOLUTION / "scoring.ipynb").read_text()), shared / NAME / "scoring.ipynb")
    with pytest.raises(NotebookError, match="written by every user"):
        cli.resolve_assignment(NAME, answer_key=str(shared / NAME), submissions=sub)


def test_a_course_config_inside_a_learners_folder_is_never_read(tmp_path, monkeypatch, fake_grading, capsys):
    sub = tmp_path / "submitted"
    mallory = _learner(sub, "mallory").parent
    (mallory / "nbgrader_config.py").write_text("open('PWNED', 'w')\n")
    monkeypatch.chdir(mallory)  # the teacher looks into a learner's folder, and grades from there
    assert cli.main([NAME, str(sub), "--out", str(tmp_path / "grades")]) == 2
    assert not (mallory / "PWNED").exists()
    assert "nbgrader_config.py" in capsys.readouterr().err


# -- a class run: what reaches the terminal, the gradebook, nbgrader -------------------------

def _fake_result(assignment: Assignment, student: str, passed: bool = True) -> SubmissionResult:
    nbs = []
    for nb_name, src in assignment.notebooks.items():
        tests = [Outcome(t.grade_id, t.grade_id, t.points if passed else 0.0, t.points, passed,
                             "" if passed else "wrong " + ESCAPES) for t in src.tests]
        nbs.append(NotebookResult(nb_name, Status.OK, tests))
    total = sum(t.points for nb in nbs for t in nb.tests)
    return SubmissionResult(student, assignment.name, Status.OK, total, assignment.max_points, nbs)


class FakeGrading:
    """Stands in for the workers: records what it was asked to grade; a learner passes when
    their notebook (as given to grading) holds ``PASS``; ``during(i)`` runs before item ``i``."""

    def __init__(self, during=None) -> None:
        self.seen: list[tuple[str, dict]] = []
        self.during = during

    def __call__(self, items, *, jobs, config, seed=None, progress=True, on_result=None, stop=None):
        out = []
        for i, (assignment, student, notebooks) in enumerate(items):
            if self.during is not None:
                self.during(i, student)
            if stop is not None and stop.event.is_set():
                raise cli.GradingInterrupted({})
            self.seen.append((student, dict(notebooks)))
            path = notebooks.get("scoring")
            passed = path is not None and "PASS" in Path(path).read_text()
            res = _fake_result(assignment, "whoever the worker says", passed)
            res.student = student
            if progress:
                print(f"  {sinks.terminal(student)}: {res.total:g}/{res.max_total:g}", flush=True)
            if on_result:
                on_result(i, res)
            out.append(res)
        return out


@pytest.fixture
def fake_grading(monkeypatch):
    from course_grader import sandbox
    monkeypatch.setattr(sandbox, "isolation_status", lambda refresh=False: (True, ""))
    fake = FakeGrading()
    monkeypatch.setattr(cli, "grade_many", fake)
    return fake


def _nb(marker: str) -> str:
    nb = json.loads((SOLUTION / "scoring.ipynb").read_text())
    nb["cells"].append({"cell_type": "markdown", "metadata": {}, "source": marker})
    return json.dumps(nb)


@pytest.mark.slow  # 3-9 s CPU (measured 2026-11-27): out of the fast tier
def test_a_class_run_prints_no_escape_and_reports_refused_ids(tmp_path, fake_grading, capsys):
    sub = tmp_path / "submitted"
    _learner(sub, "alice", text=_nb("PASS"))
    _learner(sub, "mallory" + ESCAPES.replace("\x1b", "\x1b").split("\r")[0][:30], text=_nb("PASS"))
    _learner(sub, "bob", text=_nb("PASS"))
    (sub / "bob.ipynb").write_text(_nb("stub"))
    out = tmp_path / "grades"
    code = cli.main(["grade", str(SOLUTION), str(sub), "--out", str(out), "--jobs", "1"])
    printed = capsys.readouterr()
    _no_raw_escape(printed.out + printed.err)
    assert code == 1  # graded, but not everyone: the teacher's script notices
    assert "mallory\\x1b]52" in printed.err and "bob" in printed.err
    rows = list(csv.DictReader((out / NAME / "grades.csv").open()))
    assert [r["student"] for r in rows] == ["alice"]
    data = json.loads((out / NAME / "grades.json").read_text())
    assert {e["entry"] for e in data["not_graded"]} == {"bob", sinks.terminal("mallory" + ESCAPES.split("\r")[0][:30]) + "/ (a folder)"}


@pytest.mark.slow  # 3-9 s CPU (measured 2026-11-27): out of the fast tier
def test_the_bytes_graded_are_hashed_recorded_and_exported_not_reread(tmp_path, fake_grading):
    sub = tmp_path / "submitted"
    original = _nb("PASS")
    path = _learner(sub, "alice", text=original)

    def swap(i, student):  # the learner replaces the file while the class is being graded
        path.write_text(_nb("swapped in"))
    fake_grading.during = swap
    out = tmp_path / "grades"
    assert cli.main(["grade", str(SOLUTION), str(sub), "--out", str(out), "--jobs", "1", "--quiet"]) == 0
    (student, given), = fake_grading.seen
    assert Path(given["scoring"]) != path  # grading read a private copy...
    row = json.loads((out / NAME / "grades.json").read_text())["results"][0]
    assert row["submission_sha256"] == {"scoring": hashlib.sha256(original.encode()).hexdigest()}
    assert (row["total"], row["max_total"]) == (POINTS.auto, POINTS.maximum)  # ...of the bytes read before the swap


# -- an interrupted run keeps what was graded, and a re-run resumes ----------------------------

@pytest.mark.slow  # 3-9 s CPU (measured 2026-11-27): out of the fast tier
def test_an_interrupted_run_keeps_results_and_the_previous_gradebook_and_resumes(tmp_path, fake_grading, capsys):
    import signal
    sub = tmp_path / "submitted"
    for s in ("a1", "a2", "a3", "a4"):
        _learner(sub, s, text=_nb("PASS"))
    out = tmp_path / "grades"
    (out / NAME).mkdir(parents=True)
    (out / NAME / "grades.csv").write_text("student,total\nprevious,15\n")

    def interrupt(i, student):
        if student == "a3":
            os.kill(os.getpid(), signal.SIGTERM)  # the handler stops grading
    fake_grading.during = interrupt
    code = cli.main(["grade", str(SOLUTION), str(sub), "--out", str(out), "--jobs", "1", "--quiet"])
    err = capsys.readouterr().err
    assert code == 128 + signal.SIGTERM, err
    assert "interrupted (SIGTERM): 2 of 4" in err
    assert (out / NAME / "grades.csv").read_text() == "student,total\nprevious,15\n"  # untouched
    assert len(list((out / NAME / "journal").glob("*.json"))) == 2
    fake_grading.during = None
    fake_grading.seen.clear()
    assert cli.main(["grade", str(SOLUTION), str(sub), "--out", str(out), "--jobs", "1"]) == 0
    assert "resuming: 2 learner(s)" in capsys.readouterr().out
    assert [s for s, _ in fake_grading.seen] == ["a3", "a4"]  # a1, a2 taken from the journal
    rows = {r["student"]: r for r in csv.DictReader((out / NAME / "grades.csv").open())}
    assert sorted(rows) == ["a1", "a2", "a3", "a4"]
    assert not (out / NAME / "journal").exists()  # complete: the next run grades everyone
    assert "previous" in next((out / NAME).glob("grades.2*.csv")).read_text()
    # a changed submission is graded again; --regrade grades everyone
    (sub / "a1" / "scoring.ipynb").write_text(_nb("PASS changed"))
    fake_grading.seen.clear()
    assert cli.main(["grade", str(SOLUTION), str(sub), "--out", str(out), "--jobs", "1", "--quiet"]) == 0
    assert len(fake_grading.seen) == 4


# -- the notebooks written for Formgrader --------------------------------------------------------

XSS = "xss-7f3a"


def _hostile_notebook() -> dict:
    nb = json.loads((SOLUTION / "scoring.ipynb").read_text())
    svg = f"<svg xmlns='http://www.w3.org/2000/svg' onload=\"alert('{XSS}')\"><script>alert('{XSS}')</script></svg>"
    nb["cells"].insert(0, {"cell_type": "markdown", "metadata": {}, "attachments": {"e.svg": {"image/svg+xml": svg}},
                           "source": f"# Hi\n<img src=x onerror=\"alert('{XSS}')\">\n<script>alert('{XSS}')</script>\n"
                                     f"[click](javascript:alert('{XSS}')) ![a](attachment:e.svg)\n"
                                     f"<a href=\"jav&#x61;script:alert('{XSS}')\">x</a>\n```` `<b onmouseover=x>`"})
    nb["cells"].insert(1, {"cell_type": "raw", "metadata": {"format": "text/html", "raw_mimetype": "text/html"},
                           "source": f"<script>alert('{XSS}')</script>"})
    outputs = [
        {"output_type": "display_data", "metadata": {}, "data": {"text/html": f"<script>alert('{XSS}')</script>",
                                                                 "text/plain": "x"}},
        {"output_type": "display_data", "metadata": {}, "data": {"application/javascript": f"alert('{XSS}')"}},
        {"output_type": "display_data", "metadata": {}, "data": {"image/svg+xml": svg}},
        {"output_type": "display_data", "metadata": {}, "data": {"text/markdown": f"<img src=x onerror=alert('{XSS}')>"}},
        {"output_type": "display_data", "metadata": {}, "data": {"text/latex": f"\\href{{javascript:alert('{XSS}')}}{{x}}"}},
        {"output_type": "display_data", "metadata": {}, "data": {"image/png": f"x\" onerror=\"alert('{XSS}')"}},
        {"output_type": "display_data", "metadata": {},
         "data": {"application/vnd.jupyter.widget-view+json": {"model_id": f"</script><script>alert('{XSS}')</script>",
                                                               "version_major": 2, "version_minor": 0}}},
        {"output_type": "execute_result", "execution_count": 3, "metadata": {},
         "data": {"text/html": f"<iframe src=\"javascript:alert('{XSS}')\"></iframe>"}},
        {"output_type": "error", "ename": f"<script>alert('{XSS}')</script>", "evalue": "<b onclick=x>",
         "traceback": [f"\x1b[31m<script>alert('{XSS}')</script>"]},
    ]
    code = next(c for c in nb["cells"] if c["cell_type"] == "code")
    code["outputs"] = outputs
    nb["metadata"]["widgets"] = {"application/vnd.jupyter.widget-state+json": {
        "state": {f"</script><script>alert('{XSS}')</script>": {}}, "version_major": 2, "version_minor": 0}}
    return nb


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.scripts: list[str] = []
        self.tags: list[tuple[str, list]] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))
        if tag == "script":
            self._in_script = True
            self.scripts.append(repr(sorted(attrs)))

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts[-1] += data


def _render_as_formgrader(path: Path) -> str:
    """The HTML Formgrader serves for an autograded notebook (its exporter and template)."""
    from nbconvert.exporters import HTMLExporter
    from nbgrader.server_extensions.formgrader import handlers
    from traitlets.config import Config
    config = Config()
    config.HTMLExporter.template_name = "formgrade"
    config.HTMLExporter.extra_template_basedirs = [handlers.template_path]
    resources = {"assignment_id": NAME, "notebook_id": "scoring", "submission_id": "1", "index": 0, "total": 1,
                 "base_url": "", "student": "s", "last_name": None, "first_name": None, "notebook_path": "p"}
    return HTMLExporter(config=config).from_filename(str(path), resources=resources)[0]


def _findings(page: str) -> list[str]:
    """Every script, event handler, script URL and embedding tag of an HTML page."""
    parser = _Tags()
    parser.feed(page)
    found = list(parser.scripts)
    for tag, attrs in parser.tags:
        if tag in ("iframe", "object", "embed", "svg", "frame", "base", "form"):
            found.append(f"<{tag}>")
        for name, value in attrs:
            flat = re.sub(r"[\s\x00-\x1f]", "", (value or "")).lower()
            if name.lower().startswith("on"):
                found.append(f"<{tag} {name}={value}>")
            if flat.startswith(("javascript:", "vbscript:", "data:text/html", "data:image/svg")):
                found.append(f"<{tag} {name}={value}>")
    return found


def _active_content(page: str, baseline: str) -> list[str]:
    """What ``page`` has of :func:`_findings` beyond the template's own (``baseline``: the page
    of a clean notebook rendered the same way)."""
    from collections import Counter
    return sorted((Counter(_findings(page)) - Counter(_findings(baseline))).elements())


@pytest.fixture
def _alembic_on_path(monkeypatch):
    import sys
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))


def _nbgrader_course(tmp_path: Path):
    from test_grading_hostile_files import _course  # one gradebook fixture for the export tests
    return _course(tmp_path)


@pytest.mark.slow  # an nbgrader gradebook database and nbconvert: several seconds
def test_formgrader_renders_no_learner_script_from_the_autograded_copy(tmp_path, _alembic_on_path):
    from course_grader.nbgrader_export import export_to_nbgrader
    course, assignment = _nbgrader_course(tmp_path)
    for s, nb in (("clean", json.loads((SOLUTION / "scoring.ipynb").read_text())), ("mallory", _hostile_notebook())):
        write_notebook(nb, course.submitted / s / NAME / "scoring.ipynb")
    results = [_fake_result(assignment, "clean"), _fake_result(assignment, "mallory", passed=False)]
    assert sorted(export_to_nbgrader(course, assignment, results)) == ["clean", "mallory"]
    clean = course.autograded / "clean" / NAME / "scoring.ipynb"
    copy = course.autograded / "mallory" / NAME / "scoring.ipynb"
    page = _render_as_formgrader(copy)
    assert _active_content(page, _render_as_formgrader(clean)) == []
    assert XSS in page  # the learner's text is shown, as text
    kept = json.loads(copy.read_text())
    assert not any(c.get("attachments") for c in kept["cells"]) and "widgets" not in kept["metadata"]
    # nbgrader's own generate_feedback renders the same copy: the feedback exporter's page too
    from nbconvert.exporters import HTMLExporter
    assert _active_content(HTMLExporter().from_filename(str(copy))[0], HTMLExporter().from_filename(str(clean))[0]) == []


@pytest.mark.slow  # an nbgrader gradebook database: several seconds
def test_regrading_into_nbgrader_replaces_the_feedback(tmp_path, _alembic_on_path):
    from nbgrader.api import Gradebook
    from course_grader.nbgrader_export import export_to_nbgrader
    course, assignment = _nbgrader_course(tmp_path)
    write_notebook(json.loads((SOLUTION / "scoring.ipynb").read_text()), course.submitted / "ann" / NAME / "scoring.ipynb")
    page = course.feedback / "ann" / NAME / "scoring.html"
    problems: list[str] = []
    assert export_to_nbgrader(course, assignment, [_fake_result(assignment, "ann", passed=False)], problems) == ["ann"]
    zero, full = f"0 / {fmt(POINTS.maximum)}", f"{fmt(POINTS.auto)} / {fmt(POINTS.maximum)}"
    assert zero in page.read_text()
    assert export_to_nbgrader(course, assignment, [_fake_result(assignment, "ann")], problems) == ["ann"], problems
    assert full in page.read_text() and zero not in page.read_text()
    with Gradebook(course.db_url, course_id="c") as gb:
        assert gb.find_submission(NAME, "ann").score == POINTS.auto
    assert not problems


@pytest.mark.slow  # an nbgrader gradebook database: several seconds
def test_an_export_failure_exits_non_zero_and_says_so(tmp_path, fake_grading, capsys, monkeypatch, _alembic_on_path):
    from course_grader import nbgrader_export
    course = _course(tmp_path)
    from nbgrader.api import Gradebook
    assignment = Assignment.load(course / "source" / NAME)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", course_id="attention-course") as gb:
        gb.add_assignment(NAME)
        gb.add_notebook("scoring", NAME)
        for t in assignment.notebooks["scoring"].tests:
            gb.add_grade_cell(t.grade_id, "scoring", NAME, max_score=t.points, cell_type="code")
        for w in assignment.notebooks["scoring"].written:  # the written answers, graded by hand
            gb.add_grade_cell(w.grade_id, "scoring", NAME, max_score=w.points, cell_type=w.cell_type)
            gb.add_solution_cell(w.grade_id, "scoring", NAME)
    for s in ("ann", "ben"):
        _learner(course / "submitted" / s, NAME, text=_nb("PASS"))

    real = nbgrader_export._write_folders

    def flaky(course_, assignment_, res, *a, **k):
        if res.student == "ben":
            raise OSError(28, "No space left on device")
        return real(course_, assignment_, res, *a, **k)
    monkeypatch.setattr(nbgrader_export, "_write_folders", flaky)
    monkeypatch.chdir(course)
    code = cli.main([NAME, "submitted", "--out", str(tmp_path / "grades"), "--jobs", "1", "--to-nbgrader", "--quiet"])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "ben: not exported" in err and "1 of 2 learner(s) were NOT exported" in err
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", course_id="attention-course") as gb:
        assert gb.find_submission(NAME, "ann").score == POINTS.auto
        # ben's new scores were not committed (never new scores beside an old page)
        assert not any(g.auto_score for g in gb.find_submission_notebook("scoring", NAME, "ben").grades)


def test_the_feedback_page_shows_learner_text_as_text():
    """(Held before issue 29 too: kept as the HTML sink's test.)"""
    from course_grader.feedback import render_html
    assignment = Assignment.load(SOLUTION)
    res = _fake_result(assignment, "<script>alert(1)</script>", passed=False)
    res.notebooks[0].tests[0].message = "<img src=x onerror=alert(1)>"
    res.notebooks[0].tests[0].details = "</pre><script>alert(2)</script>"
    res.notebooks[0].cells = [{"index": 0, "status": "error", "message": "<svg onload=alert(3)>",
                               "traceback": "<a href='javascript:alert(4)'>x</a>"}]
    res.notebooks[0].notes = ["<iframe src=javascript:alert(5)>"]
    page = render_html(res)
    assert _findings(page) == []
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
