"""Unit tests of the grading engine: checks toolkit, wire protocol, proxies, notebook plans,
process hygiene, and the CLI end to end (regrade, --check)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from course_grader import checks
from course_grader import cli, protocol
from course_grader.notebook import (NotebookError, SourceNotebook, load_notebook_json, plan_submission,
                                         release_source, released_written, scan_imports)
from course_grader.rpc import LearnerError, RemoteObject, Session
from course_grader.sandbox import SandboxConfig, SandboxDied, descendants, kill_descendants, set_child_subreaper
from course_tools.grading_dev.points import assignment_points, fmt
from course_tools.grading_dev.testing import variant, write_notebook

TIER = "fast"  # course_tools/tiers.py

ROOT = Path(__file__).resolve().parents[1]
SOLUTION = ROOT / "solutions" / "lesson03_scoring" / "scoring.ipynb"
STUB = ROOT / "exercises" / "lesson03_scoring" / "scoring.ipynb"
#: lesson 3's points, read from its instructor notebook (the tests below state their expectations with it)
POINTS = assignment_points(SOLUTION)


# -- checks toolkit ----------------------------------------------------------------------

def test_assert_tensor_close_reports_max_error_index_and_shapes():
    expected = torch.zeros(2, 3, 5)
    actual = expected.clone()
    actual[1, 0, 2] = 0.31
    actual[0, 0, 0] = 0.01
    with pytest.raises(AssertionError) as info:
        checks.assert_tensor_close(actual, expected, name="masked_softmax")
    msg = str(info.value)
    assert msg.startswith("masked_softmax: max abs error 0.31 at index (1, 0, 2)")
    assert "shape" not in msg  # the shapes agree: not worth a word
    checks.assert_tensor_close(expected + 1e-7, expected, name="ok")  # within tolerance


def test_assert_tensor_close_shape_nan_and_type():
    with pytest.raises(AssertionError, match=r"expected shape \(2, 3\), got \(3, 2\)"):
        checks.assert_tensor_close(torch.zeros(3, 2), torch.zeros(2, 3), name="x")
    bad = torch.zeros(4)
    bad[2] = float("nan")
    with pytest.raises(AssertionError, match=r"index \(2,\) is NaN"):
        checks.assert_tensor_close(bad, torch.zeros(4), name="x")
    with pytest.raises(AssertionError, match="expected a tensor"):
        checks.assert_tensor_close([0.0, 0.0], torch.zeros(2), name="x")
    checks.assert_tensor_close(np.zeros(2), torch.zeros(2), name="numpy is fine")


def test_assert_equal_number_choice():
    class AlwaysEqual:
        def __eq__(self, other):
            return True

    with pytest.raises(AssertionError):
        checks.assert_equal(AlwaysEqual(), 64, name="q")
    with pytest.raises(AssertionError):
        checks.assert_equal(True, 1, name="bool is not a number here")
    checks.assert_equal((2, 3), torch.Size([2, 3]), name="shape")
    checks.assert_number("64", 64, name="q")
    with pytest.raises(AssertionError, match="not answered"):
        checks.assert_number(None, 64, name="q")
    with pytest.raises(AssertionError, match="not the right value"):
        checks.assert_number(8, 64, name="q")
    checks.assert_choice(" B) ", "b", name="q", choices="abcd")
    with pytest.raises(AssertionError, match="not one of the choices"):
        checks.assert_choice("e", "b", name="q", choices="abcd")
    with pytest.raises(AssertionError, match="not the right choice"):
        checks.assert_choice("a", "b", name="q")


def test_call_turns_exceptions_into_clear_failures():
    def broken(x):
        raise ValueError("scores must be 3-D")

    with pytest.raises(AssertionError, match="calling broken raised ValueError: scores must be 3-D"):
        checks.call(broken, 1)
    with pytest.raises(SandboxDied):
        checks.call(lambda: (_ for _ in ()).throw(SandboxDied("gone")))


def test_failed_call_shows_only_the_learners_frames():
    """In Jupyter (IPython renders ``_render_traceback_``), a stub's failure shows the learner's
    ``raise NotImplementedError()`` and the test line, never a frame of checks.py."""
    def masked_softmax(scores):
        raise NotImplementedError()

    with pytest.raises(checks.CheckFailed) as info:
        checks.call(masked_softmax, torch.zeros(2), name="masked_softmax")
    assert str(info.value) == "calling masked_softmax raised NotImplementedError"
    text = "\n".join(info.value._render_traceback_())
    assert "in masked_softmax" in text and "raise NotImplementedError()" in text
    assert "checks.call(masked_softmax" in text  # the test's own line
    assert "checks.py" not in text
    with pytest.raises(checks.CheckFailed) as info:
        checks.assert_shape(torch.zeros(2), (3,), name="out")
    assert "checks.py" not in "\n".join(info.value._render_traceback_())


def test_fresh_rng_is_random_unless_replayed():
    a, b = checks.fresh_seed(), checks.fresh_seed()
    assert a != b
    checks.begin_test(b"7", "t1")
    first = [checks.fresh_seed() for _ in range(3)]
    checks.begin_test(b"7", "t1")
    assert [checks.fresh_seed() for _ in range(3)] == first
    checks.begin_test(b"7", "t2")
    assert checks.fresh_seed() != first[0]
    checks.begin_test(None, "")


# -- protocol ----------------------------------------------------------------------------

def _roundtrip(obj):
    frame = protocol.pack(obj)
    return protocol.unpack(frame[protocol.header_size():])


class SneakyTensor(torch.Tensor):
    """A tensor subclass could override __eq__ / __torch_function__; it must not get through."""


def test_protocol_refuses_tensor_subclasses_and_objects():
    buf = io.BytesIO()
    torch.save([torch.ones(2).as_subclass(SneakyTensor)], buf)  # as the values archive of a message
    control = b'{"__t":"leaf","i":0}'
    with pytest.raises(protocol.ProtocolError, match="transferred safely"):
        protocol.unpack(len(control).to_bytes(4, "big") + control + buf.getvalue())
    with pytest.raises(protocol.ProtocolError):
        protocol.decode({"a": 1}, None)  # untagged dict
    with pytest.raises(protocol.ProtocolError):
        protocol.decode({"__t": "handle", "id": 1}, None)
    value = protocol.decode(_roundtrip({"__t": "dict", "ordered": False,
                                        "items": [["w", torch.ones(2)], ["n", (1, 2.5, None, "s")]]}), None)
    assert torch.equal(value["w"], torch.ones(2)) and value["n"] == (1, 2.5, None, "s")


# -- proxies against a real sandbox --------------------------------------------------------

LEARNER = '''
import torch
from torch import nn
import numpy as np

class Scale(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.lin = nn.Linear(n, n, bias=False)
        self.calls = 0

    def forward(self, x, *, twice=False):
        self.calls += 1
        y = self.lin(x)
        return 2 * y if twice else y

def pair(x):
    return {"sum": x.sum(), "shape": tuple(x.shape), "arr": np.arange(3)}

def explode():
    raise ValueError("boom")

ANSWER = 64
torch = "not torch"   # shadowing must not reach the test namespace
'''


@pytest.fixture(scope="module")
def session():
    s = Session(SandboxConfig(cell_timeout=30, call_timeout=20), trusted_imports="import torch")
    s.start()
    run = s.exec_cell(0, LEARNER)
    assert run.status == "ok", run.message
    yield s
    s.close()


@pytest.mark.sandbox  # runs learner code in bubblewrap
def test_proxies_call_modules_and_return_values(session):
    ns = session.namespace()
    assert ns["ANSWER"] == 64
    assert ns["torch"] is torch
    assert isinstance(ns["Scale"], RemoteObject)
    model = ns["Scale"](3)
    ref = torch.nn.Linear(3, 3, bias=False)
    model.load_state_dict({"lin.weight": ref.weight})
    x = torch.randn(4, 3)
    out = model(x, twice=True)
    assert type(out) is torch.Tensor
    torch.testing.assert_close(out, 2 * ref(x).detach())
    assert model.calls == 1
    assert len(list(model.parameters())) == 1
    checks.assert_isinstance(model, torch.nn.Module, name="model")
    got = ns["pair"](x)
    assert got["shape"] == (4, 3) and isinstance(got["arr"], np.ndarray)
    with pytest.raises(LearnerError, match="explode raised ValueError: boom"):
        ns["explode"]()
    assert not hasattr(model, "no_such_attribute")


@pytest.mark.sandbox  # runs learner code in bubblewrap
def test_sandbox_is_isolated(session):
    run = session.exec_cell(1, "import os\nWHO = (os.getuid(), os.getcwd())\nprint('hello')")
    assert run.status == "ok" and run.stdout == "hello\n"
    uid, cwd = session.namespace()["WHO"]
    assert cwd == "/tmp" != os.getcwd()  # the sandbox's own private tmpfs (bubblewrap, issue 9)
    denied = session.exec_cell(2, f"open({str(ROOT / 'grading-test-canary')!r}, 'w')")
    if not ROOT.is_relative_to("/tmp"):  # under /tmp the write lands in the sandbox's own tmpfs
        assert denied.status == "error" and "Read-only file system" in denied.message
    assert not (ROOT / "grading-test-canary").exists()


# -- notebooks ---------------------------------------------------------------------------

def test_release_source_matches_nbgrader_output():
    source = json.loads(SOLUTION.read_text())
    released = json.loads(STUB.read_text())
    released["cells"] = [c for c in released["cells"] if c.get("id") != "about-the-checks"]  # added at release
    for src_cell, rel_cell in zip(source["cells"], released["cells"]):
        meta = src_cell["metadata"].get("nbgrader", {})
        if meta.get("grade") and meta.get("solution"):  # a written answer: nbgrader's stub, no mark scheme
            ours = released_written("".join(src_cell["source"]))
        else:
            ours = release_source("".join(src_cell["source"]), solution=bool(meta.get("solution")),
                                  test=bool(meta.get("grade")) and not meta.get("solution"))
        assert ours == "".join(rel_cell["source"])


def test_plan_uses_source_tests_and_handles_deleted_edited_and_bare_cells():
    source = SourceNotebook.load(SOLUTION)
    learner = variant(SOLUTION, drop=["test_masked_softmax"], replace={"test_dot_product": "assert True"})
    plan = plan_submission(source, learner)
    tests = [s.test.grade_id for s in plan.steps if s.kind == "test"]
    assert tests == [t.grade_id for t in source.tests]  # all run, in source order
    dot = next(s for s in plan.steps if s.kind == "test" and s.test.grade_id == "test_dot_product")
    assert "### BEGIN HIDDEN TESTS" in dot.test.source
    assert any("missing" in n for n in plan.notes) and any("modified" in n for n in plan.notes)
    bare = plan_submission(source, variant(STUB, strip_metadata=True))
    assert [s.test.grade_id for s in bare.steps if s.kind == "test"] == tests
    assert not any("assert_shape(weights" in s.source for s in bare.steps if s.kind == "learner")


def test_broken_notebooks_give_clear_errors(tmp_path):
    (tmp_path / "a.ipynb").write_text('{"cells": [')
    with pytest.raises(NotebookError, match="truncated"):
        load_notebook_json(tmp_path / "a.ipynb")
    (tmp_path / "b.ipynb").write_text('{"metadata": {}}')
    with pytest.raises(NotebookError, match="not a Jupyter notebook"):
        load_notebook_json(tmp_path / "b.ipynb")


def test_scan_flags_reference_imports():
    found = scan_imports(["from course_lib.scoring import DotProductAttention",
                          "from course_grader.checks import call\nimport torch"])
    assert found == ["course_lib.scoring"]


# -- process hygiene ---------------------------------------------------------------------

def test_kill_descendants_catches_double_forked_setsid_process():
    assert set_child_subreaper()
    baseline = frozenset(descendants())
    code = ("import os, time\n"
            "if os.fork() == 0:\n"
            "    os.setsid()\n"
            "    if os.fork() == 0:\n"
            "        time.sleep(60)\n"
            "    os._exit(0)\n")
    subprocess.run([sys.executable, "-c", code], check=True)
    deadline = time.monotonic() + 5
    while not (set(descendants()) - baseline) and time.monotonic() < deadline:
        time.sleep(0.05)
    orphans = set(descendants()) - baseline
    assert orphans, "the detached grandchild should have been re-parented to us"
    assert kill_descendants(baseline) >= 1
    assert not (set(descendants()) - baseline)


# -- CLI end to end ----------------------------------------------------------------------

#: Appended to the solution's answers cell: question 1 a wrong number (its public part checks only
#: that it is a number) and question 2 a wrong choice; every other answer stays the solution's.
WRONG_ANSWERS = 'ANSWER_VARIANCE = VARIANT["d_question"] + 1\nANSWER_SQRT = "a" if ANSWER_SQRT != "a" else "b"'
WRONG_TESTS = ["test_answer_variance", "test_answer_sqrt"]


def _csv_line(student: str, scores: dict[str, str], total: float, pending: float, status: str) -> str:
    """The gradebook row the grader must write, from lesson 3's columns (``scores``: column ->
    cell, every other test column its full points, a written column "" (pending))."""
    cells = [scores.get(c, fmt(POINTS.tests[c]) if c in POINTS.tests else "") for c in POINTS.columns]
    return ",".join([student, "lesson03_scoring", *cells, fmt(total), fmt(POINTS.maximum),
                     *([fmt(pending)] if POINTS.written else []), status])


@pytest.mark.sandbox  # runs learner code in bubblewrap
def test_cli_regrade_is_identical_and_keeps_previous_gradebook(tmp_path, capsys):
    sub = tmp_path / "class"
    write_notebook(variant(SOLUTION, append={"answers": WRONG_ANSWERS}), sub / "ben" / "scoring.ipynb")
    (sub / "ann.ipynb").write_text("{ not a notebook")
    top = tmp_path / "grades"
    out = top / "lesson03_scoring"  # one folder per assignment
    args = ["lesson03_scoring", str(sub), "--out", str(top), "--jobs", "1"]  # --jobs 2: test_grading_security
    assert cli.main(args) == 0
    first = (out / "grades.csv").read_text()
    lines = first.splitlines()
    assert lines[0] == ",".join(["student", "assignment", *POINTS.columns, "total", "max",
                                 *(["pending_manual"] if POINTS.written else []), "status"])
    # an unreadable notebook: every column 0 (a written answer too: nothing to grade), nothing pending
    assert lines[1] == _csv_line("ann", dict.fromkeys(POINTS.columns, "0"), 0, 0, "invalid notebook")
    # ben: the two wrong answers lose exactly their tests' points; his written answers wait for the teacher
    ben = POINTS.without(WRONG_TESTS)
    assert 0 < ben < POINTS.auto
    assert lines[2] == _csv_line("ben", dict.fromkeys(WRONG_TESTS, "0"), ben, POINTS.manual, "ok")
    assert (out / "feedback" / "ann.html").exists() and (out / "feedback" / "ben.html").exists()
    assert json.loads((out / "grades.json").read_text())["answer_key"]["path"] == str(SOLUTION.parent)
    printed = capsys.readouterr().out
    assert f"answer key: {SOLUTION.parent} (the nbgrader course at {ROOT})" in printed  # the repository
    assert cli.main(args) == 0
    printed = capsys.readouterr().out
    assert "previous grades.csv kept as" in printed
    assert (out / "grades.csv").read_text() == first  # fresh random inputs, same grades
    kept = list(out.glob("grades.*.csv"))
    assert len(kept) == 1 and kept[0].read_text() == first
    assert list(out.glob("feedback.*"))
    # a second assignment into the same --out moves nothing of the first aside
    stub5 = ROOT / "exercises" / "lesson05_multihead" / "multihead.ipynb"
    write_notebook(json.loads(stub5.read_text()), tmp_path / "class5" / "ben" / "multihead.ipynb")
    assert cli.main(["lesson05_multihead", str(tmp_path / "class5"), "--out", str(top), "--jobs", "1"]) == 0
    assert (out / "grades.csv").read_text() == first and len(list(out.glob("grades.*.csv"))) == 1
    assert (top / "lesson05_multihead" / "grades.csv").is_file()
    five = assignment_points("lesson05_multihead")
    pending = POINTS.manual  # ben's lesson 3 written answers (his lesson 5 stub's are blank: 0, not pending)
    tail = (lambda p: [fmt(p)]) if pending else (lambda p: [])
    assert (top / "lms_grades.csv").read_text().splitlines() == [
        ",".join(["student,lesson03_scoring,lesson05_multihead,total", *(["pending_manual"] if pending else [])]),
        ",".join(["ann", "0", "", "0", *tail(0)]), ",".join(["ben", fmt(ben), "0", fmt(ben), *tail(pending)])]
    assert (top / "lms_max_points.csv").read_text().splitlines()[1:] == [
        f"lesson03_scoring,{fmt(POINTS.maximum)}", f"lesson05_multihead,{fmt(five.maximum)}",
        f"total,{fmt(POINTS.maximum + five.maximum)}"]


def _solution_code(assignment: str, notebook: str) -> dict[str, str]:
    """grade id -> the solution's code of each solution cell, as a learner writes it (no markers)."""
    solution = json.loads((ROOT / "solutions" / assignment / f"{notebook}.ipynb").read_text("utf-8"))
    code = {}
    for cell in solution["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("solution"):
            code[meta["grade_id"]] = "\n".join(line for line in "".join(cell["source"]).split("\n")
                                               if "### " not in line)
    return code


def _learner_notebook(path: Path, *, replace: dict[str, str] | None = None, edit_tests: dict[str, str] | None = None,
                      assignment: str = "lesson03_scoring", notebook: str = "scoring") -> Path:
    """A learner's notebook as a learner has it: the RELEASED notebook (nbgrader checksums,
    metadata) with the solution cells filled in (from the solution, or ``replace``)."""
    code = _solution_code(assignment, notebook)
    code.update(replace or {})
    code.update(edit_tests or {})
    released = json.loads((ROOT / "exercises" / assignment / f"{notebook}.ipynb").read_text("utf-8"))
    return write_notebook(variant(released, replace=code), path)


@pytest.mark.sandbox  # runs learner code in bubblewrap
def _hidden_line(text: str) -> None:
    """The report names every test with hidden parts and their points (derived from the notebook)."""
    later = POINTS.of_kind("hidden", "public+hidden")
    assert later, "lesson 3 has tests with hidden parts"
    assert (f"{fmt(POINTS.sum(later))} more points come from hidden tests that run only when your teacher grades: "
            + ", ".join(f"{t} ({fmt(POINTS.tests[t])})" for t in later) + ".") in text, text
    for t in POINTS.of_kind("hidden"):
        assert f"[ hidden ] {t} ({fmt(POINTS.tests[t])} points)" in text


@pytest.mark.sandbox  # runs learner code in bubblewrap (course-grade --check)
def test_cli_check_is_honest_about_hidden_points(tmp_path, capsys):
    # question 1 a wrong number (passes its public format check), question 2 not one of the choices
    answers = 'ANSWER_VARIANCE = VARIANT["d_question"] + 1\nANSWER_SQRT = "z"'
    solved = _solution_code("lesson03_scoring", "scoring")["answers"]
    nb = _learner_notebook(tmp_path / "mywork" / "scoring.ipynb", replace={"answers": solved + "\n" + answers})
    code = cli.main(["--check", str(nb)])
    text = capsys.readouterr().out
    assert code == 1
    assert text.startswith("Self-check of lesson03_scoring, notebook scoring.ipynb")  # from metadata, not mywork/
    failed = [line for line in text.splitlines() if "FAIL" in line]
    assert len(failed) == 1 and "test_answer_sqrt" in failed[0] and "not one of the choices" in failed[0]
    # a wrong number passes the public format check, and is not counted as points
    assert POINTS.kinds["test_answer_variance"] == "public+hidden"
    assert (f"[  PASS  ] test_answer_variance: public part passed; its {fmt(POINTS.tests['test_answer_variance'])} "
            "point(s) are decided by hidden tests") in text
    for t in POINTS.of_kind("public+hidden"):
        if t != "test_answer_sqrt":
            assert f"[  PASS  ] {t}: public part passed; its {fmt(POINTS.tests[t])} point(s)" in text, t
    public = POINTS.sum(POINTS.of_kind("public"))
    assert public > 0 and f"Public checks: {fmt(public)} of {fmt(public)} points." in text
    _hidden_line(text)
    assert f"Maximum grade: {fmt(POINTS.maximum)} points." in text


@pytest.mark.sandbox  # runs learner code in bubblewrap
def test_cli_check_catches_missing_sqrt_and_ignores_edited_tests(tmp_path, capsys):
    from course_tools.grading_dev.testing import load_mistakes
    mistakes = load_mistakes(ROOT / "solutions" / "lesson03_scoring")
    wrong = mistakes["mask_after_softmax"]["replace"]
    no_sqrt = mistakes["missing_sqrt"]["replace"]
    nb = _learner_notebook(tmp_path / "a" / "scoring.ipynb", replace=no_sqrt)
    assert cli.main(["--check", str(nb)]) == 1
    text = capsys.readouterr().out
    public = POINTS.of_kind("public")
    caught = [t for t in mistakes["missing_sqrt"]["fails"] if t in public]
    assert "test_dot_product_public" in caught  # a public mistake: a public check catches it
    for t in caught:
        assert f"[  FAIL  ] {t} (0/{fmt(POINTS.tests[t])})" in text
    assert f"Public checks: {fmt(POINTS.sum(public) - POINTS.sum(caught))} of {fmt(POINTS.sum(public))} points." in text
    # mask after the softmax, and the public test that would catch it emptied by the learner
    cheat = {**wrong, "test_masked_softmax_public": "pass"}
    nb = _learner_notebook(tmp_path / "b" / "scoring.ipynb", edit_tests=cheat)
    assert cli.main(["--check", str(nb)]) == 1
    text = capsys.readouterr().out
    one = fmt(POINTS.tests["test_masked_softmax_public"])
    assert f"[  ????  ] test_masked_softmax_public ({one} points): not checked: this test cell was changed" in text
    assert "--release" in text and f"{one} points were not checked: test_masked_softmax_public." in text
    # with the released notebook, its version of the test runs (and fails)
    release = ROOT / "exercises" / "lesson03_scoring" / "scoring.ipynb"
    assert cli.main(["--check", str(nb), "--release", str(release)]) == 1
    text = capsys.readouterr().out
    assert f"[  FAIL  ] test_masked_softmax_public (0/{one})" in text
    assert "was modified in your notebook; the original test was run instead" in text


@pytest.mark.slow  # --check runs the environment preflight (a grading worker) before it reads the notebook
def test_cli_check_needs_a_graded_notebook(tmp_path, capsys):
    nb = write_notebook({"nbformat": 4, "nbformat_minor": 5, "metadata": {},
                         "cells": [{"cell_type": "code", "metadata": {}, "source": "x = 1", "outputs": [],
                                    "execution_count": None}]}, tmp_path / "plain.ipynb")
    assert cli.main(["--check", str(nb)]) == 2
    assert "has no nbgrader test cells" in capsys.readouterr().err


@pytest.mark.sandbox  # runs learner code in bubblewrap
def test_cli_check_with_the_source_as_release_runs_public_parts_only(tmp_path, capsys):
    """Given the instructor's source as --release (no checksums, hidden regions), the hidden
    parts are still not run and the report still names them."""
    from course_tools.grading_dev.testing import load_mistakes
    mistake = load_mistakes(ROOT / "solutions" / "lesson03_scoring")["missing_sqrt"]
    nb = _learner_notebook(tmp_path / "scoring.ipynb", replace=mistake["replace"])
    assert cli.main(["--check", str(nb), "--release", str(SOLUTION)]) == 1
    text = capsys.readouterr().out
    _hidden_line(text)  # every hidden part is named, not run
    public = POINTS.of_kind("public")
    caught = [t for t in mistake["fails"] if t in public]
    assert f"Public checks: {fmt(POINTS.sum(public) - POINTS.sum(caught))} of {fmt(POINTS.sum(public))} points." in text


@pytest.mark.slow  # 3-9 s CPU (measured 2026-11-27): out of the fast tier
def test_the_checks_toolkit_is_the_graders_and_the_old_engine_paths_are_gone():
    # issue 19 moved the toolkit to course_grader.checks; issue 29 deleted the shim
    # course_lib.grading (and the engine aliases of issue 9 went before)
    import importlib

    for gone in ("course_lib.grading", "course_lib.grading.checks", "course_lib.grading.cli",
                 "course_lib.grading.nbgrader_course", "course_lib.grading.__main__"):
        with pytest.raises(ImportError):
            importlib.import_module(gone)
    res = subprocess.run([sys.executable, "-m", "course_grader", "--help"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "course-grade" in res.stdout, res.stderr[-500:]
    for sub in ("grade", "check", "init-course"):
        assert sub in res.stdout
