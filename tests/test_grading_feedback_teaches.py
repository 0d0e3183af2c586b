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
from course_tools.grading_dev.generate import list_assignments
from course_tools.grading_dev.points import assignment_points
from course_tools.grading_dev.testing import load_mistakes, variant, write_notebook

TIER = "fast"  # course_tools/tiers.py

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
    # every auto-graded test describes itself; the written answers (graded by hand) are listed as such
    points = assignment_points("lesson03_scoring")
    assert [t.grade_id for t in report.tests if t.kind != "written"] == list(points.tests)
    assert [t.grade_id for t in report.tests if t.kind == "written"] == list(points.written)
    assert all(t.description and t.lesson == "3" and t.section for t in report.tests if t.kind != "written")
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
    # graded end to end: the failed test names each extra bias, and PyTorch's "Missing key(s)"
    # (which reads backwards from the learner's side) is shown nowhere. Which check stops the
    # biased module first depends on the edition of lesson 3: the grader's reading of
    # load_state_dict (below) or a public check of the parameter names.
    tests = {t.grade_id: t for t in graded[2].notebooks[0].tests}
    message = tests["test_additive"].message
    assert not tests["test_additive"].passed
    for bias in ("W_k.bias", "W_q.bias", "w_v.bias"):
        assert bias in message, message
    page = render_text(graded[2])
    assert "Missing key" not in page and "Unexpected key" not in page and "state_dict" not in message
    # where the reference's weights are loaded into the learner's module, PyTorch's error is turned around
    with pytest.raises(CheckFailed) as failed:
        call(nn.Linear(3, 2, bias=True).load_state_dict, nn.Linear(3, 2, bias=False).state_dict(),
             name="AdditiveAttention")
    assert "AdditiveAttention: your module has parameters the reference doesn't: bias." in str(failed.value)
    assert "Missing key" not in str(failed.value)


# -- feedback that names the mistake (course_grader.diagnose) --------------------------------------

from course_grader.diagnose import load_hinted_mistakes, mistake_notebook  # noqa: E402
from course_grader.feedback import mistake_line  # noqa: E402

HINTED = [(a, m["key"]) for a in list_assignments(ROOT) for m in load_hinted_mistakes(ROOT / "solutions" / a)]
#: the hinted mistakes graded end to end in the fast tier (the rest: slow tier, same test)
QUICK = {("lesson03_scoring", "mask_after_softmax"), ("lesson03_scoring", "missing_sqrt"),
         ("lesson02_pooling", "missing_factor_two")}


def test_every_assignment_names_at_least_three_mistakes():
    sections = _lesson_sections()
    for name in list_assignments(ROOT):
        hinted = load_hinted_mistakes(ROOT / "solutions" / name)
        assert len(hinted) >= 3, f"{name}: only {len(hinted)} mistakes carry a hint (3 at least)"
        for m in hinted:
            assert m["section"] in sections[m["lesson"]], f"{name}/{m['key']}: no section {m['section']}"
            assert m["hint"][0].islower() and not m["hint"].endswith("."), \
                f"{name}/{m['key']}: a hint is the tail of 'This looks like a known mistake: ...'"


def test_a_malformed_hint_says_what_is_wrong(tmp_path):
    (tmp_path / "mistakes.py").write_text('MISTAKES = {"m": {"replace": {"c": "x = 1"}, "fails": ["t"], '
                                          '"hint": "a hint", "lesson": "three", "section": 2}}\n', "utf-8")
    with pytest.raises(ValueError, match=r"mistake 'm': a hint needs .*lesson"):
        load_hinted_mistakes(tmp_path)


def test_the_mistake_notebook_is_the_solution_with_the_mistake_in_place():
    source = Assignment.load(ROOT / "solutions" / "lesson03_scoring").notebooks["scoring"]
    nb = mistake_notebook(source, {"masked_softmax": "def masked_softmax(s, v=None):\n    return s\n"})
    cells = {c["metadata"].get("nbgrader", {}).get("grade_id"): "".join(c["source"]) for c in nb["cells"]}
    assert cells["masked_softmax"] == "def masked_softmax(s, v=None):\n    return s"
    assert "BEGIN SOLUTION" not in cells["dot_product_attention"] and "math.sqrt(d)" in cells["dot_product_attention"]


def _graded_case(tmp: Path, name: str, replace: dict[str, str] | None, seed: int = 3):
    assignment = Assignment.load(ROOT / "solutions" / name)
    ((nb_name, source),) = assignment.notebooks.items()
    learner = variant(source.path, replace=replace) if replace else _load(source.path)
    path = write_notebook(learner, tmp / "learner" / f"{nb_name}.ipynb")
    return grade_submission(assignment, "learner", {nb_name: path}, seed=seed, diagnose=True,
                            config=SandboxConfig(cell_timeout=120, call_timeout=60))


@pytest.mark.sandbox
@pytest.mark.parametrize("name, key", [pytest.param(a, k, marks=() if (a, k) in QUICK else pytest.mark.slow)
                                       for a, k in HINTED])
