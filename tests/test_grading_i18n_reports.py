"""Every report the grader writes for a learner or a teacher is in the notebook's language
(issue 32): the feedback page and text, the ``--check`` report and the teacher's summary line,
rendered in zh-CN and zh-TW, carry no English sentence outside code and names.

The messages are the ones the grader really makes: every message marked in course_grader
(``_()`` / ``N_()``, the checks' failures, the runner's test and cell messages, the statuses and
notes) formatted with sample fields, and the failures the checks raise on wrong answers. Fast:
no sandbox.
"""

from __future__ import annotations

import functools
import html
import re
import string
import time

import pytest
import torch

from course_grader import checks, i18n
from course_grader.feedback import render_html, render_text
from course_grader.runner import NotebookResult, Status, SubmissionResult
from course_grader.runner import TestOutcome as Outcome
from course_grader.selfcheck import CheckedTest, CheckReport, render_check
from test_grading_i18n import marked_messages

TIER = "fast"  # course_tools/tiers.py

LANGUAGES = ["zh_CN", "zh_TW"]
# three English words in a row: a sentence (or most of one) left in English
ENGLISH_RUN = re.compile(r"[A-Za-z][a-z]+(?:[ ,'’-]+[A-Za-z][a-z]+){2,}")
SAMPLE = {"name": "ANSWER_X", "label": "DotProductAttention", "test": "test_a", "points": "3",
          "assignment": "lesson03_scoring", "student": "s01", "notebook": "scoring.ipynb"}


def _sample(field: str) -> str:
    return SAMPLE.get(field, "7")


def _fill(msgid: str) -> str:
    fields = {f for _, f, _, _ in string.Formatter().parse(msgid) if f}
    return msgid.format(**{f: _sample(f) for f in fields})


def _real_check_failures() -> list[str]:
    """What the checks say to a learner's wrong answers (the text of each CheckFailed)."""
    out = []
    attempts = [
        lambda: checks.assert_shape(torch.zeros(2), (3,), name="ANSWER_X"),
        lambda: checks.assert_shape([1], (3,), name="ANSWER_X"),
        lambda: checks.assert_tensor_close(torch.ones(3), torch.zeros(3), name="ANSWER_X"),
        lambda: checks.assert_tensor_close(torch.tensor([float("nan")]), torch.zeros(1), name="ANSWER_X"),
        lambda: checks.assert_tensor_close(torch.tensor([float("inf")]), torch.zeros(1), name="ANSWER_X"),
        lambda: checks.assert_equal(3, 4, name="ANSWER_X"),
        lambda: checks.assert_equal(3, 4, name="ANSWER_X", show_expected=True),
        lambda: checks.assert_equal(object(), 4, name="ANSWER_X"),
        lambda: checks.call(lambda: (_ for _ in ()).throw(NotImplementedError()), name="DotProductAttention"),
    ]
    for attempt in attempts:
        try:
            attempt()
        except AssertionError as exc:
            out.append(str(exc))
    assert len(out) == len(attempts), "a wrong answer passed a check"
    return out


@functools.lru_cache(maxsize=1)
def _all_messages() -> tuple[str, ...]:
    # read once per run: it parses every course_grader module and every solution notebook
    marked = [_fill(m) for m in marked_messages() if len(m) > 2]
    return tuple(marked + _real_check_failures())


def _messages() -> list[str]:
    return list(_all_messages())


def _result(language: str, messages: list[str]) -> SubmissionResult:
    tests = [Outcome(f"test_{k}", f"test_{k}", 0, 1, False, msg) for k, msg in enumerate(messages)]
    tests.append(Outcome("test_ok", "test_ok", 1, 1, True))
    tests.append(Outcome("test_h", "test_h", 0, 1, False, i18n.N_("hidden test: run only by the grader"),
                         hidden=True, skipped=True))
    cells = [{"index": 3, "status": status, "message": "not run: the sandbox could not start"}
             for status in ("error", "died", "skipped", "timeout")]
    nb = NotebookResult("scoring", Status.TIMEOUT, tests, cells, notes=list(messages), language=language)
    return SubmissionResult("s01", "lesson03_scoring", Status.TIMEOUT, 1, len(tests), [nb])


