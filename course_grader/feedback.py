"""Feedback for learners: an HTML page per submission and the same content as text.

Feedback shows, per test cell, the points and the failure message; the learner's own
cell errors and notes. It never shows the source of hidden tests, nor tracebacks into
the grader's code (only frames of the learner's own cells).
"""

from __future__ import annotations

from course_grader.i18n import gettext_for, html_lang, label, translate_message
from course_grader.results import SubmissionResult
from course_grader.sinks import html_text

__all__ = ["render_html", "render_text", "unclean_cell_lines", "about_test", "mistake_line", "score_line",
           "written_line"]


def _pts(x: float) -> str:
    return f"{x:g}"


def about_test(test: object, language: str | None = None) -> str:
    """One line for the learner: what a test checks and the lesson section it practises
    (``test`` has ``description``, ``lesson`` and ``section``, as a TestOutcome or a
    CheckedTest), in ``language``; "" when the source notebook says neither."""
    _ = gettext_for(language)
    description = translate_message(str(getattr(test, "description", "") or ""), language)
    lesson, section = getattr(test, "lesson", ""), getattr(test, "section", 0)
    where = (_("lesson {lesson}, section {section}").format(lesson=lesson, section=section)
             if lesson and section else "")
    if description and where:
        return _("{description} (see {where})").format(description=description, where=where)
    if where:
        return _("Practises {where}.").format(where=where)
    return description


def mistake_line(test: object, language: str | None = None) -> str:
    """One line naming the typical mistake a failed test's outputs matched, with its hint and
    the lesson section that covers it; "" when none (course_grader.diagnose)."""
    _ = gettext_for(language)
    hint = str(getattr(test, "hint", "") or "")
    if not hint:
        return ""
    lesson, section = getattr(test, "hint_lesson", ""), getattr(test, "hint_section", 0)
    where = _("lesson {lesson}, section {section}").format(lesson=lesson, section=section)
    return _("This looks like a known mistake: {hint} (see {where})").format(
        hint=translate_message(hint, language), where=where)


def unclean_cell_lines(cells: list[dict], language: str | None = None) -> list[str]:
    """Text lines naming the learner's cells that did not run cleanly, each with the last
    lines of its traceback (learner frames only); no lines when every cell ran."""
    _ = gettext_for(language)
    m = lambda text: translate_message(str(text), language)  # noqa: E731 - a grader's message, translated
    errors = [c for c in cells if c.get("status") not in ("ok", None)]
    if not errors:
        return []
    lines = ["", "  " + _("Cells of your notebook that did not run cleanly (counted from 1, top to bottom, "
                          "as in JupyterLab):")]
    for c in errors:
        lines.append("    " + _("cell {number}: {status}: {message}").format(
            number=int(c['index']) + 1, status=m(c['status']), message=m(c.get('message', ''))))
        tb = str(c.get("traceback", "")).rstrip()
        if tb:
            lines.extend("      " + d for d in tb.splitlines()[-6:])
    return lines


def score_line(result: SubmissionResult, _) -> str:
    """"Score: 7 / 9", and while written answers wait for the teacher, that the score is
    provisional and how many points are still to be graded by hand (never shown as a 0)."""
    line = _("Score: {total} / {max_total}").format(total=_pts(result.total), max_total=_pts(result.max_total))
    if result.pending_manual:
        line += " " + _("(provisional: {points} points of written answers are graded by your teacher)").format(
            points=_pts(result.pending_manual))
    return line


def written_line(answer: object, _) -> str:
    """One line for a written answer: graded by the teacher, not pass/fail (a blank one scores 0)."""
    if not getattr(answer, "answered", False):
        return _("written answer ({max_points} points): no answer was found in your notebook, so it scores "
                 "0").format(max_points=_pts(getattr(answer, "max_points", 0.0)))
    return _("written answer, graded by your teacher ({max_points} points): not graded yet").format(
        max_points=_pts(getattr(answer, "max_points", 0.0)))


def variant_line(result: SubmissionResult, _) -> str:
    """The learner's variant (course_grader.variants), as the feedback shows it."""
    raw = result.variant.get("values") if result.variant else None
    values: dict = raw if isinstance(raw, dict) else {}
    return _("Your variant: {digest} ({values})").format(
        digest=str(result.variant.get("digest", "")), values=", ".join(f"{k} = {v}" for k, v in values.items()))


def render_text(result: SubmissionResult) -> str:
    """Plain-text feedback, in the language of the learner's notebook."""
    language = result.language
    _ = gettext_for(language)
    m = lambda text: translate_message(str(text), language)  # noqa: E731 - a grader's message, translated
    lines = [_("Assignment {assignment} — {student}").format(assignment=result.assignment, student=result.student),
             score_line(result, _)
             + ("" if result.status == "ok" else "   " + _("(status: {status})").format(status=m(result.status)))]
    lines += [variant_line(result, _)] if result.variant else []
    lines.append("")
    for nb in result.notebooks:
        if len(result.notebooks) > 1:
            lines.append(_("Notebook {notebook}:").format(notebook=nb.notebook))
        for t in nb.tests:
            if t.skipped:
                lines.append(f"  [{label(_('hidden'))}] {t.grade_id}: {m(t.message)}")
                about = about_test(t, language)
                if about:
                    lines.append("             " + about)
                continue
            mark = _("PASS") if t.passed else _("FAIL")
            lines.append(f"  [{label(mark)}] {t.grade_id} ({_pts(t.points)}/{_pts(t.max_points)})"
                         + ("" if t.passed else f": {m(t.message)}"))
            named = "" if t.passed else mistake_line(t, language)
            if named:
                lines.append("             " + named)
            about = about_test(t, language)
            if about:
                lines.append("             " + about)
            if t.details and not t.passed:
                lines.extend("             " + d for d in t.details.rstrip().splitlines())
        for w in nb.written:
            lines.append(f"  [{label(_('teacher'))}] {w.grade_id}: {written_line(w, _)}")
        lines += unclean_cell_lines(nb.cells, language)
        for note in nb.notes:
            lines.append("  " + _("Note: {note}").format(note=m(note)))
    return "\n".join(lines) + "\n"


