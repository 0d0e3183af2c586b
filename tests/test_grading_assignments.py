"""Data-driven checks of every assignment in solutions/ (add an assignment: nothing to edit here).

For each ``solutions/<a>/``: the solution scores full marks, the released stub
(``exercises/<a>/``) scores zero, each typical mistake of ``solutions/<a>/mistakes.py``
loses the points of the tests it names, regenerating ``exercises/`` (and the Chinese
``zh/exercises/`` from ``zh/solutions/``) with nbgrader gives no diff, and the source notebook runs clean in a real Jupyter kernel (the same test code
works with the learner's local objects). Each assignment's notebooks are graded once, as a
class, by a module-scoped fixture.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from course_grader.cli import find_submissions, grade_many
from course_tools.grading_dev.generate import EDITIONS, generate_exercises, list_assignments
from course_grader.notebook import Assignment
from course_grader.sandbox import SandboxConfig
from course_tools.grading_dev.testing import load_mistakes, variant, write_notebook

pytestmark = [pytest.mark.sandbox]

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENTS = list_assignments(ROOT)
#: Typical mistakes graded by the real grader; the trivial functions of each mistakes.py (issue 29, several
#: hundred) are checked in-process by tests/test_grading_fairness.py, whose harness agrees with the grader.
MISTAKES = [(a, m) for a in ASSIGNMENTS for m, s in load_mistakes(ROOT / "solutions" / a).items() if not s.get("trivial")]


def _grade_ids(nb_path: Path) -> set[str]:
    nb = json.loads(nb_path.read_text("utf-8"))
    return {c.get("metadata", {}).get("nbgrader", {}).get("grade_id") for c in nb["cells"]} - {None}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """{assignment: {learner: SubmissionResult}} for solution, stub and every mistake,
    all assignments graded in one parallel run."""
    items = []
    for name in ASSIGNMENTS:
        assignment = Assignment.load(ROOT / "solutions" / name)
        sub = tmp_path_factory.mktemp(name)
        for nb_name, source in assignment.notebooks.items():
            write_notebook(variant(source.path), sub / "solution" / f"{nb_name}.ipynb")
            stub = ROOT / "exercises" / name / f"{nb_name}.ipynb"
            if stub.exists():  # else test_released_stub_scores_zero says to generate it
                (sub / "stub").mkdir(exist_ok=True)
                shutil.copy(stub, sub / "stub" / f"{nb_name}.ipynb")
            for mistake, spec in load_mistakes(ROOT / "solutions" / name).items():
                if spec.get("trivial"):
                    continue
                ids = _grade_ids(source.path)
                replace = {k: v for k, v in spec["replace"].items() if k in ids}
                write_notebook(variant(source.path, replace=replace), sub / f"mistake_{mistake}" / f"{nb_name}.ipynb")
        items += [(assignment, student, nbs) for student, nbs in sorted(find_submissions(sub, assignment).items())]
    results = grade_many(items, jobs=2, progress=False, config=SandboxConfig(cell_timeout=60, call_timeout=30),
                         diagnose=False)  # what names a mistake: tests/test_grading_feedback_teaches.py
    out: dict = {name: {} for name in ASSIGNMENTS}
    for (assignment, student, _), result in zip(items, results):
        out[assignment.name][student] = result
    return out


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_solution_scores_full_marks(graded, name):
    result = graded[name]["solution"]
    failed = {t.grade_id: t.message for nb in result.notebooks for t in nb.tests if not t.passed}
    assert failed == {}
    # every auto-graded point; the model answers of the written cells wait for the teacher (no score)
    written = sum(w.max_points for w in result.written)
    assert all(w.answered and w.points is None for w in result.written)
    assert result.pending_manual == written
    assert result.total == result.max_total - written > 0
    assert result.status == "ok"


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_released_stub_scores_zero(graded, name):
    assert "stub" in graded[name], f"exercises/{name}/ is missing: run scripts/generate_exercises.sh"
    result = graded[name]["stub"]
    assert result.total == 0, [t.grade_id for nb in result.notebooks for t in nb.tests if t.passed]


@pytest.mark.parametrize("name, mistake", MISTAKES)
def test_typical_mistake_loses_points(graded, name, mistake):
    spec = load_mistakes(ROOT / "solutions" / name)[mistake]
    result = graded[name][f"mistake_{mistake}"]
    outcome = {t.grade_id: t for nb in result.notebooks for t in nb.tests}
    for gid in spec["fails"]:
        assert not outcome[gid].passed, f"{mistake}: {gid} should fail"
        assert outcome[gid].message, f"{mistake}: {gid} failed without a message"
    tolerated = set(spec["fails"]) | set(spec.get("may_fail", []))
    wrongly_failed = {g: t.message for g, t in outcome.items() if not t.passed and g not in tolerated}
    assert wrongly_failed == {}, f"{mistake} also failed unrelated tests"
    assert result.total < result.max_total


def test_mistake_files_name_real_cells():
    for name in ASSIGNMENTS:
        ids: set[str] = set()
        for nb in (ROOT / "solutions" / name).glob("*.ipynb"):
            ids |= _grade_ids(nb)
        for mistake, spec in load_mistakes(ROOT / "solutions" / name).items():
            assert set(spec["replace"]) <= ids, (name, mistake)
            assert set(spec["fails"]) <= ids, (name, mistake)


@pytest.mark.parametrize("edition", list(EDITIONS))
def test_regenerating_exercises_gives_no_diff(tmp_path, edition):
    """English: solutions/ -> exercises/; Chinese: zh/solutions/ -> zh/exercises/ (issue 23)."""
    source, release = EDITIONS[edition]
    assert (ROOT / source).is_dir(), (f"{source}/ is missing: build the Chinese sources with "
                                      "`.venv/bin/python scripts/i18n.py build`, then run scripts/generate_exercises.sh")
    generated = generate_exercises(ROOT, release_dir=tmp_path, source=source)
    assert generated
    names = {p.parent.name for p in generated}
    assert names == set(ASSIGNMENTS), f"{source}/ does not hold every assignment of solutions/: {sorted(names)}"
    committed_dirs = {p.name for p in (ROOT / release).iterdir() if p.is_dir()} if (ROOT / release).is_dir() else set()
    assert committed_dirs <= names, f"{release}/ has assignments that {source}/ does not: {sorted(committed_dirs - names)}"
    for path in generated:
        committed = ROOT / release / path.parent.name / path.name
        extra = sorted(p.name for p in path.parent.iterdir() if p.suffix != ".ipynb")
        assert extra == [], f"files released to learners besides notebooks: {extra}"
        assert committed.exists(), f"{committed} is missing: run scripts/generate_exercises.sh"
        # generation is deterministic, so the JSON must match exactly
        assert json.loads(path.read_text("utf-8")) == json.loads(committed.read_text("utf-8")), \
            f"{committed} is stale: run scripts/generate_exercises.sh"
    # released notebooks hide solutions and hidden tests
    for path in generated:
        text = path.read_text("utf-8")
        assert "BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text


@pytest.fixture(scope="module")
def kernel_errors():
    """Run every source notebook, cell by cell, in ONE real Jupyter kernel (``%reset -f``
    between notebooks): {assignment: [errors]}. In the kernel, test cells see the learner's
    own objects, as when a learner runs the public tests or nbgrader's Validate."""
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3")
    errors: dict[str, list[str]] = {}
    try:
        for name in ASSIGNMENTS:
            errors[name] = []
            for path in sorted((ROOT / "solutions" / name).glob("*.ipynb")):
                kc.execute_interactive(f"%reset -f\nimport os\nos.chdir({str(path.parent)!r})", timeout=60)
                nb = json.loads(path.read_text("utf-8"))
                for i, cell in enumerate(nb["cells"]):
                    if cell["cell_type"] != "code":
                        continue
                    source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
                    reply = kc.execute_interactive(source, timeout=600, output_hook=lambda msg: None)
                    if reply["content"]["status"] != "ok":
                        errors[name].append(f"{path.name} cell {i}: {reply['content'].get('ename')}: "
                                            f"{reply['content'].get('evalue')}")
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    return errors


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_source_notebook_runs_in_a_jupyter_kernel(kernel_errors, name):
    """Public and hidden tests also work with the learner's local objects (self-check mode)."""
    assert kernel_errors[name] == []