def _report(language: str, messages: list[str]) -> CheckReport:
    rep = CheckReport("lesson03_scoring", "scoring.ipynb", language=language)
    rep.tests = [CheckedTest(f"test_{k}", 1, "public" if k % 2 else "public+hidden", False, msg)
                 for k, msg in enumerate(messages)]
    rep.tests += [CheckedTest("test_h", 1, "hidden"), CheckedTest("test_ok", 1, "public", True)]
    rep.hidden_known = True
    rep.notes = list(messages)
    rep.cells = [{"index": 3, "status": "error", "message": "not run: grading time budget exceeded"}]
    return rep


def _english_left(text: str) -> list[str]:
    text = re.sub(r"<style>.*?</style>", " ", text, flags=re.S)  # the page's CSS
    text = html.unescape(re.sub(r"<[^>]+>", " ", text))
    text = re.sub(r"<[\w.]+ object at 0x[0-9a-f]+>", " ", text)   # a repr of the learner's value
    text = re.sub(r"`[^`]*`", " ", text)                         # code
    text = re.sub(r"--release RELEASED\.ipynb|--assignment NAME|--release", " ", text)   # the command's options
    return [m.group(0) for m in ENGLISH_RUN.finditer(text)]


@pytest.mark.slow  # its first case parses the grader's sources for every marked message: about 0.4 s of CPU
@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("render", ["feedback html", "feedback text", "check"])
def test_every_report_is_translated(language, render):
    messages = _messages()
    if render == "check":
        out = render_check(_report(language, messages))
    elif render == "feedback html":
        out = render_html(_result(language, messages))
    else:
        out = render_text(_result(language, messages))
    left = _english_left(out)
    assert left == [], f"English left in the {language} {render}: {sorted(set(left))[:20]}"
    # and it is the right script: Simplified characters in zh-CN, Traditional in zh-TW
    assert ("單元格" if language == "zh_CN" else "单元格") not in out


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_english_report_is_english(language):
    out = render_text(_result("en", _messages()))
    assert "calling DotProductAttention raised NotImplementedError" in out
    assert not re.search(r"[\u4e00-\u9fff]", out)


def test_a_check_failure_is_translated_with_its_fields():
    (msg,) = [m for m in _real_check_failures() if m.startswith("calling ")]
    assert i18n.translate_message(msg, "zh_CN") == "调用 DotProductAttention 时抛出了 NotImplementedError"
    assert i18n.translate_message(msg, "zh_TW") == "呼叫 DotProductAttention 時丟擲了 NotImplementedError" \
        or i18n.translate_message(msg, "zh_TW").startswith("呼叫 DotProductAttention 時")
    choice = "ANSWER_SQRT: 'e' is not one of the choices a, b, c, d"
    assert i18n.translate_message(choice, "zh_CN") == "ANSWER_SQRT：'e' 不在选项 a, b, c, d 之中"
    # a message quoting another is translated through
    nested = "test_x: the test raised ValueError: bad — note: f uses your g, which failed its own check (t): fix g first"
    assert "请先修正 g" in i18n.translate_message("a check failed — note: f uses your g, which failed its own check "
                                                "(t): fix g first", "zh_CN")
    assert i18n.translate_message(nested, "en") == nested
    # text the learner wrote is left alone
    assert i18n.translate_message("my own words here", "zh_CN") == "my own words here"


def test_translating_a_hostile_message_is_fast_and_changes_nothing():
    hostile = ("calling " + "x raised " * 60 + ": " * 30)[: i18n.MAX_MATCHED]
    start = time.process_time()
    for _ in range(5):
        i18n.translate_message(hostile, "zh_CN")
        i18n.translate_message("a" * 10_000, "zh_CN")
    assert time.process_time() - start < 2.0
    assert i18n.translate_message("a" * 10_000, "zh_CN") == "a" * 10_000


@pytest.mark.parametrize("tag", ["zh-TW", "zh_TW", "zh-HK", "zh-Hant", "zh-hant-tw", "ZH-MO"])
def test_traditional_chinese_tags_get_the_zh_tw_messages(tag):
    assert i18n.normalise_language(tag) == "zh_TW"
    assert i18n.notebook_language({"metadata": {"language": tag}}) == "zh_TW"
    assert i18n.html_lang("zh_TW") == "zh-TW"


