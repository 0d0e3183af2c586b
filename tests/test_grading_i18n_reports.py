"""Every report the grader writes for a learner or a teacher is in the notebook's language
(issue 32): the feedback page and text, the ``--check`` report and the teacher's summary line,
rendered in zh-CN and zh-TW, carry no English sentence outside code and names.

The messages are the ones the grader really makes: every message marked in course_grader
(``_()`` / ``N_()``, the checks' failures, the runner's test and cell messages, the statuses and
notes) formatted with sample fields, and the failures the checks raise on wrong answers. Fast:
no sandbox.
"""

from __future__ import annotations

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


def _messages() -> list[str]:
    marked = [_fill(m) for m in marked_messages() if len(m) > 2]
    return marked + _real_check_failures()


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
