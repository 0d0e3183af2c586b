"""Written-analysis cells (issue 30, item 5): graded by hand in Formgrader, never by course-grade.

An assignment's written cell is nbgrader's "manually graded answer" (a markdown cell with
``grade`` and ``solution``) carrying its mark scheme. course-grade counts its points in the
maximum, records the learner's answer (bounded, escaped) as "needs manual grade" with no
score, and says so in every place a grade shows; the generator never releases a mark scheme.
The nbgrader side (gradebook flags, a teacher's score kept on re-export) is in
tests/test_nbgrader_workflow.py, the browser side in tests/test_e2e_hub.py.
"""

from __future__ import annotations

import copy
import csv
import json

import pytest

from course_grader import cli
from course_grader.feedback import render_html, render_text
from course_grader.gradebook import write_gradebook, write_lms_csv
from course_grader.notebook import Assignment, NotebookError, written_answers
from course_grader.results import MANUAL, NotebookResult, SubmissionResult
from course_grader.results import TestOutcome as Outcome
from course_grader.selfcheck import CheckedTest, CheckReport, render_check
from course_grader.sinks import MAX_ANSWER
from course_tools.grading_dev.testing import RUBRIC, written_assignment, write_notebook

TIER = "fast"  # course_tools/tiers.py

#: An answer meant to hurt every sink: a spreadsheet formula, markup, terminal escapes (OSC 52
#: clipboard write, clear screen), a carriage return, a bidi override, a NUL, and far too long.
HOSTILE = ('=HYPERLINK("http://evil.example","x")\n<script>alert(1)</script><img src=x onerror=alert(2)>\n'
           "\x1b]52;c;QUJD\x07\x1b[2J\rforged line\u202eevil\x00" + "A" * (3 * MAX_ANSWER))
CONTROLS = ("\x1b", "\x07", "\x00", "\r", "\u202e")


def _learner(nb: dict, code: str = "def double(x):\n    return 2 * x", answer: str | None = None) -> dict:
    """The source notebook as a learner fills it: code in ``double``, ``answer`` in the written cell
    (None: left as released)."""
    out = copy.deepcopy(nb)
    for cell in out["cells"]:
        gid = cell["metadata"].get("nbgrader", {}).get("grade_id")
        if gid == "double":
            cell["source"] = code
        elif gid == "written_why":
            cell["source"] = "Explain why.\n\n\nYOUR ANSWER HERE" if answer is None else answer
    return out


def _result(assignment: Assignment, student: str, answer: str | None, passed: bool = True) -> SubmissionResult:
    """What the runner records for one learner of the essay assignment (the test outcome faked)."""
    src = assignment.notebooks["essay"]
    nb = json.loads(src.path.read_text("utf-8"))
    test = Outcome("test_double", "test_double", 2.0 if passed else 0.0, 2.0, passed,
                       "" if passed else "check failed")
    written = written_answers(src.written, _learner(nb, answer=answer))
    return SubmissionResult(student, assignment.name, "ok", test.points, assignment.max_points,
                            [NotebookResult("essay", "ok", [test], written=written)])


def test_written_cells_count_in_the_maximum_and_get_a_column(tmp_path):
    assignment = Assignment.load(written_assignment(tmp_path))
    assert assignment.max_points == 5  # 2 auto-graded + 3 written
    assert assignment.columns == ["test_double", "written_why"]
    assert assignment.written_columns == ["written_why"]
    written = assignment.notebooks["essay"].written
    assert [(w.grade_id, w.points) for w in written] == [("written_why", 3.0)]
    assert RUBRIC not in written[0].released and "YOUR ANSWER HERE" in written[0].released


@pytest.mark.parametrize("change, says", [
    ({"points": None}, "positive number of points"), ({"points": -1}, "positive number of points"),
    ({"grade_id": ""}, "without a grade_id"), ({"grade_id": "test_double"}, "duplicate grade_id")])
def test_a_malformed_written_cell_is_refused_saying_what_to_fix(tmp_path, change, says):
    folder = written_assignment(tmp_path)
    nb = json.loads((folder / "essay.ipynb").read_text("utf-8"))
    nb["cells"][-1]["metadata"]["nbgrader"].update(change)
    write_notebook(nb, folder / "essay.ipynb")
    with pytest.raises(NotebookError, match=says):
        Assignment.load(folder)


