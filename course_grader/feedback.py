"""Feedback for learners: an HTML page per submission and the same content as text.

Feedback shows, per test cell, the points and the failure message; the learner's own
cell errors and notes. It never shows the source of hidden tests, nor tracebacks into
the grader's code (only frames of the learner's own cells).
"""

from __future__ import annotations

import html

from course_grader.runner import SubmissionResult

__all__ = ["render_html", "render_text", "unclean_cell_lines"]


def _pts(x: float) -> str:
    return f"{x:g}"


def unclean_cell_lines(cells: list[dict]) -> list[str]:
    """Text lines naming the learner's cells that did not run cleanly, each with the last
    lines of its traceback (learner frames only); no lines when every cell ran."""
    errors = [c for c in cells if c.get("status") not in ("ok", None)]
    if not errors:
        return []
    lines = ["", "  Cells of your notebook that did not run cleanly (counted from 1, top to bottom, as in JupyterLab):"]
    for c in errors:
        lines.append(f"    cell {int(c['index']) + 1}: {c['status']}: {c.get('message', '')}")
        tb = str(c.get("traceback", "")).rstrip()
        if tb:
            lines.extend("      " + d for d in tb.splitlines()[-6:])
    return lines


def render_text(result: SubmissionResult) -> str:
    """Plain-text feedback (used by ``course-grade --check``)."""
    lines = [f"Assignment {result.assignment} — {result.student}",
             f"Score: {_pts(result.total)} / {_pts(result.max_total)}"
             + ("" if result.status == "ok" else f"   (status: {result.status})"), ""]
    for nb in result.notebooks:
        if len(result.notebooks) > 1:
            lines.append(f"Notebook {nb.notebook}:")
        for t in nb.tests:
            if t.skipped:
                lines.append(f"  [ hidden ] {t.grade_id}: {t.message}")
                continue
            mark = "PASS" if t.passed else "FAIL"
            lines.append(f"  [{mark:^8}] {t.grade_id} ({_pts(t.points)}/{_pts(t.max_points)})"
                         + ("" if t.passed else f": {t.message}"))
            if t.details and not t.passed:
                lines.extend("             " + d for d in t.details.rstrip().splitlines())
        lines += unclean_cell_lines(nb.cells)
        for note in nb.notes:
            lines.append(f"  Note: {note}")
    return "\n".join(lines) + "\n"


_CSS = """body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
table{border-collapse:collapse;width:100%}td,th{border:1px solid #ccc;padding:.4rem;vertical-align:top;text-align:left}
.pass{color:#1a7f37;font-weight:bold}.fail{color:#c62828;font-weight:bold}pre{background:#f6f8fa;padding:.5rem;
white-space:pre-wrap}.note{background:#fff8e1;padding:.5rem;border-left:4px solid #f9a825;margin:.5rem 0}"""


def render_html(result: SubmissionResult) -> str:
    """A self-contained HTML feedback page for one submission."""
    e = html.escape
    parts = ["<!DOCTYPE html>", "<html lang=\"en\"><head><meta charset=\"utf-8\">",
             f"<title>Feedback: {e(result.assignment)} — {e(result.student)}</title>",
             f"<style>{_CSS}</style></head><body>",
             f"<h1>{e(result.assignment)}</h1><p>Learner: <b>{e(result.student)}</b></p>",
             f"<p>Score: <b>{_pts(result.total)} / {_pts(result.max_total)}</b>"
             + ("" if result.status == "ok" else f" — status: <b>{e(result.status)}</b>") + "</p>"]
    for nb in result.notebooks:
        parts.append(f"<h2>Notebook {e(nb.notebook)}</h2>")
        parts.append("<table><tr><th>Test</th><th>Points</th><th>Result</th></tr>")
        for t in nb.tests:
            if t.skipped:
                verdict = "hidden test (graded by the teacher)"
            elif t.passed:
                verdict = "<span class=\"pass\">passed</span>"
            else:
                verdict = f"<span class=\"fail\">failed</span>: {e(t.message)}"
                if t.details:
                    verdict += f"<pre>{e(t.details)}</pre>"
            parts.append(f"<tr><td>{e(t.grade_id)}</td><td>{_pts(t.points)} / {_pts(t.max_points)}</td>"
                         f"<td>{verdict}</td></tr>")
        parts.append("</table>")
        bad = [c for c in nb.cells if c.get("status") not in ("ok", None)]
        if bad:
            parts.append("<h3>Cells of your notebook that did not run cleanly</h3>"
                         "<p>(cells counted from 1, top to bottom, as in JupyterLab)</p>")
            for c in bad:
                parts.append(f"<p>Cell {int(c['index']) + 1}: <b>{e(str(c['status']))}</b> — {e(str(c.get('message', '')))}</p>")
                if c.get("traceback"):
                    parts.append(f"<pre>{e(str(c['traceback']))}</pre>")
        for note in nb.notes:
            parts.append(f"<div class=\"note\">{e(note)}</div>")
    parts.append("<p><small>Tests are run on fresh random inputs each time; the grader checks what your "
                 "code does. Output printed by your code is not used for scoring.</small></p>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
