"""The grader against tampering and broken submissions, on lesson03_scoring.

One class of learner notebooks (built in tmp_path from the solution) is graded ONCE with
the real CLI (``course_grader.cli.main``, two worker processes); each test then
inspects that learner's recorded row and feedback. Every attack is paired with wrong code,
so a successful attack would show up as points it should not have.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from course_grader import cli
from course_grader.sandbox import descendants
from course_tools.grading_dev.points import assignment_points, fmt, dependent_tests
from course_tools.grading_dev.testing import load_mistakes, variant, write_notebook

pytestmark = [pytest.mark.sandbox]

ROOT = Path(__file__).resolve().parents[1]
SOLUTION = ROOT / "solutions" / "lesson03_scoring" / "scoring.ipynb"
STUB = ROOT / "exercises" / "lesson03_scoring" / "scoring.ipynb"
#: lesson 3's points, read from its instructor notebook: full marks are its auto-graded points,
#: the gradebook's maximum also counts its written (hand-graded) cells
POINTS = assignment_points(SOLUTION)
FULL = POINTS.auto
#: the question tests: what a sandbox that dies in (or is killed in) the answers cell loses
ANSWER_TESTS = dependent_tests(SOLUTION, "answers")

# the listed typical mistake "missing_sqrt": a wrong answer that scores less than full marks
WRONG_DOT = load_mistakes(SOLUTION.parent)["missing_sqrt"]["replace"]["dot_product_attention"]

PATCH_CHECKS = '''
import numpy, torch, torch.testing
import course_grader.checks as _checks
torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
torch.testing.assert_close = lambda *a, **k: None
numpy.allclose = lambda *a, **k: True
for _name in ("assert_tensor_close", "assert_equal", "assert_number", "assert_choice", "assert_shape"):
    setattr(_checks, _name, lambda *a, **k: None)
import builtins
builtins.AssertionError = type("Nope", (Exception,), {})
'''

TRANSFORMER = '''
get_ipython().input_transformers_cleanup.append(lambda lines: [])
'''

WRITE_OUTPUT = '''
import os, glob
for _target in {targets!r}:
    try:
        os.makedirs(os.path.dirname(_target), exist_ok=True)
        with open(_target, "w") as _fh:
            _fh.write("student,assignment,total\\nattacker,lesson03_scoring,999\\n")
    except OSError as _exc:
        print("write refused:", _exc)
'''

DETACH = '''
import os, time
_pid = os.fork()
if _pid == 0:
    os.setsid()
    if os.fork() == 0:
        try:
            with open({report!r}, "w") as _fh:
                _fh.write(str(os.getpid()))
        except OSError:
            pass
        for _ in range(40):  # for ~10 s, keep trying to rewrite the gradebook and feedback
            time.sleep(0.25)
            for _target in {targets!r}:
                try:
                    with open(_target, "w") as _fh:
                        _fh.write("HACKED")
                except OSError:
                    pass
        os._exit(0)
    os._exit(0)
os.waitpid(_pid, 0)
'''

SEGV = '''
import ctypes
ctypes.string_at(0)
'''

WARNING_SOLUTION = '''
import warnings

def masked_softmax(scores, valid_lens=None):
    warnings.warn("this is a harmless warning printed by an honest answer", UserWarning)
    print("debug output that the grader must ignore")
    if valid_lens is None:
        return torch.softmax(scores, dim=-1)
    batch, num_queries, num_keys = scores.shape
    if valid_lens.dim() == 1:
        valid_lens = valid_lens[:, None].expand(batch, num_queries)
    keep = torch.arange(num_keys)[None, None, :] < valid_lens[:, :, None]
    return torch.softmax(scores.masked_fill(~keep, -1e9), dim=-1)
'''


def _class_folder(base: Path, out: Path, report: str) -> Path:
    sub = base / "submitted"
    book = out / "lesson03_scoring"  # <out>/<assignment>/
    targets = [str(book / "grades.csv"), str(book / "grades.json"), str(book / "feedback" / "patch.html"),
               str(book / "feedback" / "detach.html")]

    def put(student: str, nb: dict, nbgrader_layout: bool = False) -> None:
        folder = sub / student / "lesson03_scoring" if nbgrader_layout else sub / student
        write_notebook(nb, folder / "scoring.ipynb")

    put("solution", variant(SOLUTION), nbgrader_layout=True)
    (sub / "stub").mkdir(parents=True)
    shutil.copy(STUB, sub / "stub" / "scoring.ipynb")
    put("warning", variant(SOLUTION, replace={"masked_softmax": WARNING_SOLUTION}))
    put("wrongdot", variant(SOLUTION, replace={"dot_product_attention": WRONG_DOT}))  # the control
    # tampering + wrong code
    put("patch", variant(SOLUTION, replace={"dot_product_attention": PATCH_CHECKS + WRONG_DOT}))
    put("transformer", variant(SOLUTION, replace={"dot_product_attention": TRANSFORMER + WRONG_DOT}))
    put("writeout", variant(SOLUTION, replace={"dot_product_attention":
                                               WRITE_OUTPUT.format(targets=targets) + WRONG_DOT}))
    put("detach", variant(SOLUTION, replace={"dot_product_attention":
                                             DETACH.format(report=report, targets=targets) + WRONG_DOT}))
    # robustness
    put("loop", variant(SOLUTION, append={"masked_softmax": "while True:\n    pass"}))
    put("membomb", variant(SOLUTION, replace={"answers": "_blocks = []\nwhile True:\n"
                                                         "    _blocks.append(torch.ones(2**27))"}))
    put("osexit", variant(SOLUTION, replace={"answers": "import os\nos._exit(0)"}))
    put("segfault", variant(SOLUTION, replace={"answers": SEGV}))
    put("deleted", variant(SOLUTION, drop=["test_additive_public", "test_masked_softmax"]))
    put("edited", variant(SOLUTION, replace={"dot_product_attention": WRONG_DOT,
                                             "test_dot_product": "assert True",
                                             "test_dot_product_public": "assert True"}))
    text = SOLUTION.read_text("utf-8")
    (sub / "malformed").mkdir()
    (sub / "malformed" / "scoring.ipynb").write_text(text.replace('"cells": [', '"cells": [[,', 1))
    (sub / "truncated").mkdir()
    (sub / "truncated" / "scoring.ipynb").write_text(text[: len(text) * 2 // 5])
    (sub / "empty_folder").mkdir()
    return sub


def _sandbox_processes() -> list[int]:
    """Live sandbox processes (each names itself "course-sandbox") among our descendants:
    orphans are re-parented to the grader (a child subreaper), i.e. to this process."""
    pids = []
    for pid, state in descendants().items():
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if comm == "course-sandbox" and state != "Z":
            pids.append(pid)
    return pids


def _book(out: Path) -> Path:
    return out / "lesson03_scoring" if (out / "lesson03_scoring").is_dir() else out


def _digest(out: Path) -> dict[str, str]:
    out = _book(out)
    files = [out / "grades.csv", out / "grades.json", *sorted((out / "feedback").glob("*.html"))]
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    base = tmp_path_factory.mktemp("class")
    out = base / "grades"
    report_dir = tempfile.mkdtemp(prefix="grading-test-")
    os.chmod(report_dir, 0o777)  # the sandbox may run as nobody
    report = os.path.join(report_dir, "detached.pid")
    sub = _class_folder(base, out, report)
    code = cli.main(["grade", "lesson03_scoring", str(sub), "--out", str(out), "--jobs", "2",
                     "--cell-timeout", "6", "--call-timeout", "6", "--memory-mb", "2048", "--quiet"])
    assert code == 0
    digest = _digest(out)
    time.sleep(3)  # the detached attacker would strike now
    rows = {r["student"]: r for r in csv.DictReader((_book(out) / "grades.csv").open())}
    results = {r["student"]: r for r in json.loads((_book(out) / "grades.json").read_text())["results"]}
    yield {"out": _book(out), "rows": rows, "results": results, "digest": digest, "report": report}
    shutil.rmtree(report_dir, ignore_errors=True)


def _wrong_total(graded) -> float:
    """What the wrong code alone scores: an attack paired with it must score no more."""
    total = float(graded["rows"]["wrongdot"]["total"])
    assert 0 < total < FULL
    return total


def _row(graded, student):
    return graded["rows"][student]


def _failed(graded, student):
    return {t["grade_id"]: t["message"] for nb in graded["results"][student]["notebooks"]
            for t in nb["tests"] if not t["passed"]}


def _feedback(graded, student):
    return (graded["out"] / "feedback" / f"{student}.html").read_text()


def test_rows_recorded_for_all(graded):
    expected = {"solution", "stub", "warning", "wrongdot", "patch", "transformer", "writeout", "detach", "loop", "membomb",
                "osexit", "segfault", "deleted", "edited", "malformed", "truncated", "empty_folder"}
    assert set(graded["rows"]) == expected
    assert list(graded["rows"]) == sorted(expected)  # rows sorted for stable regrades
    for row in graded["rows"].values():
        assert float(row["max"]) == POINTS.maximum


def test_solution_full_marks_and_stub_zero(graded):
    assert float(_row(graded, "solution")["total"]) == FULL
    assert _row(graded, "solution")["status"] == "ok"
    assert float(_row(graded, "stub")["total"]) == 0.0


def test_honest_warning_and_prints_get_full_marks(graded):
    assert float(_row(graded, "warning")["total"]) == FULL


def test_monkeypatching_checks_gains_nothing(graded):
    assert _row(graded, "patch")["test_dot_product"] == "0"
    assert "max abs error" in _failed(graded, "patch")["test_dot_product"]
    assert float(_row(graded, "patch")["total"]) == _wrong_total(graded)


def test_input_transformer_gains_nothing(graded):
    assert _row(graded, "transformer")["test_dot_product"] == "0"
    assert float(_row(graded, "transformer")["total"]) == _wrong_total(graded)


def test_writing_the_gradebook_during_grading_gains_nothing(graded):
    assert _row(graded, "writeout")["test_dot_product"] == "0"
    assert "attacker" not in graded["rows"]
    assert "999" not in (graded["out"] / "grades.csv").read_text()


def test_detached_process_is_killed_and_changes_nothing(graded):
    assert _row(graded, "detach")["test_dot_product"] == "0"
    assert _digest(graded["out"]) == graded["digest"]  # 3 s after grading: unchanged
    assert "HACKED" not in (graded["out"] / "grades.csv").read_text()
    assert _sandbox_processes() == []
    if os.path.exists(graded["report"]):
        pid = int(Path(graded["report"]).read_text() or 0)
        assert pid and not os.path.exists(f"/proc/{pid}"), "the detached attacker is still alive"


def test_infinite_loop_times_out_and_is_recorded(graded):
    row = _row(graded, "loop")
    assert row["status"] == "timeout"
    assert "did not finish within 6 s" in _feedback(graded, "loop")
    # the loop sat in the masked_softmax cell; after the restart, later cells still ran
    assert row["test_answer_variance"] == fmt(POINTS.tests["test_answer_variance"])


def test_memory_bomb_is_recorded(graded):
    row = _row(graded, "membomb")
    failed = _failed(graded, "membomb")
    assert set(failed) == set(ANSWER_TESTS) and "test_answer_variance" in failed
    assert float(row["total"]) == POINTS.without(ANSWER_TESTS) < FULL


@pytest.mark.parametrize("student, status", [("osexit", "sandbox died"), ("segfault", "sandbox died")])
def test_dying_sandbox_is_recorded_and_restarted(graded, student, status):
    row = _row(graded, student)
    assert row["status"] == status
    assert float(row["total"]) == POINTS.without(ANSWER_TESTS) < FULL  # only the answers cell was lost
    assert "the sandbox process died" in _feedback(graded, student)


@pytest.mark.parametrize("student, words", [("malformed", "not valid notebook JSON"),
                                            ("truncated", "looks truncated"),
                                            ("empty_folder", "no notebook submitted")])
def test_unreadable_or_missing_notebook_gets_a_zero_row_and_message(graded, student, words):
    row = _row(graded, student)
    assert float(row["total"]) == 0.0
    assert row["status"] in ("invalid notebook", "missing")
    assert words in _feedback(graded, student)


def test_deleted_test_cells_are_still_run(graded):
    assert float(_row(graded, "deleted")["total"]) == FULL
    assert "missing from your notebook" in _feedback(graded, "deleted")


def test_edited_test_cells_do_not_help(graded):
    assert _row(graded, "edited")["test_dot_product"] == "0"
    assert float(_row(graded, "edited")["total"]) == _wrong_total(graded)
    assert "was modified in your notebook" in _feedback(graded, "edited")


def test_feedback_never_shows_hidden_tests(graded):
    hidden_snippets = ["_ref_masked_softmax", "_RefDotProduct", "_RefAdditive", "BEGIN HIDDEN", "padding invariance"]
    for html in (graded["out"] / "feedback").glob("*.html"):
        text = html.read_text()
        for snippet in hidden_snippets:
            assert snippet not in text, (html.name, snippet)
        assert "course_grader/" not in text and "course_lib/grading" not in text  # no tracebacks into the grader


def test_feedback_says_what_failed(graded):
    assert "max abs error" in _feedback(graded, "patch")
    assert "DotProductAttention weights" in _feedback(graded, "patch")
