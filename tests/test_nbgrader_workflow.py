"""The teacher's workflow with real nbgrader commands, in a temporary course and exchange.

``course-grade init-course`` -> ``nbgrader generate_assignment`` -> ``release_assignment`` ->
(learner) ``fetch_assignment`` / ``submit`` -> ``collect`` -> ``course-grade --to-nbgrader`` ->
``nbgrader export`` / ``release_feedback`` -> (learner) ``fetch_feedback``. Every nbgrader
command runs as ``.venv/bin/nbgrader`` with a PATH that does NOT contain the virtual
environment (as in the README), so nothing relies on an activated environment.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from course_grader import cli
from course_tools.grading_dev.points import assignment_points, fmt
from course_tools.grading_dev.testing import load_mistakes, variant, write_notebook

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
NAME = "lesson03_scoring"
COURSE_ID = "attention-course"
#: lesson 3's points from its instructor notebook: full marks (auto) and the maximum (with the written cells)
POINTS = assignment_points(NAME)

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]


def _env(home: Path) -> dict[str, str]:
    """An environment without the virtual environment on PATH (as when it is not activated)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "JUPYTER", "PYTHON"))}
    env["PATH"] = os.pathsep.join(p for p in ("/usr/local/bin", "/usr/bin", "/bin") if Path(p).is_dir())
    env["HOME"] = str(home)
    env["OMP_WAIT_POLICY"] = "PASSIVE"
    return env


def _nbgrader(args: list[str], cwd: Path, home: Path) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(BIN / "nbgrader"), *args], cwd=cwd, env=_env(home), capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