def test_status_labels_are_centred_by_display_width():
    for language in ("en", "zh_CN", "zh_TW"):
        _ = i18n.gettext_for(language)
        widths = set()
        for word in ("PASS", "FAIL", "hidden"):
            cell = i18n.label(_(word))
            widths.add(sum(2 if ord(ch) > 0x2e80 else 1 for ch in cell))
        assert widths == {8}, (language, widths)
    assert i18n.label("通过") == "  通过  " and i18n.label("未通过") == " 未通过 " and i18n.label("PASS") == "  PASS  "
    text = render_check(_report("zh_CN", ["x"]))
    assert "  [  通过  ] test_ok" in text and "[ 未通过 ] test_0" in text


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_teachers_and_learners_refusals_and_environment_failures_are_translated(language, tmp_path):
    """The lines course-grade prints to the teacher (refused learner ids, the environment
    preflight) and to a learner (--check in a broken environment), translated as the command
    translates them; learner-controlled characters stay escaped."""
    from course_grader.cli import find_submissions, learner_id_problem
    from course_grader.notebook import Assignment
    from course_grader.preflight import LEARNER_NOT_CHECKED, EnvironmentFailure, judge_answer_key_run

    shown = []
    for name in ("=HYPERLINK(x)", " bob", "a\u202eb", "x" * 200, "e\u0301", "ok\udcff"):
        problem = learner_id_problem(name)
        assert problem, name
        shown.append(i18n.translate_message(f"not graded: {problem}; rename it to the learner's id", language))
    assert all(_english_left(line) == [] for line in shown), shown
    assert "\u202e" not in "".join(shown)          # the escaped character, never the raw one
    # the twins and the double claims, as find_submissions words them
    for name in ("Bob", "bob", "ann"):
        (tmp_path / name).mkdir()
    (tmp_path / "ann.ipynb").write_text("{}")
    found = find_submissions(tmp_path, Assignment("a", tmp_path, {"scoring": None}))
    assert len(found.refused) == 3, found.refused
    for _entry, why in found.refused:
        text = i18n.translate_message(why, language)
        assert text.startswith("未評分" if language == "zh_TW" else "未评分"), text
        # the entries' names (the learner's, with "(a folder)" as the gradebook records them) stay
        names = re.sub(r"\S+ \(a (folder|notebook)\)|Bob and bob", " ", text.replace(str(tmp_path), " "))
        assert _english_left(names) == [], text
    # the environment preflight: the teacher's (the answer key's own solution fails), the learner's
    broken = {"status": "ok", "total": 3, "max_total": 5, "duration": 0.1,
              "notebooks": [{"tests": [{"grade_id": "test_a", "passed": False, "message": "ANSWER_X: wrong"}]}]}
    with pytest.raises(EnvironmentFailure) as exc:
        judge_answer_key_run(broken)
    assert str(exc.value).startswith("the grading environment does not work")   # English for the record
    learner = EnvironmentFailure(LEARNER_NOT_CHECKED, cause="torch does not work in the sandbox (ImportError: x)")
    for failure in (exc.value, learner):
        text = failure.translated(language)
        assert _english_left(text) == [], text
        assert failure.translated("en") == str(failure)
    summary = i18n.translate_message(judge_answer_key_run(
        {"status": "ok", "total": 5, "max_total": 5, "duration": 0.4, "notebooks": []}), language)
    assert "5/5" in summary and _english_left(summary) == [], summary


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_refused_answer_key_is_refused_in_the_teachers_language(language, tmp_path):
    """An answer key inside the submissions folder is refused in the language of its notebooks
    (a class made from zh/solutions or zh-TW/solutions reads Chinese)."""
    import shutil
    from pathlib import Path

    from course_grader.cli import AnswerKey, _check_key
    from course_grader.notebook import Assignment, NotebookError

    edition = "zh" if language == "zh_CN" else "zh-TW"
    source = Path(__file__).resolve().parents[1] / edition / "solutions" / "lesson03_scoring"
    key = tmp_path / "submitted" / "lesson03_scoring"
    shutil.copytree(source, key)
    with pytest.raises(NotebookError) as exc:
        _check_key(AnswerKey(Assignment.load(key), i18n.N_("given as a path")), tmp_path / "submitted")
    text = str(exc.value).replace(str(tmp_path), " ")
    assert text.startswith("拒絕" if language == "zh_TW" else "拒绝"), text
    assert _english_left(text.replace("source/<assignment>/", " ").replace("--answer-key PATH", " ")) == [], text