_CSS = """body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
table{border-collapse:collapse;width:100%}td,th{border:1px solid #ccc;padding:.4rem;vertical-align:top;text-align:left}
.pass{color:#1a7f37;font-weight:bold}.fail{color:#c62828;font-weight:bold}pre{background:#f6f8fa;padding:.5rem;
white-space:pre-wrap}.note{background:#fff8e1;padding:.5rem;border-left:4px solid #f9a825;margin:.5rem 0}"""


def render_html(result: SubmissionResult) -> str:
    """A self-contained HTML feedback page for one submission, in the language of the
    learner's notebook (``result.language``)."""
    language = result.language
    _ = gettext_for(language)
    m = lambda text: translate_message(str(text), language)  # noqa: E731 - a grader's message, translated
    e = html_text  # the HTML sink's one guard (course_grader.sinks)
    status = "" if result.status == "ok" else " — " + _("status: {status}").format(status=f"<b>{e(m(result.status))}</b>")
    parts = ["<!DOCTYPE html>", f"<html lang=\"{html_lang(language)}\"><head><meta charset=\"utf-8\">",
             "<title>" + e(_("Feedback: {assignment} — {student}").format(assignment=result.assignment,
                                                                          student=result.student)) + "</title>",
             f"<style>{_CSS}</style></head><body>",
             f"<h1>{e(result.assignment)}</h1><p>" + _("Learner: {student}").format(student=f"<b>{e(result.student)}</b>")
             + "</p>",
             "<p>" + _("Score: {score}").format(score=f"<b>{_pts(result.total)} / {_pts(result.max_total)}</b>")
             + status + "</p>"]
    if result.pending_manual:
        parts.append("<p class=\"note\">" + e(_("Provisional: {points} points of written answers are graded by "
                                                 "your teacher, and are not in this score yet.").format(
            points=_pts(result.pending_manual))) + "</p>")
    if result.variant:
        parts.append("<p>" + e(variant_line(result, _)) + "</p>")
    for nb in result.notebooks:
        parts.append("<h2>" + e(_("Notebook {notebook}").format(notebook=nb.notebook)) + "</h2>")
        parts.append(f"<table><tr><th>{e(_('Test'))}</th><th>{e(_('Points'))}</th><th>{e(_('Result'))}</th></tr>")
        for t in nb.tests:
            if t.skipped:
                verdict = e(_("hidden test (graded by the teacher)"))
            elif t.passed:
                verdict = f"<span class=\"pass\">{e(_('passed'))}</span>"
            else:
                verdict = f"<span class=\"fail\">{e(_('failed'))}</span>: {e(m(t.message))}"
                named = mistake_line(t, language)
                if named:
                    verdict += f"<div class=\"note\">{e(named)}</div>"
                if t.details:
                    verdict += f"<pre>{e(t.details)}</pre>"
            about = about_test(t, language)
            test_cell = e(t.grade_id) + (f"<br><small>{e(about)}</small>" if about else "")
            parts.append(f"<tr><td>{test_cell}</td><td>{_pts(t.points)} / {_pts(t.max_points)}</td>"
                         f"<td>{verdict}</td></tr>")
        for w in nb.written:
            shown = _pts(w.points) if w.points is not None else "—"
            parts.append(f"<tr><td>{e(w.grade_id)}</td><td>{shown} / {_pts(w.max_points)}</td>"
                         f"<td>{e(written_line(w, _))}</td></tr>")
        parts.append("</table>")
        bad = [c for c in nb.cells if c.get("status") not in ("ok", None)]
        if bad:
            parts.append("<h3>" + e(_("Cells of your notebook that did not run cleanly")) + "</h3>"
                         "<p>" + e(_("(cells counted from 1, top to bottom, as in JupyterLab)")) + "</p>")
            for c in bad:
                parts.append("<p>" + _("Cell {number}: {status} — {message}").format(
                    number=int(c['index']) + 1, status=f"<b>{e(m(c['status']))}</b>",
                    message=e(m(c.get('message', '')))) + "</p>")
                if c.get("traceback"):
                    parts.append(f"<pre>{e(str(c['traceback']))}</pre>")
        for note in nb.notes:
            parts.append(f"<div class=\"note\">{e(m(note))}</div>")
    parts.append("<p><small>" + e(_("Tests are run on fresh random inputs each time; the grader checks what your "
                                    "code does. Output printed by your code is not used for scoring.")) + "</small></p>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