def test_the_answer_is_recorded_as_needing_a_manual_grade_with_no_score(tmp_path):
    assignment = Assignment.load(written_assignment(tmp_path / "src"))
    results = [_result(assignment, "ann", "Because q.k has variance d."), _result(assignment, "bob", None, False)]
    out = tmp_path / "grades" / "essay"
    write_gradebook(results, assignment.columns, out, written=assignment.written_columns)
    rows = {r["student"]: r for r in json.loads((out / "grades.json").read_text())["results"]}
    ann = rows["ann"]["notebooks"][0]["written"][0]
    assert ann["points"] is None and ann["status"] == MANUAL == "needs manual grade"
    assert ann["answer"] == "Because q.k has variance d." and ann["answered"] is True
    bob = rows["bob"]["notebooks"][0]["written"][0]  # the released text, untouched: 0, as nbgrader gives it
    assert (bob["answered"], bob["points"], bob["status"], rows["bob"]["pending_manual"]) == (False, 0, "no answer", 0)
    assert rows["ann"]["pending_manual"] == 3 and rows["ann"]["max_total"] == 5 and rows["ann"]["total"] == 2
    # grades.csv: the written column is empty (not 0) and the pending points are said
    table = list(csv.DictReader((out / "grades.csv").open()))
    assert table[0]["written_why"] == "" and table[0]["pending_manual"] == "3"
    assert (table[0]["total"], table[0]["max"]) == ("2", "5")
    # the LMS summary: the totals come with the points still to grade by hand
    write_lms_csv(tmp_path / "grades")
    lms = list(csv.DictReader((tmp_path / "grades" / "lms_grades.csv").open()))
    assert [(r["student"], r["essay"], r["pending_manual"]) for r in lms] == [("ann", "2", "3"), ("bob", "0", "0")]
    # the feedback: graded by the teacher, provisional, never a failure
    text, page = render_text(results[0]), render_html(results[0])
    assert "provisional: 3 points of written answers are graded by your teacher" in text
    assert "written_why: written answer, graded by your teacher (3 points): not graded yet" in text
    assert "[  FAIL  ] written_why" not in text and "Provisional: 3 points" in page
    assert "no answer was found in your notebook, so it scores 0" in render_text(results[1])
    assert list(csv.DictReader((out / "grades.csv").open()))[1]["written_why"] == "0"


def test_a_result_with_written_answers_survives_the_worker_round_trip(tmp_path):
    assignment = Assignment.load(written_assignment(tmp_path))
    res = _result(assignment, "ann", "my answer")
    back = SubmissionResult.from_dict(json.loads(json.dumps(res.to_dict())))
    assert back.written == res.written and back.pending_manual == 3


def test_a_hostile_answer_is_bounded_and_escaped_in_every_sink(tmp_path):
    assignment = Assignment.load(written_assignment(tmp_path / "src"))
    res = _result(assignment, "=mallory", HOSTILE)
    recorded = res.written[0].answer
    assert len(recorded) <= MAX_ANSWER + 100 and "more characters not recorded" in recorded
    assert not any(c in recorded for c in CONTROLS) and "\\x1b]52" in recorded  # shown, not obeyed
    out = tmp_path / "grades" / "essay"
    write_gradebook([res], assignment.columns, out, written=assignment.written_columns)
    raw = (out / "grades.json").read_text()
    assert len(raw) < MAX_ANSWER * 2 + 20_000  # bounded
    assert not any(c in raw for c in CONTROLS)
    for row in csv.reader((out / "grades.csv").open(newline="")):
        assert not any(cell.startswith(("=", "+", "-", "@")) for cell in row), row
    page = (out / "feedback").glob("*.html").__next__().read_text()
    assert "<script>alert" not in page and "onerror=alert" not in page and "\x1b" not in page
    assert not any(c in render_text(res) for c in CONTROLS)


def test_the_check_says_the_teacher_grades_a_written_answer():
    report = CheckReport("essay", "essay.ipynb", tests=[
        CheckedTest("test_double", 2, "public", passed=True),
        CheckedTest("written_why", 3, "written", message="no answer found yet: write it in the cell")])
    text = render_check(report)
    assert report.ok and report.max_points == 5 and report.written_max == 3
    assert "written_why (3 points): a written answer, graded by your teacher by hand, not by these checks" in text
    assert "3 more points come from written answers that your teacher grades by hand: written_why (3)." in text
    assert "Next: for each failed check" not in text  # an unanswered written cell is not a failed check
    zh = render_check(CheckReport("essay", "essay.ipynb", tests=report.tests, language="zh_CN"))
    assert "书面回答，由老师人工评分" in zh