def test_each_hinted_mistake_names_itself(tmp_path, name, key):
    """Graded as a learner would hand it in, the mistake's own feedback names it, with its
    hint and its lesson section, on at least one test it fails (and never names another)."""
    spec = load_mistakes(ROOT / "solutions" / name)[key]
    result = _graded_case(tmp_path, name, spec["replace"])
    tests = result.notebooks[0].tests
    named = {t.grade_id: t.mistake for t in tests if t.mistake}
    assert key in named.values(), f"{key} was not named; failed: {[t.grade_id for t in tests if not t.passed]}"
    assert set(named.values()) == {key}, f"another mistake was named too: {named}"
    hint = next(m for m in load_hinted_mistakes(ROOT / "solutions" / name) if m["key"] == key)
    where = f"(see lesson {hint['lesson']}, section {hint['section']})"
    assert f"This looks like a known mistake: {hint['hint']} {where}" in render_text(result)
    assert "这看起来是一个常见错误" in mistake_line(next(t for t in tests if t.mistake), "zh_CN")


@pytest.mark.sandbox
@pytest.mark.parametrize("case", ["solution", "trivial"])
def test_nothing_is_named_when_no_listed_mistake_matches(tmp_path, case):
    """The solution fails nothing; a wrong answer that is not a listed mistake (zeros) fails
    tests that mistakes also fail, but its outputs match none of theirs: nothing is named."""
    replace = None if case == "solution" else {"masked_softmax": (
        "def masked_softmax(scores, valid_lens=None):\n    return torch.zeros_like(scores)\n")}
    result = _graded_case(tmp_path, "lesson03_scoring", replace)
    tests = result.notebooks[0].tests
    assert [t.mistake for t in tests if t.mistake] == []
    if case == "trivial":
        assert not {t.grade_id: t for t in tests}["test_masked_softmax"].passed
    assert "known mistake" not in render_text(result)


# -- multiple-choice balance (issue 30, item 5) ------------------------------------------------------

def _choice_options(text: str) -> dict[str, str]:
    """Letter -> option text of one question's "(a) ...; (b) ..." list (one line or one item each)."""
    parts = re.split(r"\(([a-e])\)\s", text)
    out = {}
    for i in range(1, len(parts) - 1, 2):
        body = re.split(r"\n\d+\. |\n\n", parts[i + 1])[0]
        out[parts[i]] = " ".join(body.split()).rstrip(" ;.")
    return out


def multiple_choice_questions(notebook: Path) -> list[tuple[str, dict[str, str], str]]:
    """(answer variable, options, right letter) of each multiple-choice question of a source
    notebook: the options from its question cell (a list shared by several questions after
    "Choices for questions ..."), the right letter from its solution cell."""
    cells = _load(notebook)["cells"]
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    out = []
    for cell in cells:
        text = "".join(cell["source"])
        if cell["cell_type"] != "markdown" or "`ANSWER_" not in text:
            continue
        shared = re.search(r"Choices for questions[^\n]*\n(.*)$", text, re.S)
        body = text[:shared.start()] if shared else text
        for block in re.split(r"\n(?=\d+\. `ANSWER_)", body):
            name = re.match(r"\d+\. `(ANSWER_\w+)`", block)
            if not name or "(A letter.)" not in block:
                continue
            options = _choice_options(block) or (_choice_options(shared.group(1)) if shared else {})
            right = re.findall(rf'{name.group(1)}\s*=\s*"([a-e])"', code)
            assert options and right, f"{notebook.name}: {name.group(1)}: no options or no right letter found"
            out.append((name.group(1), options, right[-1]))
    return out


def _right_is_longest(options: dict[str, str], right: str) -> bool:
    """Strictly longer than every other option (options of equal length, such as four
    ``Conv2d(...)`` calls, give nothing away)."""
    return all(len(options[right]) > len(text) for letter, text in options.items() if letter != right)


@pytest.mark.parametrize("name", list_assignments(ROOT))
def test_the_right_option_is_rarely_the_longest(name):
    """A test-wise learner picks the longest, most qualified option: in each assignment the right
    option may be the longest in at most 1/k of the multiple-choice questions (k options)."""
    for source in sorted((ROOT / "solutions" / name).glob("*.ipynb")):
        questions = multiple_choice_questions(source)
        if not questions:
            continue
        longest = [q for q, options, right in questions if _right_is_longest(options, right)]
        k = min(len(options) for _, options, _ in questions)
        assert len(longest) <= len(questions) / k, \
            f"{name}: the right option is the longest in {longest} ({len(longest)} of {len(questions)} questions)"


def test_the_balance_check_sees_a_longest_right_option():
    options = _choice_options("- (a) short;\n   - (b) the right one, long and qualified, as a test-wise learner\n"
                              "     expects;\n   - (c) no;\n   - (d) none.")
    assert set(options) == {"a", "b", "c", "d"} and _right_is_longest(options, "b")
    assert not _right_is_longest(options, "a")


def test_naming_a_mistake_stays_within_the_learners_budget(monkeypatch):
    """With less than MIN_SECONDS_LEFT of the learner's budget left, no mistake is tried (the
    grader's watchdog would otherwise kill the learner's grading)."""
    import time

    import course_grader.diagnose as diagnose_module
    import course_grader.rpc

    def no_session(*args, **kwargs):
        raise AssertionError("a mistake was tried after the learner's budget")

    monkeypatch.setattr(course_grader.rpc, "Session", no_session)
    source = Assignment.load(ROOT / "solutions" / "lesson03_scoring").notebooks["scoring"]
    failed = Outcome("test_masked_softmax", "c", 0.0, 3.0, False, "masked_softmax: wrong")
    diagnose_module.diagnose(source, [failed], {"test_masked_softmax": [1.0]}, b"1", SandboxConfig(),
                             deadline=time.monotonic() + diagnose_module.MIN_SECONDS_LEFT / 2)
    assert failed.mistake == ""