def _learner_code(replace: dict[str, str] | None = None) -> dict[str, str]:
    """The solution cells of the assignment as a learner would fill them in (no markers)."""
    nb = json.loads((ROOT / "solutions" / NAME / "scoring.ipynb").read_text("utf-8"))
    code = {}
    for cell in nb["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("solution"):
            src = "".join(cell["source"])
            code[meta["grade_id"]] = "\n".join(line for line in src.split("\n") if "### " not in line)
    code.update(replace or {})
    return code


def _fill(notebook: Path, code: dict[str, str]) -> None:
    """Fill in the solution cells of a fetched notebook, keeping its nbgrader metadata."""
    nb = json.loads(notebook.read_text("utf-8"))
    write_notebook(variant(nb, replace=code), notebook)


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A course made by `course-grade init-course`, with its own exchange, the assignment
    generated (into the course's gradebook.db) and released."""
    base = tmp_path_factory.mktemp("nbgrader")
    course, exchange, home = base / "course", base / "exchange", base / "home"
    exchange.mkdir()
    home.mkdir()
    assert cli.main(["init-course", str(course), NAME, "--course-id", COURSE_ID, "--from", str(ROOT / "solutions")]) == 0
    with open(course / "nbgrader_config.py", "a", encoding="utf-8") as fh:
        fh.write(f"c.Exchange.root = {str(exchange)!r}\n")
    assert (course / "source" / NAME / "mistakes.py").is_file()  # the teacher keeps it...
    _nbgrader(["generate_assignment", NAME, "--force"], course, home)
    _nbgrader(["release_assignment", NAME, "--force"], course, home)
    return {"course": course, "exchange": exchange, "home": home}


def test_instructor_only_files_are_never_released(course):
    released = course["course"] / "release" / NAME
    outbound = course["exchange"] / COURSE_ID / "outbound" / NAME
    assert (released / "scoring.ipynb").is_file() and (outbound / "scoring.ipynb").is_file()
    for folder in (released, outbound):
        names = {p.name for p in folder.rglob("*")}
        assert "mistakes.py" not in names, f"mistakes.py released into {folder}"
        assert not any(n.endswith(".md") for n in names)
    # the released notebook names its assignment and which tests have hidden parts
    meta = json.loads((released / "scoring.ipynb").read_text("utf-8"))["metadata"]["course_grade"]
    assert meta["assignment"] == NAME and "test_dot_product" in meta["hidden_tests"]
    assert "test_dot_product_public" not in meta["hidden_tests"]
    assert (course["course"] / "gradebook.db").is_file()  # generate_assignment ran alembic without the venv on PATH


def test_class_workflow_into_gradebook_db_and_feedback(course, tmp_path):
    home, c = course["home"], course["course"]
    student_dir = tmp_path / "learner"
    student_dir.mkdir()
    learner_args = [f"--Exchange.root={course['exchange']}", f"--course={COURSE_ID}"]
    _nbgrader(["fetch_assignment", NAME, *learner_args], student_dir, home)
    fetched = student_dir / NAME / "scoring.ipynb"
    assert not (student_dir / NAME / "mistakes.py").exists()
    mistake = load_mistakes(ROOT / "solutions" / NAME)["missing_sqrt"]
    _fill(fetched, _learner_code(mistake["replace"]))
    _nbgrader(["submit", NAME, *learner_args], student_dir, home)
    _nbgrader(["collect", NAME], c, home)
    student = next(p.name for p in (c / "submitted").iterdir())
    submitted = c / "submitted" / student / NAME
    assert (submitted / "timestamp.txt").is_file() and not (submitted / "mistakes.py").exists()

    out = tmp_path / "grades"
    assert cli.main([NAME, str(c / "submitted"), "--out", str(out), "--jobs", "1", "--to-nbgrader", "--quiet"]) == 0
    ours = {r["student"]: r for r in csv.DictReader((out / NAME / "grades.csv").open())}
    total = POINTS.without(mistake["fails"])  # missing sqrt: the points of the tests that catch it are lost
    assert 0 < total < POINTS.auto
    assert ours[student]["total"] == fmt(total) and ours[student]["max"] == fmt(POINTS.maximum)
    recorded = json.loads((out / NAME / "grades.json").read_text())["answer_key"]
    assert Path(recorded["path"]) == (c / "source" / NAME).resolve()  # the course's source, not the repo's

    # nbgrader's own tools see the grades
    _nbgrader(["export", "--to", str(tmp_path / "export.csv")], c, home)
    exported = {r["student_id"]: r for r in csv.DictReader((tmp_path / "export.csv").open())
                if r["assignment"] == NAME}
    assert float(exported[student]["score"]) == total and float(exported[student]["max_score"]) == POINTS.maximum
    _nbgrader(["release_feedback", NAME], c, home)
    _nbgrader(["fetch_feedback", NAME, *learner_args], student_dir, home)
    pages = list((student_dir / NAME / "feedback").rglob("*.html"))
    assert len(pages) == 1
    page = pages[0].read_text("utf-8")
    assert f"{fmt(total)} / {fmt(POINTS.maximum)}" in page and "BEGIN HIDDEN TESTS" not in page and "_RefDotProduct" not in page
    assert not list((c / "feedback").rglob("mistakes.py"))


def test_stderr_never_fails_a_cell(course, tmp_path):
    """Correct code that prints a warning: nbgrader validate (the Validate button) passes and
    nbgrader autograde gives full marks, with the course's configuration, as course-grade does."""
    c, home = course["course"], course["home"]
    noisy = _learner_code()
    noisy["masked_softmax"] = ("import sys\n" + noisy["masked_softmax"]
                               + "\n\n_quiet_masked_softmax = masked_softmax\n\n\n"
                               "def masked_softmax(scores, valid_lens=None):\n"
                               "    print('note: masked_softmax called', file=sys.stderr)\n"
                               "    return _quiet_masked_softmax(scores, valid_lens)\n")
    notebook = tmp_path / "scoring.ipynb"
    notebook.write_text((c / "release" / NAME / "scoring.ipynb").read_text("utf-8"), encoding="utf-8")
    _fill(notebook, noisy)
    proc = _nbgrader(["validate", str(notebook)], c, home)
    assert "Success! Your notebook passes all the tests." in proc.stdout, proc.stdout
    out = tmp_path / "grades"
    write_notebook(json.loads(notebook.read_text("utf-8")), tmp_path / "class" / "ann" / "scoring.ipynb")
    assert cli.main([NAME, str(tmp_path / "class"), "--out", str(out), "--jobs", "1", "--quiet",
                     "--answer-key", str(c / "source" / NAME)]) == 0
    row = next(csv.DictReader((out / NAME / "grades.csv").open()))
    assert (row["total"], row["max"]) == (fmt(POINTS.auto), fmt(POINTS.maximum))
    # nbgrader autograde (its kernels get the same setting) gives full marks too
    write_notebook(json.loads(notebook.read_text("utf-8")), c / "submitted" / "noisy" / NAME / "scoring.ipynb")
    _nbgrader(["autograde", NAME, "--student", "noisy", "--create", "--force"], c, home)
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{c / 'gradebook.db'}", course_id=COURSE_ID) as gb:
        assert gb.find_submission(NAME, "noisy").score == POINTS.auto


def test_answer_key_follows_the_course_source(tmp_path, capsys):
    """An edited source/ in a teacher's course is the answer key (one test worth 1 point more);
    --answer-key overrides it; both are printed and recorded."""
    course = tmp_path / "course"
    assert cli.main(["init-course", str(course), NAME, "--from", str(ROOT / "solutions")]) == 0
    src = course / "source" / NAME / "scoring.ipynb"
    nb = json.loads(src.read_text("utf-8"))
    for cell in nb["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "test_masked_softmax_public":
            cell["metadata"]["nbgrader"]["points"] = POINTS.tests["test_masked_softmax_public"] + 1
    src.write_text(json.dumps(nb, indent=1), encoding="utf-8")
    sub = course / "submitted" / "ann" / NAME
    write_notebook(variant(ROOT / "solutions" / NAME / "scoring.ipynb"), sub / "scoring.ipynb")
    out = tmp_path / "grades"
    capsys.readouterr()
    assert cli.main([NAME, str(course / "submitted"), "--out", str(out), "--jobs", "1"]) == 0
    printed = capsys.readouterr().out
    assert f"answer key: {(course / 'source' / NAME).resolve()} (the nbgrader course at" in printed
    row = next(csv.DictReader((out / NAME / "grades.csv").open()))
    assert (row["total"], row["max"]) == (fmt(POINTS.auto + 1), fmt(POINTS.maximum + 1))
    # an explicit answer key wins, and a second run keeps the first gradebook
    assert cli.main([NAME, str(course / "submitted"), "--out", str(out), "--jobs", "1",
                     "--answer-key", str(ROOT / "solutions" / NAME)]) == 0
    printed = capsys.readouterr().out
    assert f"answer key: {ROOT / 'solutions' / NAME} (given with --answer-key)" in printed
    row = next(csv.DictReader((out / NAME / "grades.csv").open()))
    assert row["max"] == fmt(POINTS.maximum)
    assert json.loads((out / NAME / "grades.json").read_text())["answer_key"]["origin"] == "given with --answer-key"
    assert len(list((out / NAME).glob("grades.*.csv"))) == 1  # the first run's gradebook, kept



def test_formgrader_works_without_the_venv_on_path(tmp_path):
    """formgrader creates the gradebook database through the `alembic` command; with the
    course's settings it finds it although the virtual environment is not activated (without
    them: a server error 500 and a page stuck on "Loading")."""
    import socket
    import time
    import urllib.request

    course, home = tmp_path / "course", tmp_path / "home"
    home.mkdir()
    assert cli.main(["init-course", str(course), NAME, "--from", str(ROOT / "solutions")]) == 0
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([str(BIN / "jupyter"), "server", "--ServerApp.token=tok", f"--ServerApp.port={port}",
                               "--ServerApp.ip=127.0.0.1", "--ServerApp.open_browser=False", "--allow-root"],
                              cwd=course, env=_env(home), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(120):
            try:
                urllib.request.urlopen(f"{url}/api/status?token=tok", timeout=5)
                break
            except OSError:
                time.sleep(0.5)
        with urllib.request.urlopen(f"{url}/formgrader/api/assignments?token=tok", timeout=120) as reply:
            assignments = json.loads(reply.read())
        assert reply.status == 200 and isinstance(assignments, list)
        assert (course / "gradebook.db").is_file()
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_repository_and_course_configs_share_the_rules(tmp_path):
    """The repository's nbgrader_config.py (JupyterLab started at the course root, exercises/)
    and a teacher's course folder get the same settings."""
    from course_grader.nbgrader_course import INSTRUCTOR_ONLY, KERNEL_ARGUMENTS, RecordAssignment
    from course_grader.nbgrader_export import load_course

    assert cli.main(["init-course", str(tmp_path / "course"), NAME, "--from", str(ROOT / "solutions")]) == 0
    for root in (ROOT, tmp_path / "course"):
        config = load_course(root).config
        assert list(config.CourseDirectory.ignore) == INSTRUCTOR_ONLY
        assert list(config.Execute.extra_arguments) == KERNEL_ARGUMENTS
        assert RecordAssignment in config.GenerateAssignment.preprocessors
    assert load_course(ROOT).source == ROOT / "solutions"
    assert load_course(tmp_path / "course").source == (tmp_path / "course" / "source").resolve()


def _gradebook_flags(course: Path, assignment: str, student: str) -> dict[str, tuple]:
    """grade cell -> (needs_manual_grade, auto_score, manual_score) of one learner, as Formgrader reads them."""
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", course_id=COURSE_ID) as gb:
        notebook = gb.find_submission_notebook("essay", assignment, student)
        return {g.name: (g.needs_manual_grade, g.auto_score, g.manual_score) for g in notebook.grades}


def test_written_answers_are_flagged_for_a_manual_grade_that_a_re_export_keeps(tmp_path):
    """Issue 30, item 5: after `course-grade --to-nbgrader`, only the written answer needs a manual
    grade in the gradebook (Formgrader's flag); the score a teacher gives it there survives the next
    export, and a changed answer is flagged again for review with that score kept."""
    from nbgrader.api import Gradebook
    from course_tools.grading_dev.testing import RUBRIC, written_assignment
    course, home, name = tmp_path / "course", tmp_path / "home", "essay"
    home.mkdir()
    written_assignment(tmp_path / "solutions", name)
    assert cli.main(["init-course", str(course), name, "--course-id", COURSE_ID,
                     "--from", str(tmp_path / "solutions")]) == 0
    _nbgrader(["generate_assignment", name, "--force"], course, home)
    released = course / "release" / name / "essay.ipynb"
    assert RUBRIC not in released.read_text("utf-8") and "MARK SCHEME" not in released.read_text("utf-8")

    def submit(student: str, answer: str) -> None:
        nb = json.loads(released.read_text("utf-8"))
        for cell in nb["cells"]:
            gid = cell["metadata"].get("nbgrader", {}).get("grade_id")
            if gid == "double":
                cell["source"] = "def double(x):\n    return 2 * x"
            elif gid == "written_why":
                cell["source"] = answer
        write_notebook(nb, course / "submitted" / student / name / "essay.ipynb")
        (course / "submitted" / student / name / "timestamp.txt").write_text("2026-11-27 12:00:00.000000 UTC")

    def grade() -> None:
        assert cli.main([name, str(course / "submitted"), "--out", str(tmp_path / "grades"), "--jobs", "1",
                         "--to-nbgrader", "--quiet"]) == 0

    submit("ann", "Because q.k has variance d.")
    submit("bob", "<b>Softmax</b> saturates.")
    grade()
    for student in ("ann", "bob"):  # exactly the written answer is flagged, with no automatic score
        assert _gradebook_flags(course, name, student) == {"test_double": (False, 2.0, None),
                                                           "written_why": (True, None, None)}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", course_id=COURSE_ID) as gb:
        assert gb.find_submission(name, "ann").needs_manual_grade
        # the teacher grades ann's answer in Formgrader (what its grade API does)
        grade_row = gb.find_grade("written_why", "essay", name, "ann")
        grade_row.manual_score, grade_row.needs_manual_grade = 2.5, False
        gb.db.commit()
    grade()  # a re-export keeps the teacher's score and does not flag it again
    assert _gradebook_flags(course, name, "ann")["written_why"] == (False, None, 2.5)
    assert _gradebook_flags(course, name, "bob")["written_why"] == (True, None, None)
    _nbgrader(["export", "--to", str(tmp_path / "export.csv")], course, home)
    exported = {r["student_id"]: r for r in csv.DictReader((tmp_path / "export.csv").open())}
    assert float(exported["ann"]["score"]) == 4.5 and float(exported["ann"]["max_score"]) == 5
    assert float(exported["bob"]["score"]) == 2  # not graded by hand yet: the auto-graded points only
    # ann resubmits another answer: her score stays, and the cell is flagged for the teacher to review
    submit("ann", "A different answer.")
    grade()
    assert _gradebook_flags(course, name, "ann")["written_why"] == (True, None, 2.5)
    # Formgrader's copy shows the answer as text, with the cell's nbgrader metadata for the grade box
    copy = json.loads((course / "autograded" / "ann" / name / "essay.ipynb").read_text("utf-8"))
    cell = next(c for c in copy["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "written_why")
    assert "A different answer." in cell["source"] and cell["metadata"]["nbgrader"]["points"] == 3
    assert cell["metadata"]["nbgrader"]["grade"] and cell["metadata"]["nbgrader"]["solution"]