@pytest.mark.sandbox
@pytest.mark.slow  # a class of three graded in the sandbox
def test_course_grade_counts_written_points_in_the_max_and_scores_none(tmp_path, capsys):
    key = written_assignment(tmp_path / "src")
    nb = json.loads((key / "essay.ipynb").read_text("utf-8"))
    subs = tmp_path / "submitted"
    write_notebook(_learner(nb, answer="Dot products grow with d."), subs / "ann" / "essay.ipynb")
    write_notebook(_learner(nb, code="def double(x):\n    return x"), subs / "bob" / "essay.ipynb")
    write_notebook(_learner(nb, answer=HOSTILE), subs / "eve" / "essay.ipynb")
    out = tmp_path / "grades"
    assert cli.main([str(key), str(subs), "--out", str(out), "--jobs", "1"]) == 0
    printed = capsys.readouterr().out
    assert "ann: 2/5" in printed and "(provisional: 3 points to grade by hand in Formgrader)" in printed
    assert "\x1b" not in printed
    rows = {r["student"]: r for r in csv.DictReader((out / "essay" / "grades.csv").open())}
    assert [(rows[s]["total"], rows[s]["max"], rows[s]["written_why"], rows[s]["pending_manual"])
            for s in ("ann", "bob", "eve")] == [("2", "5", "", "3"), ("0", "5", "0", "0"), ("2", "5", "", "3")]
    data = {r["student"]: r for r in json.loads((out / "essay" / "grades.json").read_text())["results"]}
    written = [data[s]["notebooks"][0]["written"][0] for s in ("ann", "bob", "eve")]
    assert [w["points"] for w in written] == [None, 0, None]  # bob left it blank
    assert [w["answered"] for w in written] == [True, False, True]
    assert len(written[2]["answer"]) <= MAX_ANSWER + 100 and not any(c in written[2]["answer"] for c in CONTROLS)
    assert RUBRIC not in (out / "essay" / "grades.json").read_text()  # the mark scheme is the teacher's only


@pytest.mark.slow  # nbgrader's generate_assignment, twice
def test_the_generator_strips_the_mark_scheme_in_both_languages(tmp_path):
    from course_tools.grading_dev.generate import generate_editions
    root = tmp_path / "course"
    (root / "nbgrader_config.py").parent.mkdir(parents=True)
    (root / "nbgrader_config.py").write_text(
        "from course_grader.nbgrader_course import configure\nc = get_config()\nconfigure(c)\n", encoding="utf-8")
    written_assignment(root / "solutions")
    written_assignment(root / "zh" / "solutions", language="zh-CN", question="请解释原因。")
    made = generate_editions(root, editions=["en", "zh-CN"])
    assert sorted(p.relative_to(root).as_posix() for p in made) == [
        "exercises/essay/essay.ipynb", "zh/exercises/essay/essay.ipynb"]
    for path, question in zip(sorted(made), ("Explain why.", "请解释原因。")):
        text = path.read_text("utf-8")
        assert "MARK SCHEME" not in text and "Model answer" not in text and "variance of q.k" not in text
        cell = next(c for c in json.loads(text)["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id")
                    == "written_why")
        assert " ".join("".join(cell["source"]).split()) == f"{question} YOUR ANSWER HERE"


@pytest.mark.slow  # nbgrader's generate_assignment
def test_the_generator_refuses_a_release_that_keeps_the_mark_scheme(tmp_path):
    from course_tools.grading_dev.generate import ReleaseLeak, generate_exercises
    root = tmp_path / "course"
    root.mkdir()
    (root / "nbgrader_config.py").write_text(
        "from course_grader.nbgrader_course import configure\nc = get_config()\nconfigure(c)\n"
        "c.ClearMarkScheme.enabled = False\n", encoding="utf-8")
    written_assignment(root / "solutions")
    with pytest.raises(ReleaseLeak, match="ClearMarkScheme did not run"):
        generate_exercises(root, root / "exercises", source="solutions")
    assert not list((root / "exercises").rglob("*.ipynb"))  # nothing a learner could fetch


def test_the_release_check_finds_a_rubric_line_without_its_markers(tmp_path):
    from course_tools.grading_dev.generate import ReleaseLeak, check_release
    source = written_assignment(tmp_path / "src")
    nb = json.loads((source / "essay.ipynb").read_text("utf-8"))
    nb["cells"][-1]["source"] = "Explain why.\n\n" + RUBRIC  # markers dropped, e.g. by a translation
    write_notebook(nb, tmp_path / "release" / "essay" / "essay.ipynb")
    with pytest.raises(ReleaseLeak, match="cell 4 still holds a mark scheme"):
        check_release(source, tmp_path / "release" / "essay")


def test_a_learner_notebook_without_the_written_cell_is_not_answered(tmp_path):
    assignment = Assignment.load(written_assignment(tmp_path))
    nb = json.loads(assignment.notebooks["essay"].path.read_text("utf-8"))
    nb["cells"] = nb["cells"][:-1]
    [answer] = written_answers(assignment.notebooks["essay"].written, nb)
    assert (answer.answered, answer.answer, answer.points) == (False, "", 0)
