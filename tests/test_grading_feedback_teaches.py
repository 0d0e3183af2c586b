"""Feedback that teaches (issue 30, item 6): each test says what it checks and which lesson
section it practises, in the feedback page and in ``course-grade --check``, in the learner's
language; learner bytes in these lines still go through the sinks' guards.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import polib
import pytest

from torch import nn

from course_grader.checks import CheckFailed, assert_number, assert_tensor_close, call
from course_grader.i18n import translate_message
from course_grader.feedback import about_test, render_html, render_text
from course_grader.notebook import Assignment, cell_test_info
from course_grader.runner import NotebookResult, Status, SubmissionResult, grade_submission
from course_grader.runner import TestOutcome as Outcome
from course_grader.sandbox import SandboxConfig
from course_grader.selfcheck import CheckedTest, CheckReport, render_check, self_check
from course_grader.sinks import terminal_block
from grading_dev.generate import list_assignments
from grading_dev.testing import load_mistakes, variant, write_notebook

ROOT = Path(__file__).resolve().parents[1]
CATALOGUES = {lang: ROOT / "course_grader" / "locale" / lang / "LC_MESSAGES" / "course_grader.po"
              for lang in ("zh_CN", "zh_TW")}
EDITIONS = {"en": ROOT / "exercises", "zh_CN": ROOT / "zh" / "exercises", "zh_TW": ROOT / "zh-TW" / "exercises"}


def _load(path: Path) -> dict:
    return json.loads(path.read_text("utf-8"))


def _test_cells(nb: dict) -> list[dict]:
    return [c for c in nb["cells"] if c["cell_type"] == "code" and c["metadata"].get("nbgrader", {}).get("grade")
            and not c["metadata"]["nbgrader"].get("solution")]


def _lesson_sections() -> dict[str, set[int]]:
    """Lesson ("3", "7a") -> the numbers of its "## N." sections, read from notebooks/."""
    out: dict[str, set[int]] = {}
    for path in (ROOT / "notebooks").glob("*.ipynb"):
        lesson = path.name.split("_")[0].lstrip("0")
        text = "\n".join("".join(c["source"]) for c in _load(path)["cells"] if c["cell_type"] == "markdown")
        out[lesson] = {int(n) for n in re.findall(r"^## (\d+)\.", text, re.M)}
    return out


def test_every_test_says_what_it_checks_and_which_lesson_section_it_practises():
    sections = _lesson_sections()
    seen = 0
    for name in list_assignments(ROOT):
        for source in sorted((ROOT / "solutions" / name).glob("*.ipynb")):
            for cell in _test_cells(_load(source)):
                gid = cell["metadata"]["nbgrader"]["grade_id"]
                info = cell_test_info(cell)
                assert info.get("description") and info.get("lesson"), f"{name}/{gid}: no description or lesson"
                assert info["description"] == cell["metadata"]["course"]["description"], f"{name}/{gid}: cut or altered"
                assert info["section"] in sections.get(info["lesson"], set()), \
                    f"{name}/{gid}: lesson {info['lesson']} has no section {info['section']}"
                seen += 1
    assert seen >= 100


@pytest.mark.parametrize("edition", sorted(EDITIONS))
def test_released_notebooks_carry_the_descriptions(edition):
    """The generator keeps the cell metadata: each edition's exercises describe every test
    exactly as the English source does (the Chinese text comes from the grader's catalogue)."""
    for name in list_assignments(ROOT):
        for source in sorted((ROOT / "solutions" / name).glob("*.ipynb")):
            want = {c["metadata"]["nbgrader"]["grade_id"]: cell_test_info(c) for c in _test_cells(_load(source))}
            got = {c["metadata"]["nbgrader"]["grade_id"]: cell_test_info(c)
                   for c in _test_cells(_load(EDITIONS[edition] / name / source.name))}
            assert got == want, f"{edition}: {name}/{source.name}"


@pytest.mark.parametrize("lang", sorted(CATALOGUES))
def test_every_description_is_translated(lang):
    po = {e.msgid: e for e in polib.pofile(str(CATALOGUES[lang]), encoding="utf-8") if not e.obsolete}
    for name in list_assignments(ROOT):
        for source in sorted((ROOT / "solutions" / name).glob("*.ipynb")):
            for cell in _test_cells(_load(source)):
                text = cell_test_info(cell)["description"]
                assert text in po and po[text].msgstr and "fuzzy" not in po[text].flags, f"{lang}: {text!r}"


@pytest.mark.parametrize("info, expected", [
    ({"description": "Checks  the\nmask.", "lesson": "3", "section": 2},
     {"description": "Checks the mask.", "lesson": "3", "section": 2}),
    ({"description": "x" * 5000}, {"description": "x" * 300}),
    ({"description": ["a list"], "lesson": "3/../../etc", "section": 2}, {}),
    ({"description": "ok", "lesson": 3, "section": 2}, {"description": "ok"}),
    ({"description": "ok", "lesson": "7a", "section": True}, {"description": "ok"}),
    ({"description": "ok", "lesson": "7a", "section": 1000}, {"description": "ok"}),
    ("not a dict", {}),
])
def test_test_info_keeps_only_well_formed_values(info, expected):
    assert cell_test_info({"metadata": {"course": info}}) == expected


def _result(language: str) -> SubmissionResult:
    tests = [Outcome("test_masked_softmax_public", "c", 0.0, 1.0, False, "masked_softmax row sums differ",
                         description="Masked softmax on the worked example: masked keys get weight 0, rows sum to one.",
                         lesson="3", section=2),
             Outcome("test_dot_product", "d", 0.0, 3.0, False, "hidden", skipped=True,
                         description="Scaled dot-product attention on fresh sizes and valid lengths.",
                         lesson="3", section=6)]
    return SubmissionResult("ada", "lesson03_scoring", Status.OK, 0.0, 4.0,
                            [NotebookResult("scoring", Status.OK, tests, language=language)])


def test_feedback_page_and_text_describe_each_test():
    page, text = render_html(_result("en")), render_text(_result("en"))
    for out in (page, text):
        assert "Masked softmax on the worked example: masked keys get weight 0, rows sum to one. " \
               "(see lesson 3, section 2)" in out
        assert "Scaled dot-product attention on fresh sizes and valid lengths. (see lesson 3, section 6)" in out
    page, text = render_html(_result("zh-CN")), render_text(_result("zh-CN"))
    for out in (page, text):
        assert "在示例上计算掩蔽 softmax：被掩蔽的键权重为 0，每行之和为一。（见第 3 课第 2 节）" in out
    assert "（見第 3 課第 2 節）" in render_text(_result("zh-TW"))


def test_a_hostile_description_is_escaped_in_every_sink():
    evil = "<script>alert(1)</script>\x1b]52;c;cGF5bG9hZA==\x07\u202e"
    result = _result("en")
    result.notebooks[0].tests[0].description = evil
    page = render_html(result)
    assert "<script>" not in page and "&lt;script&gt;" in page
    shown = terminal_block(render_text(result))
    assert "\x1b" not in shown and "\u202e" not in shown and "\x07" not in shown
    assert about_test(Outcome("g", "g", 0, 1, False)) == ""


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """lesson03_scoring with the typical mistake "missing_sqrt", graded and self-checked."""
    tmp = tmp_path_factory.mktemp("teaches")
    name = "lesson03_scoring"
    spec = load_mistakes(ROOT / "solutions" / name)
    learner = variant(ROOT / "solutions" / name / "scoring.ipynb", replace=spec["missing_sqrt"]["replace"])
    path = write_notebook(learner, tmp / "ada" / "scoring.ipynb")
    config = SandboxConfig(cell_timeout=60, call_timeout=30)
    result = grade_submission(Assignment.load(ROOT / "solutions" / name), "ada", {"scoring": path},
                              config=config, seed=1)
    biased = variant(learner, replace={"additive_attention": _solution_code(name)["additive_attention"].replace(
        "bias=False", "bias=True")})
    biased_path = write_notebook(biased, tmp / "bo" / "scoring.ipynb")
    extra_bias = grade_submission(Assignment.load(ROOT / "solutions" / name), "bo", {"scoring": biased_path},
                                  config=config, seed=1)
    exercise = variant(ROOT / "exercises" / name / "scoring.ipynb",
                       replace={**{gid: src for gid, src in _solution_code(name).items()},
                                **spec["missing_sqrt"]["replace"]})
    exercise["metadata"].setdefault("course", {})["language"] = "zh-CN"
    checked = write_notebook(exercise, tmp / "check" / "scoring.ipynb")
    return result, self_check(checked, config=config), extra_bias


def _solution_code(name: str) -> dict[str, str]:
    out = {}
    for cell in _load(ROOT / "solutions" / name / "scoring.ipynb")["cells"]:
        meta = cell["metadata"].get("nbgrader", {})
        if meta.get("solution"):
            out[meta["grade_id"]] = "\n".join(line for line in "".join(cell["source"]).splitlines()
                                              if "### BEGIN SOLUTION" not in line and "### END SOLUTION" not in line)
    return out


@pytest.mark.sandbox
def test_grading_records_and_shows_each_tests_description(graded):
    result = graded[0]
    tests = {t.grade_id: t for t in result.notebooks[0].tests}
    assert tests["test_dot_product_public"].passed is False
    assert (tests["test_dot_product_public"].lesson, tests["test_dot_product_public"].section) == ("3", 6)
    again = SubmissionResult.from_dict(json.loads(json.dumps(result.to_dict())))  # grades.json round trip
    assert again.notebooks[0].tests[2].description == tests["test_dot_product_public"].description != ""
    text = render_text(result)
    assert "Scaled dot-product attention on one example, against PyTorch's. (see lesson 3, section 6)" in text


@pytest.mark.sandbox
def test_check_shows_each_tests_description_in_the_learners_language(graded):
    report = graded[1]
    assert report.language == "zh_CN"
    assert all(t.description and t.lesson == "3" and t.section for t in report.tests)
    out = render_check(report)
    assert "在一个例子上计算缩放点积注意力，与 PyTorch 的实现比较。（见第 3 课第 6 节）" in out


# -- numbers in full, state-dict errors from the learner's side, a footer for the learner --------

def _failure(fn, *args, **kwargs) -> str:
    with pytest.raises(CheckFailed) as info:
        fn(*args, **kwargs)
    return str(info.value)


def test_numbers_are_printed_in_full():
    assert _failure(assert_number, 1048576, 1050624, name="ANSWER_PARAMS") == \
        "ANSWER_PARAMS: 1048576 is not the right value"
    assert _failure(assert_number, 1048576.5, 1050624, name="A") == "A: 1048576.5 is not the right value"
    assert _failure(assert_number, 0.00001, 1, name="A") == "A: 0.00001 is not the right value"
    import torch
    text = _failure(assert_tensor_close, torch.tensor([1048576.0]), torch.tensor([2097152.0]), name="x")
    assert "expected 2097152, got 1048576" in text and "e+06" not in text


@pytest.mark.parametrize("mine, reference, expected", [
    (nn.Linear(3, 4), nn.Linear(3, 4, bias=False),
     "W.load_state_dict: your module has parameters the reference doesn't: bias. Check the assignment's layers "
     "(is a bias=False missing, or is there a layer too many?)."),
    (nn.Linear(3, 4, bias=False), nn.Linear(3, 4),
     "W.load_state_dict: the reference has parameters your module doesn't: bias. Use the parameter names the "
     "assignment gives."),
    (nn.Sequential(nn.Linear(2, 4)), nn.Sequential(nn.Linear(3, 4)),
     "W.load_state_dict: parameter 0.weight has shape (4, 2) in your module but (4, 3) in the reference."),
])
def test_state_dict_errors_are_said_from_the_learners_side(mine, reference, expected):
    text = _failure(call, mine.load_state_dict, reference.state_dict(), name="W.load_state_dict")
    assert text == expected and "Missing key" not in text
    assert "你的模块" in translate_message(text, "zh_CN") or "你的模块" not in expected


def _report(language: str, passed: bool) -> CheckReport:
    report = CheckReport("lesson03_scoring", "scoring.ipynb", language=language)
    report.tests.append(CheckedTest("test_masked_softmax_public", 1.0, "public", passed, "" if passed else "wrong",
                                    description="Masked softmax on the worked example: masked keys get weight 0, "
                                                "rows sum to one.", lesson="3", section=2))
    return report


@pytest.mark.parametrize("language", ["en", "zh_CN", "zh_TW"])
def test_the_check_footer_speaks_to_the_learner(language):
    failed, passed = render_check(_report(language, False)), render_check(_report(language, True))
    for out in (failed, passed):
        assert "author" not in out and "checksum" not in out
    if language == "en":
        assert "Next: for each failed check" in failed and "Next:" not in passed
        assert failed.rstrip().endswith("so this report is not proof of a grade.")
        assert "(see lesson 3, section 2)" in failed
    else:
        assert "下一步" in failed and "下一步" not in passed and "Next" not in failed
        assert "不能证明成绩" in failed or "不能證明成績" in failed


@pytest.mark.sandbox
def test_extra_biases_are_reported_from_the_learners_side(graded):
    tests = {t.grade_id: t for t in graded[2].notebooks[0].tests}
    assert not tests["test_additive"].passed
    assert "your module has parameters the reference doesn't: W_k.bias, W_q.bias, w_v.bias" \
        in tests["test_additive"].message, tests["test_additive"].message
    assert "Missing key" not in render_text(graded[2])
