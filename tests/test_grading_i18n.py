"""The grader speaks the learner's language (issue 23): gettext catalogue, language from the
notebook's metadata (learner-controlled: anything unknown is English), Chinese ``--check``
reports, feedback pages and "About the checks" cells. Fast: no sandbox (the graded
end-to-end runs are in tests/test_grading_zh.py)."""

from __future__ import annotations

import ast
import json
import re
import string
import time
from pathlib import Path

import polib
import pytest

from course_grader import i18n
from course_grader.feedback import render_html, render_text
from course_grader.i18n import DEFAULT, gettext_for, normalise_language, notebook_language
from course_grader.runner import NotebookResult, Status, SubmissionResult
from course_grader.runner import TestOutcome as Outcome
from course_grader.selfcheck import CheckedTest, CheckReport, render_check

TIER = "fast"  # course_tools/tiers.py

ROOT = Path(__file__).resolve().parents[1]
PO = ROOT / "course_grader" / "locale" / "zh_CN" / "LC_MESSAGES" / "course_grader.po"
CJK = re.compile(r"[\u4e00-\u9fff]")


def marked_messages() -> dict[str, list[str]]:
    """Every ``_("...")`` / ``N_("...")`` of course_grader/*.py -> where it is used."""
    out: dict[str, list[str]] = {}
    for path in sorted((ROOT / "course_grader").rglob("*.py")):
        tree = ast.parse(path.read_text("utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("_", "N_"):
                where = f"{path.relative_to(ROOT)}:{node.lineno}"
                assert len(node.args) == 1 and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, str), f"{where}: _() takes one literal string (the msgid)"
                out.setdefault(node.args[0].value, []).append(where)
    # the tests' descriptions (issue 30): translated where shown, like a marked message
    from course_grader.notebook import cell_test_info
    for path in sorted((ROOT / "solutions").glob("*/*.ipynb")):
        for cell in json.loads(path.read_text("utf-8"))["cells"]:
            text = cell_test_info(cell).get("description")
            if text:
                out.setdefault(text, []).append(str(path.relative_to(ROOT)))
    # the hints of the typical mistakes (issue 30): translated where shown
    from course_grader.diagnose import load_hinted_mistakes
    for folder in sorted((ROOT / "solutions").glob("*/")):
        for mistake in load_hinted_mistakes(folder):
            out.setdefault(mistake["hint"], []).append(f"{folder.relative_to(ROOT)}/mistakes.py")
    return out


def _fields(text: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(text) if f is not None}


@pytest.mark.slow  # 0.18 s of CPU (a fast test stays under 0.1 s: course_tools/tiers.py)
def test_every_marked_message_has_a_chinese_entry():
    msgs = marked_messages()
    assert len(msgs) >= 30, "the learner-facing messages are no longer marked with _()"
    po = polib.pofile(str(PO), encoding="utf-8")
    entries = {e.msgid: e for e in po if not e.obsolete}
    missing = {m: w for m, w in msgs.items() if m not in entries or not entries[m].msgstr}
    assert missing == {}, f"messages without a Chinese entry in {PO.relative_to(ROOT)}: {missing}"
    fuzzy = [e.msgid for e in entries.values() if "fuzzy" in e.flags]
    assert fuzzy == [], f"fuzzy entries (the English changed; re-translate): {fuzzy}"
    unused = sorted(set(entries) - set(msgs))
    assert unused == [], f"entries no code uses any more (stale catalogue; remove them): {unused}"
    for msgid, e in entries.items():
        assert _fields(e.msgstr) == _fields(msgid), f"fields differ in the translation of {msgid!r}"
        assert CJK.search(e.msgstr) or msgid.strip() in (",",), f"not Chinese: {e.msgstr!r}"


def test_the_catalogue_is_package_data():
    text = (ROOT / "pyproject.toml").read_text("utf-8")
    assert '"locale/*/LC_MESSAGES/*.po"' in text
    assert i18n.catalogue_path("zh_CN") == PO.resolve()


def test_translation_of_a_known_message():
    _ = gettext_for("zh_CN")
    assert _("Score: {score}").format(score="3 / 4") == "得分：3 / 4"
    assert gettext_for("en")("Score: {score}") == "Score: {score}"
    assert gettext_for(None)("PASS") == "PASS"


@pytest.mark.parametrize("value, expected", [
    ("zh-CN", "zh_CN"), ("zh_CN", "zh_CN"), (" ZH-cn ", "zh_CN"), ("zh-Hans", "zh_CN"), ("en", "en"),
    ("fr", None), ("", None), ("zh-CN" * 100, None), ("../../../etc/passwd", None), ("zh-CN\x00", None),
    ("zh_CN/../../x", None), (None, None), (3, None), (["zh-CN"], None), ({"zh-CN": 1}, None), (True, None),
])
def test_hostile_language_values_are_english(value, expected):
    assert normalise_language(value) == expected
    nb = {"metadata": {"course": {"language": value}}}
    assert notebook_language(nb) == (expected or DEFAULT)
    assert notebook_language({"metadata": {"language": value}}) == (expected or DEFAULT)
    # whatever the notebook says, translating never fails and falls back to English
    assert gettext_for(notebook_language(nb))("PASS") in ("PASS", "通过")


@pytest.mark.parametrize("nb", [None, [], "x", {}, {"metadata": None}, {"metadata": []}, {"metadata": {"course": "zh"}},
                                {"metadata": {"course": ["zh-CN"]}}, {"metadata": {"language": {"a": 1}}}])
def test_malformed_metadata_is_english(nb):
    assert notebook_language(nb) == "en"


def test_course_language_first_then_language():
    assert notebook_language({"metadata": {"course": {"language": "zh-CN"}, "language": "en"}}) == "zh_CN"
    assert notebook_language({"metadata": {"course": {"language": "klingon"}, "language": "zh-CN"}}) == "zh_CN"
    assert notebook_language({"metadata": {"language": "zh-CN"}}) == "zh_CN"
    assert notebook_language({"metadata": {"kernelspec": {"language": "zh-CN"}}}) == "en"


def _result(language: str) -> SubmissionResult:
    tests = [Outcome("test_ok", "test_ok", 2, 2, True),
             Outcome("test_bad", "test_bad", 0, 3, False, "weights do not sum to 1"),
             Outcome("test_hidden", "test_hidden", 0, 1, False, "hidden", hidden=True, skipped=True)]
    cells = [{"index": 4, "status": "error", "message": "NameError: x", "traceback": "Traceback ...\nNameError: x"}]
    nb = NotebookResult("scoring", Status.OK, tests, cells, notes=["a note"], language=language)
    return SubmissionResult("alice<b>", "lesson03_scoring", Status.OK, 2, 5, [nb])


def test_feedback_page_in_chinese_for_a_chinese_notebook():
    page = render_html(_result("zh_CN"))
    assert '<html lang="zh-CN">' in page
    for word in ("得分：<b>2 / 5</b>", "学习者：<b>alice&lt;b&gt;</b>", "通过", "未通过", "隐藏测试",
                 "未能顺利运行的单元格", "第 5 个单元格"):
        assert word in page, word
    assert "Score:" not in page and "passed" not in page
    # learner text is escaped, not translated
    assert "weights do not sum to 1" in page and "<b>alice<b>" not in page
    text = render_text(_result("zh_CN"))
    assert text.startswith("作业 lesson03_scoring — alice<b>\n得分：2 / 5\n")
    assert "] test_ok (2/2)" in text and "通过" in text and "未通过" in text and "第 5 个单元格：出错" in text
    assert "注意：a note" in text and "Score" not in text


@pytest.mark.parametrize("language", ["en", "fr", "../../etc", "", "ja_JP"])
def test_feedback_page_in_english_otherwise(language):
    page = render_html(_result(language))
    assert '<html lang="en">' in page
    assert "Score: <b>2 / 5</b>" in page and "Learner: <b>alice&lt;b&gt;</b>" in page
    assert not CJK.search(page)
    assert "Score: 2 / 5" in render_text(_result(language))


def test_result_language_survives_the_worker_round_trip():
    res = SubmissionResult.from_dict(_result("zh_CN").to_dict())
    assert res.language == "zh_CN" and "得分" in render_html(res)
    old = _result("en").to_dict()
    for nb in old["notebooks"]:
        del nb["language"]   # results written before the language was recorded
    assert SubmissionResult.from_dict(old).language == "en"


def _report(language: str) -> CheckReport:
    rep = CheckReport("lesson03_scoring", "scoring.ipynb", language=language)
    rep.tests = [CheckedTest("test_a", 2, "public", True), CheckedTest("test_b", 3, "public", False, "wrong shape"),
                 CheckedTest("test_c", 4, "public+hidden", True), CheckedTest("test_d", 1, "hidden")]
    rep.notes = ["a note"]
    return rep


def test_check_report_in_chinese():
    out = render_check(_report("zh_CN"))
    for word in ("自查 lesson03_scoring，笔记本 scoring.ipynb：只运行公开的检查", "公开检查：得 2 分，共 5 分。",
                 "另有 5 分来自隐藏测试", "test_c (4)、test_d (1)", "满分：10 分", "wrong shape", "注意：a note",
                 "公开部分通过；它的 4 分由隐藏测试决定"):
        assert word in out, word
    assert "Self-check" not in out and "points" not in out


def test_check_report_in_english_is_unchanged():
    out = render_check(_report("en"))
    assert out.startswith("Self-check of lesson03_scoring, notebook scoring.ipynb: public checks only\n")
    assert "Public checks: 2 of 5 points." in out
    assert "5 more points come from hidden tests that run only when your teacher grades: test_c (4), test_d (1)." in out
    assert "  [  PASS  ] test_a (2/2)" in out and "  [  FAIL  ] test_b (0/3): wrong shape" in out
    assert "  [ hidden ] test_d (1 points): hidden tests only, run when your teacher grades" in out
    assert not CJK.search(out)


def test_about_the_checks_cell_follows_the_notebook_language():
    import nbformat

    from course_grader.nbgrader_course import RecordAssignment

    def released(language):
        nb = nbformat.v4.new_notebook()
        if language:
            nb.metadata["course"] = {"language": language}
        nb.cells = [nbformat.v4.new_markdown_cell("# title"),
                    nbformat.v4.new_code_cell("assert True", metadata={"nbgrader": {
                        "grade": True, "solution": False, "grade_id": "t1", "points": 3}})]
        nb, _ = RecordAssignment().preprocess(nb, {"nbgrader": {"assignment": "a", "notebook": "n"}})
        return nb.cells[1].source

    assert released("zh-CN").startswith("**关于检查。** 本笔记本满分 3 分，全部由可见的测试单元格决定")
    assert released(None).startswith("**About the checks.** This notebook is worth 3 points, all decided")
    assert released({"x": 1}).startswith("**About the checks.**")


# -- learner text through the templates, in the trusted process: linear (issue 29) -------------

def _regex_translate(message: str, language: str, only: tuple | None = None) -> str:
    """The matcher before issue 29 (a deliberately super-linear control): each template (or the
    one given) as a regular expression with lazy one-line groups, tried with fullmatch."""
    for pieces, names, msgstr in [only] if only else i18n._templates(language):
        parts = [re.escape(pieces[0])]
        for name, piece in zip(names, pieces[1:]):
            parts.append(f"(?P={name})" if f"(?P<{name}>" in "".join(parts) else f"(?P<{name}>[^\n]*?)")
            parts.append(re.escape(piece))
        if re.fullmatch("".join(parts), message, re.S):
            return msgstr
    return message


def _adversarial(pieces: tuple[str, ...], size: int) -> str:
    """A message a learner's exception text could be: the template's first piece, then its
    second piece over and over (each a place a lazy group could end), then its last piece."""
    body = (pieces[1] or " ") + "x"
    return (pieces[0] + body * (size // len(body) + 1))[:size - len(pieces[-1])] + pieces[-1]


def _cpu_per_char(translate, message: str) -> float:
    """CPU seconds per character of one translation (process time, repeated to at least 0.2 s)."""
    runs, start = 0, time.process_time()
    while True:
        translate(message, "zh_CN")
        runs += 1
        spent = time.process_time() - start
        if spent >= 0.2:
            return spent / runs / len(message)


def _growth(translate, template, small: int, big: int) -> float:
    """How much more each character costs at ``big`` than at ``small`` (1: linear)."""
    return _cpu_per_char(translate, _adversarial(template, big)) / _cpu_per_char(translate, _adversarial(template, small))


@pytest.mark.slow  # a measurement: at least 0.2 s of CPU per size, eight sizes (1.6 s by design): the slow tier
def test_translating_learner_text_is_linear(monkeypatch):
    """translate_message matches the catalogue's templates over messages that can quote the
    learner's text, in the grader's own process. A 200 KB message shaped against the templates
    costs per character what a 2 KB one costs (the cap of MAX_MATCHED characters lifted to
    measure the matcher itself); the old regex matcher fails the same measure."""
    templates = sorted((t for t in i18n._templates("zh_CN") if len(t[1]) >= 3 and t[0][1].strip()),
                       key=lambda t: -len(t[1]))[:3]
    assert templates, "no template with three fields to shape a message against"
    monkeypatch.setattr(i18n, "MAX_MATCHED", 10**6)
    for pieces, _names, _ in templates:
        growth = _growth(i18n.translate_message, pieces, 2_000, 200_000)
        assert growth < 4, f"{pieces}: a character of a 200 KB message costs {growth:.1f}x one of a 2 KB message"
    # the control: the same measure catches a super-linear matcher (sizes kept small: it is slow)
    pieces = templates[0][0]
    old = _growth(lambda message, language: _regex_translate(message, language, templates[0]), pieces, 300, 6_000)
    assert old > 4, f"the control grew only {old:.1f}x"
    # and with the cap in place a long message is never matched at all
    monkeypatch.undo()
    long = _adversarial(pieces, 200_000)
    assert i18n.translate_message(long, "zh_CN") is long
