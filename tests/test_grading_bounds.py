"""Issue 29: learner bytes cost only that learner, and the self-check runs wholly in the sandbox.

Each attack here succeeded on the grader of commit f5ff00a:

* a learner whose values take long to decode kept a grading worker busy past the learner's
  budget (checked only between steps); now the worker is killed at the budget;
* ``--check`` transformed a notebook's IPython cells in the checking process itself (quadratic
  in the number of magics: 600 lines of ``%a`` cost about 12 s of its CPU);
* ``--check`` ran the notebook's test cells in the learner's own process, so a notebook that
  rebinds the checks toolkit passed its own public checks with wrong code;
* ``import course_grader.feedback`` imported torch (1.2 s), through the result types.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from course_grader.notebook import Assignment
from course_grader.sandbox import SandboxConfig
from course_tools.grading_dev.points import assignment_points
from course_tools.grading_dev.testing import load_mistakes, variant, write_notebook

TIER = "fast"  # course_tools/tiers.py

ROOT = Path(__file__).resolve().parents[1]
SOLUTION = ROOT / "solutions" / "lesson03_scoring" / "scoring.ipynb"
RELEASED = ROOT / "exercises" / "lesson03_scoring" / "scoring.ipynb"


def _code(source: str) -> dict:
    return {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": source}


def _learner(answers: dict[str, str], extra: str | None = None, at: int | None = None) -> dict:
    """The released lesson-3 notebook with the solution's code (or ``answers``) filled in and,
    optionally, one more learner cell (at the end, or at cell index ``at``)."""
    nb = json.loads(RELEASED.read_text("utf-8"))
    code = {}
    for cell in json.loads(SOLUTION.read_text("utf-8"))["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("solution"):
            code[meta["grade_id"]] = "\n".join(line for line in "".join(cell["source"]).split("\n") if "### " not in line)
    code.update(answers)
    nb = variant(nb, replace=code)
    if extra is not None:
        nb["cells"].insert(len(nb["cells"]) if at is None else at, _code(extra))
    return nb


def test_rendering_feedback_does_not_import_torch():
    """The result types live in course_grader.results: feedback and gradebooks render without
    the grading engine (it cost 1.2 s of torch import per rendering process)."""
    code = "import sys, course_grader.feedback; print(sorted(m for m in ('torch', 'numpy') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"


def test_the_grading_parent_imports_no_torch():
    """The process a teacher starts (the CLI, the journal, the gradebook, the nbgrader export, the
    sandbox's trusted side) needs no torch: only workers and sandboxes run tests. Importing it
    cost the grading parent ~1.7 s of CPU per run (through runner.py, then protocol.py)."""
    code = ("import sys, course_grader.cli, course_grader.journal, course_grader.nbgrader_export, "
            "course_grader.sandbox, course_grader.protocol, course_grader.preflight; "
            "print(sorted(m for m in ('torch', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"


@pytest.mark.sandbox
def test_self_check_parses_the_notebook_inside_the_sandbox(tmp_path):
    """600 lines of magics cost the checking process about 12 s of CPU (IPython's transformer
    in it); now it only reads the file and shows the sandbox's validated report."""
    from course_grader.selfcheck import self_check
    magics = "\n".join(f"%a {i}" for i in range(600))
    nb = write_notebook(_learner({}, extra=magics), tmp_path / "me" / "scoring.ipynb")
    self_check(RELEASED, config=SandboxConfig(cell_timeout=60))  # imports and fork server, outside the count
    start = time.process_time()
    report = self_check(nb, config=SandboxConfig(cell_timeout=5))
    used = time.process_time() - start
    assert used < 3.0, f"the checking process itself used {used:.1f} s of CPU on the learner's notebook"
    assert report.tests and all(t.passed for t in report.tests if t.kind == "public")


@pytest.mark.sandbox
def test_self_check_runs_the_tests_out_of_the_learners_process(tmp_path):
    """A notebook that rebinds and monkeypatches the checks (its own names, the toolkit module,
    torch) passed its public checks with a missing sqrt(d); its test cells now run in a process
    of their own inside the sandbox, with their own imports."""
    from course_grader.selfcheck import self_check
    no_sqrt = load_mistakes(ROOT / "solutions" / "lesson03_scoring")["missing_sqrt"]["replace"]
    patch = ("import torch\nimport course_grader.checks as _checks\n"
             "def _ok(*args, **kwargs):\n    return None\n"
             "assert_tensor_close = _checks.assert_tensor_close = _ok\n"
             "torch.allclose = lambda *a, **k: True\ntorch.testing.assert_close = _ok")
    nb = write_notebook(_learner(no_sqrt, extra=None), tmp_path / "me" / "scoring.ipynb")
    data = json.loads(nb.read_text("utf-8"))
    first_test = next(i for i, c in enumerate(data["cells"])
                      if c.get("metadata", {}).get("nbgrader", {}).get("grade"))
    data["cells"].insert(first_test, _code(patch))
    write_notebook(data, nb)
    report = self_check(nb, config=SandboxConfig(cell_timeout=60))
    verdict = {t.grade_id: t.passed for t in report.tests}
    assert verdict["test_dot_product_public"] is False, verdict
    assert verdict["test_masked_softmax_public"] is True


def test_closing_the_self_checks_learner_process_kills_it_at_once():
    """The self-check's learner process (forked inside its sandbox) is SIGKILLed and reaped when
    its session closes. Before, close() only waited, up to 10 s, for a process blocked reading
    its next request: every ``course-grade --check`` took 10 s more than its work."""
    import signal

    from course_grader.sandbox_main import _forked_learner_class

    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    learner = _forked_learner_class()(SandboxConfig())
    learner.pid = child.pid  # a child of this process blocked on its input, as the learner between requests
    try:
        learner.close()
        assert learner.exit_code == -signal.SIGKILL, learner.exit_code  # killed, not waited out (None)
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()


def _stall_cell() -> str:
    """A learner cell that makes every reply of its sandbox (but a cell's) one 48 MB message in the
    wire format (protocol.pack's frame): a JSON control part of 12 million one-element lists, which
    the trusted side parses in full (seconds of CPU) before it can count the value's parts and
    refuse it. The message is built here and shipped compressed, so the cell itself costs the
    sandbox almost nothing."""
    import base64
    import struct
    import zlib

    control = b'{"ok":true,"value":[' + b"[0]," * (12_000_000 - 1) + b"[0]]}"
    payload = struct.pack(">I", len(control)) + control
    frame = struct.pack(">Q", len(payload)) + payload
    blob = base64.b64encode(zlib.compress(frame, 9)).decode()
    return f'''
import base64, os, sys, zlib
_FRAME = zlib.decompress(base64.b64decode("{blob}"))
_Server = sys.modules["__main__"].Server
_send = _Server.send
def _stall(self, obj):
    if isinstance(obj, dict) and "ok" in obj and "stdout" not in obj:
        view = memoryview(_FRAME)
        while view:
            view = view[os.write(self.resp_fd, view):]
    else:
        _send(self, obj)
_Server.send = _stall
'''


@pytest.mark.sandbox
@pytest.mark.slow
def test_a_learner_whose_values_stall_decoding_is_killed_at_the_budget(tmp_path):
    """Every reply of this learner's sandbox is a 48 MB message that takes the trusted side seconds
    to parse (12 million JSON lists), so the budget, checked only between steps, would be overrun
    by a whole parse per step. The watchdog kills the worker at the budget;
    the classmate graded next by the same slot gets full marks."""
    from course_grader.cli import grade_many, learner_budget
    assignment = Assignment.load(SOLUTION.parent)
    first_code = next(i for i, c in enumerate(json.loads(RELEASED.read_text("utf-8"))["cells"]) if c["cell_type"] == "code")
    attacker = write_notebook(_learner({}, extra=_stall_cell(), at=first_code + 1), tmp_path / "attacker" / "scoring.ipynb")
    victim = write_notebook(variant(SOLUTION), tmp_path / "victim" / "scoring.ipynb")
    # the budget covers the learner's cells (decompressing 48 MB: a fraction of a second); each reply
    # costs the trusted side a parse of seconds, so the replies together outlast it
    config = SandboxConfig(cell_timeout=120, call_timeout=120, submission_timeout=20.0, startup_timeout=300)
    grace = 5.0
    items = [(assignment, "attacker", {"scoring": attacker}), (assignment, "victim", {"scoring": victim})]
    start = time.monotonic()
    bad, good = grade_many(items, jobs=1, config=config, progress=False, watchdog_grace=grace)
    elapsed = time.monotonic() - start
    assert str(bad.status) == "timeout" and bad.total == 0, bad
    # the watchdog's note names the budget; on a loaded machine the notebook's own budget (20 s,
    # checked between steps) may stop it first, before any stalling reply: either way bounded
    notes = bad.notebooks[0].notes
    assert not any("time budget" in note for note in notes) or any("time budget of 25 s" in n for n in notes), notes
    # full marks: every auto-graded point; the written cells wait for the teacher (in the maximum)
    points = assignment_points(SOLUTION)
    assert good.total == points.auto and good.max_total == assignment.max_points == points.maximum, good
    assert str(good.status) == "ok"
    assert learner_budget(assignment, config, grace) == 25.0
    # two workers' and fork servers' start-up, the classmate, and 25 s for the attacker
    assert elapsed < 400, elapsed


def test_release_source_is_nbgraders_own_clearing(tmp_path):
    """notebook.release_source gives what nbgrader's ClearSolutions / ClearHiddenTests give on
    every cell of every assignment, and refuses what they refuse: an unterminated or nested
    region was silently cut before (the rest of the cell vanished from the release)."""
    import nbformat
    from nbgrader.preprocessors import ClearHiddenTests, ClearSolutions

    from course_grader.notebook import NotebookError, SourceNotebook, release_source
    clear, hide = ClearSolutions(), ClearHiddenTests()

    def nbgrader(source: str, solution: bool, test: bool) -> str:
        cell = nbformat.v4.new_code_cell(source)
        if solution:
            clear._replace_solution_region(cell, "python")
        if test:
            hide._remove_hidden_test_region(cell)
        return cell.source

    cells = 0
    for path in sorted((ROOT / "solutions").glob("*/*.ipynb")):
        for cell in json.loads(path.read_text("utf-8"))["cells"]:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if cell["cell_type"] == "code" and (meta.get("solution") or meta.get("grade")):
                source = "".join(cell["source"])
                flags = {"solution": bool(meta.get("solution")), "test": not meta.get("solution")}
                assert release_source(source, **flags) == nbgrader(source, **flags), (path.name, meta["grade_id"])
                cells += 1
    assert cells > 100
    broken = {"unterminated solution": ("x = 1\n### BEGIN SOLUTION\ny = 2\n", True, False),
              "nested solution": ("### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION\n", True, False),
              "unterminated hidden tests": ("assert x\n### BEGIN HIDDEN TESTS\nassert y\n", False, True),
              "nested hidden tests": ("### BEGIN HIDDEN TESTS\n### BEGIN HIDDEN TESTS\n### END HIDDEN TESTS", False, True)}
    for source, solution, test in broken.values():  # (the keys name the cases for a reader)
        with pytest.raises(RuntimeError):
            nbgrader(source, solution, test)
        with pytest.raises(NotebookError):
            release_source(source, solution=solution, test=test)
    # an answer key with such a cell is refused with the cell named, not graded with a cut test
    nb = json.loads(SOLUTION.read_text("utf-8"))
    for cell in nb["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "test_dot_product":
            cell["source"] = [line for line in cell["source"] if "END HIDDEN TESTS" not in line]
    with pytest.raises(NotebookError, match=r"test_dot_product.*has no \"END HIDDEN TESTS\""):
        SourceNotebook.load(write_notebook(nb, tmp_path / "scoring.ipynb"))
