"""Per-learner variants (issue 30, item 1; course_grader.variants).

* The seed is the documented hash of (assignment, learner id), and the values come from the table.
* Which id: the grader's, else the hub user, else the id set with ``course-grade --set-id``,
  else "default" with a notice.
* The reference solution passes every value of every table (in process, the fairness harness).
* With the real grader (sandbox): learner A's answers copied into learner B's notebook lose those
  points; the same notebook graded under two ids gives two variants; nothing in the notebook
  (the hub variable, the VARIANT variable, the variants module of its own process) changes the
  variant it is graded with; grades.json, the feedback and the nbgrader export record it;
  ``--check`` uses the learner's id and warns when the notebook was filled in for another.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from course_grader import variants
from course_grader.feedback import render_html, render_text
from course_grader.notebook import Assignment
from course_grader.results import SubmissionResult
from course_grader.runner import grade_submission
from course_grader.sandbox import SandboxConfig
from course_tools.grading_dev.points import assignment_points
from course_tools.grading_dev.fairness import outcomes_under_seeds
from course_tools.grading_dev.testing import variant as notebook_variant, write_notebook

TIER = "fast"  # course_tools/tiers.py

ROOT = Path(__file__).resolve().parents[1]
CONFIG = SandboxConfig(cell_timeout=60, call_timeout=30)
L05 = "lesson05_multihead"


@pytest.fixture(autouse=True)
def _no_ids_of_this_machine(monkeypatch, tmp_path):
    """No hub user and no stored id of the machine running the tests; the grader's id reset."""
    monkeypatch.delenv("JUPYTERHUB_USER", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    variants.begin_grading(None)
    yield
    variants.begin_grading(None)


def test_seed_is_the_documented_hash_of_assignment_and_id():
    seed = hashlib.sha256(b"attention-course variant v1\0lesson05_multihead\0alice").digest()
    v = variants.make_variant(L05, "alice")
    assert v.digest == seed.hex()[:12]
    for name, allowed in variants.TABLES[L05].items():
        index = int.from_bytes(hashlib.sha256(seed + name.encode()).digest()[:8], "little") % len(allowed)
        chosen = allowed[index]
        assert (chosen.items() <= v.values.items()) if isinstance(chosen, dict) else v.values[name] == chosen
    assert variants.make_variant(L05, "alice") == v  # stable
    assert variants.make_variant(L05, "bob").digest != v.digest
    assert variants.make_variant("lesson03_scoring", "alice").digest != v.digest  # per assignment
    # pinned: changing the hash or the table changes every learner's numbers (say so in the docs)
    assert v.values == {"E": 1024, "H": 16, "check_H": 3, "check_D": 2, "check_T": 4}


def test_every_table_value_is_a_fair_draw():
    """Each variant is as hard as the others: the same computation on other numbers (E divisible
    by H with a head size of at least 16; check sizes with H, D >= 2 and two padded tokens)."""
    for cfg in variants.TABLES[L05]["model"]:
        assert cfg["E"] % cfg["H"] == 0 and cfg["E"] // cfg["H"] >= 16
    for cfg in variants.TABLES[L05]["check"]:
        assert cfg["check_H"] >= 2 and cfg["check_D"] >= 2 and cfg["check_T"] >= 3
    for cfg in variants.TABLES["lesson09_scale"]["kv"]:
        assert cfg["kv_bytes"] in (2, 4)
    assert all(t % 128 == 0 for t in variants.TABLES["lesson09_scale"]["causal_T"])
    for table in variants.TABLES.values():
        for allowed in table.values():
            assert len(allowed) >= 4, "too few values: classmates would share answers too often"
            assert len({json.dumps(a, sort_keys=True) for a in allowed}) == len(allowed), "a value listed twice"


def test_learner_id_sources_in_order(monkeypatch):
    assert variants.learner_id() == ("default", "default")
    assert "Notice: no learner id is set" in variants.make_variant(L05, "default", "default").describe()
    written = variants.set_learner_id("  carol ")
    assert written == variants.config_path() and written.read_text() == "carol\n"
    assert variants.learner_id() == ("carol", "config")
    monkeypatch.setenv("JUPYTERHUB_USER", "dave")
    assert variants.learner_id() == ("dave", "hub")
    variants.begin_grading("erin")
    assert variants.learner_id() == ("erin", "grader")
    assert variants.variant(L05).learner == "erin"
    assert variants.used_variants() == [variants.make_variant(L05, "erin").record()]


@pytest.mark.parametrize("bad, why", [("", "empty"), ("x" * 101, "101 characters"), ("a\tb", "control")])
def test_a_bad_id_is_refused_saying_how_to_fix_it(bad, why):
    with pytest.raises(variants.LearnerIdError, match=why):
        variants.set_learner_id(bad)
    assert not variants.config_path().exists()


def test_set_id_command(capsys):
    from course_grader.cli import main
    assert main(["--set-id", "frank"]) == 0
    assert "frank" in capsys.readouterr().out
    assert variants.learner_id() == ("frank", "config")
    assert main(["set-id", "bad\x07id"]) == 2
    assert "control or invisible" in capsys.readouterr().err
    assert variants.learner_id() == ("frank", "config")


def test_variant_marks_are_read_from_outputs():
    text = variants.make_variant(L05, "alice").describe()
    nb = {"cells": [{"cell_type": "code", "source": "", "outputs": [{"output_type": "stream", "text": [text]}]}]}
    assert variants.marks_in_outputs(nb) == [(L05, variants.make_variant(L05, "alice").digest)]
    assert variants.marks_in_outputs({"cells": "junk"}) == []


def _ids_covering(assignment: str) -> list[str]:
    """Learner ids whose variants between them take every allowed value of every table entry."""
    table = variants.TABLES[assignment]
    missing = {(name, i) for name, allowed in table.items() for i in range(len(allowed))}
    ids = []
    for n in range(2000):
        who = f"learner-{n}"
        seed = variants.variant_digest(assignment, who)
        hit = {(name, int.from_bytes(hashlib.sha256(seed + name.encode()).digest()[:8], "little") % len(allowed))
               for name, allowed in table.items()} & missing
        if hit:
            ids.append(who)
            missing -= hit
        if not missing:
            return ids
    raise AssertionError(f"{assignment}: no ids found for {sorted(missing)}")


@pytest.mark.slow
@pytest.mark.parametrize("assignment", sorted(variants.TABLES))
def test_the_solution_passes_every_value_of_the_table(assignment):
    """The reference solution, graded in process (the fairness harness) as learners whose variants
    cover every allowed value: every test passes."""
    for source in Assignment.load(ROOT / "solutions" / assignment).notebooks.values():
        for who in _ids_covering(assignment):
            variants.begin_grading(who)
            out = outcomes_under_seeds(source, notebook_variant(source.path), [0])
            assert out.always_failed() == set() and out.learner_errors == [], (assignment, who, out.messages)


# --- with the real grader, in the sandbox ---------------------------------------------------------------


def _answers_for(who: str) -> str:
    v = variants.make_variant(L05, who)
    return (f"ANSWER_PARAMS = {4 * v['E'] * v['E'] + 4 * v['E']}\nANSWER_HEAD_SIZE = {v['E'] // v['H']}\n"
            "ANSWER_COMBINE = 'b'\n")


def _two_learners() -> tuple[str, str]:
    """Two ids whose lesson 5 model sizes differ (their answers differ)."""
    a = variants.make_variant(L05, "alice")
    assert variants.make_variant(L05, "bob")["E"] != a["E"]
    return "alice", "bob"


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Lesson 5 graded with the real grader: the solution as two learners, alice's literal answers
    as alice and as bob, and alice's answers in a notebook that tries to pass as alice."""
    tmp = tmp_path_factory.mktemp("variants")
    assignment = Assignment.load(ROOT / "solutions" / L05)
    path = assignment.notebooks["multihead"].path
    alice, bob = _two_learners()
    cheat = ("import os\nos.environ['JUPYTERHUB_USER'] = 'alice'\n"
             "from course_grader import variants as _v\n_v.begin_grading('alice')\n"
             "VARIANT = _v.make_variant('lesson05_multihead', 'alice')\nvariant = lambda name: VARIANT\n")
    notebooks = {
        "solution": notebook_variant(path),
        "copied": notebook_variant(path, replace={"answers": _answers_for(alice)}),
        "cheat": notebook_variant(path, replace={"answers": _answers_for(alice)}, append={"variant": cheat}),
    }
    out = {}
    for case, nb in notebooks.items():
        file = write_notebook(nb, tmp / case / "multihead.ipynb")
        for who in (alice, bob):
            out[case, who] = grade_submission(assignment, who, {"multihead": file}, config=CONFIG)
    return out


def _failed(res: SubmissionResult) -> set[str]:
    return {t.grade_id for nb in res.notebooks for t in nb.tests if not t.passed}


@pytest.mark.sandbox
def test_copied_answers_lose_the_variant_points(graded):
    assert _failed(graded["copied", "alice"]) == set()
    assert _failed(graded["copied", "bob"]) == {"test_answer_params", "test_answer_head_size"}
    lost = assignment_points(L05).sum(["test_answer_params", "test_answer_head_size"])  # their points, as written
    assert lost > 0 and graded["copied", "bob"].total == graded["copied", "alice"].total - lost


@pytest.mark.sandbox
def test_the_same_notebook_under_two_ids_gives_two_variants(graded):
    """The solution computes its answers from the variant cell, which ran in the sandbox with the id
    the grader sent: full marks under both ids, two different variants recorded."""
    a, b = graded["solution", "alice"], graded["solution", "bob"]
    assert _failed(a) == _failed(b) == set()
    assert a.variant == variants.make_variant(L05, "alice").record()
    assert b.variant == variants.make_variant(L05, "bob").record()
    assert a.variant["digest"] != b.variant["digest"]
    assert a.notebooks[0].variants == [a.variant]


@pytest.mark.sandbox
def test_the_notebook_cannot_choose_its_variant(graded):
    """Setting JUPYTERHUB_USER, calling the variants module's grader hook in the learner's process
    and overwriting VARIANT and variant in a cell change nothing: bob is graded as bob."""
    res = graded["cheat", "bob"]
    # the experiment's ranks were measured on alice's (E, H) too
    assert _failed(res) == {"test_answer_params", "test_answer_head_size", "test_experiment_rank"}
    assert res.variant == variants.make_variant(L05, "bob").record()
    assert _failed(graded["cheat", "alice"]) == set()


@pytest.mark.sandbox
def test_grades_json_feedback_and_export_record_the_variant(graded):
    res = graded["solution", "bob"]
    again = SubmissionResult.from_dict(json.loads(json.dumps(res.to_dict())))
    assert again.variant == res.variant
    digest = res.variant["digest"]
    assert digest in render_text(res) and digest in render_html(res)
    assert f"E = {res.variant['values']['E']}" in render_text(res)
    old = res.to_dict()
    old.pop("variant")
    assert SubmissionResult.from_dict(old).variant == {}  # grades.json written before variants still loads


@pytest.mark.sandbox
def test_check_uses_the_learners_variant_and_warns_for_another_id(tmp_path):
    from course_grader.selfcheck import self_check
    source = ROOT / "exercises" / L05 / "multihead.ipynb"
    nb = json.loads(source.read_text("utf-8"))
    alice_text = variants.make_variant(L05, "alice").describe()
    for cell in nb["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "variant":
            cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": alice_text}]
    path = write_notebook(nb, tmp_path / "multihead.ipynb")
    as_bob = self_check(path, learner="bob", config=CONFIG)
    as_alice = self_check(path, learner="alice", config=CONFIG)
    warn = [n for n in as_bob.notes if "last run for another learner id" in n]
    assert len(warn) == 1 and variants.make_variant(L05, "bob").digest in warn[0]
    assert not [n for n in as_alice.notes if "another learner id" in n]
    assert any(variants.make_variant(L05, "alice").digest in n and "Checked with your variant" in n
               for n in as_alice.notes)
    # the id comes from the learner's side (here: the stored id), not from the notebook
    variants.set_learner_id("alice")
    assert not [n for n in self_check(path, config=CONFIG).notes if "another learner id" in n]
