"""Writing the gradebook (``grades.csv``, ``grades.json``) and feedback files.

Everything is written from the grader's memory after every sandbox process is dead,
each file atomically (temporary file in the same directory + ``os.replace``). A previous
gradebook is never overwritten: ``course-grade`` writes the new one into a staging folder,
and only when it is complete renames the previous one ``grades.<timestamp>.csv`` (and
likewise ``grades.<timestamp>.json`` and ``feedback.<timestamp>/``) and moves the new one in
(an interrupted run leaves the previous gradebook where it was; see
:mod:`course_grader.journal`). Each assignment has its own folder (``<out>/<assignment>/``),
and :func:`write_lms_csv` sums them up. Text cells go through the CSV sink's guard
(:func:`course_grader.sinks.csv_cell`).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable

from course_grader.feedback import render_html
from course_grader.notebook import Assignment
from course_grader.results import SubmissionResult
from course_grader.sinks import csv_cell

__all__ = ["atomic_write", "rotate_previous", "write_gradebook", "csv_text", "csv_cell", "safe_name", "feedback_names", "answer_key_digest",
           "write_lms_csv"]


def atomic_write(path: str | Path, data: str | bytes, mode: int = 0o600) -> None:
    """Replace ``path`` atomically with ``data`` (text is written as UTF-8): a new file of a
    random name in the same folder (created exclusively, never through a link), then renamed
    over ``path`` (a link left there is replaced, never followed). Readers see the old file or
    the new one. ``mode``: 0o600 for gradebooks (private, issue 9: the teacher's account only);
    nbgrader's files are 0o644."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def rotate_previous(out_dir: str | Path) -> list[tuple[Path, Path]]:
    """Rename an existing gradebook and feedback folder with a timestamp.

    Returns:
        (old path, new path) pairs, so the caller can say what it kept.
    """
    out_dir = Path(out_dir)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    moved = []
    for name, new in (("grades.csv", f"grades.{stamp}.csv"), ("grades.json", f"grades.{stamp}.json"),
                      ("feedback", f"feedback.{stamp}")):
        old = out_dir / name
        if old.exists():
            target = out_dir / new
            os.replace(old, target)
            os.chmod(target, 0o700 if target.is_dir() else 0o600)  # kept gradebooks are private too
            moved.append((old, target))
    return moved


def _fmt(x: float) -> str:
    return f"{x:g}"


_NAME_OK = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.@")


def safe_name(student: str) -> str:
    """An injective file name for a learner id: ASCII letters, digits and ``-_.@`` are kept,
    every other character (``~`` included, so the encoding can be undone) becomes ``~`` and
    its UTF-8 bytes in hex: ``b victim`` -> ``b~20victim``, ``b_victim`` stays. A leading
    ``.`` is encoded too (no hidden or ``..`` names). Very long ids keep a prefix and a digest.
    """
    out = []
    for i, ch in enumerate(student):
        if ch in _NAME_OK and not (i == 0 and ch == "."):
            out.append(ch)
        else:
            out.append("".join(f"~{b:02x}" for b in ch.encode("utf-8", "surrogatepass")))
    name = "".join(out) or "~"
    if len(name) > 150:
        name = name[:100] + "~~" + hashlib.sha256(name.encode()).hexdigest()[:32]
    return name


def feedback_names(students: Iterable[str]) -> dict[str, str]:
    """Learner id -> feedback file stem, checked for collisions (names that differ only in
    case collide on case-insensitive file systems: those get a digest suffix).

    Raises:
        ValueError: two different ids still map to one name (cannot happen with
            :func:`safe_name`; checked rather than assumed).
    """
    names: dict[str, str] = {}
    seen: dict[str, str] = {}
    for student in sorted(set(students)):
        name = safe_name(student)
        if name.casefold() in seen:
            name += "~~" + hashlib.sha256(student.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        if name.casefold() in seen:
            raise ValueError(f"two learners map to the feedback file {name!r}: {seen[name.casefold()]!r}, {student!r}")
        seen[name.casefold()] = student
        names[student] = name
    return names


def csv_text(results: Iterable[SubmissionResult], columns: list[str], written: Iterable[str] = ()) -> str:
    """The gradebook as CSV text, one row per learner, sorted by learner id.

    ``written``: the columns of written answers (graded by hand, in Formgrader). When there
    are any, a column ``pending_manual`` follows ``max``: the points still to be graded by
    hand (``total`` is then provisional: the auto-graded points only), and a written
    answer's own column is empty until it has a score - never a 0 that could be taken for
    one. A written answer of a notebook that could not be read is a 0 (nothing to grade).
    """
    results = list(results)
    manual = set(written) | {w.column for r in results for w in r.written}
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["student", "assignment", *map(csv_cell, columns), "total", "max",
                     *(["pending_manual"] if manual else []), "status"])
    for r in sorted(results, key=lambda r: r.student):
        scores: dict[str, float | None] = {**r.scores, **{w.column: w.points for w in r.written}}
        cells = ["" if (v := scores.get(c, 0.0)) is None else _fmt(v) for c in columns]
        writer.writerow([csv_cell(r.student), csv_cell(r.assignment), *cells, _fmt(r.total), _fmt(r.max_total),
                         *([_fmt(r.pending_manual)] if manual else []), csv_cell(r.status)])
    return buf.getvalue()


def answer_key_digest(assignment: Assignment) -> dict[str, str]:
    """SHA-256 of each source notebook of the answer key, to tell its versions apart."""
    return {name: hashlib.sha256(nb.path.read_bytes()).hexdigest() for name, nb in assignment.notebooks.items()}


def write_gradebook(results: list[SubmissionResult], columns: list[str], out_dir: str | Path, *,
                    answer_key: dict | None = None, submission_sha256: dict[str, dict] | None = None,
                    not_graded: list[dict] | None = None, written: Iterable[str] = ()) -> dict[str, Path]:
    """Write ``grades.csv``, ``grades.json`` and ``feedback/<student>.html`` in ``out_dir``.

    Args:
        results: one result per learner.
        columns: the gradebook columns (test cells).
        out_dir: the assignment's output folder.
        answer_key: where the answer key came from (path, origin, sha256), recorded in ``grades.json``.
        submission_sha256: learner id -> {notebook: SHA-256 of the bytes graded (None: missing or
            refused)}, recorded in each learner's entry of ``grades.json``.
        not_graded: entries of the submissions folder that were not graded, and why (recorded).
        written: the columns of written answers (:func:`csv_text`).

    Returns:
        The paths written: ``{"csv": ..., "json": ..., "feedback": ...}``.
    """
    out_dir = Path(out_dir)
    feedback_dir = out_dir / "feedback"
    feedback_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(out_dir, 0o700)  # private output folder (issue 9)
    os.chmod(feedback_dir, 0o700)
    names = feedback_names(r.student for r in results)
    for r in results:
        atomic_write(feedback_dir / f"{names[r.student]}.html", render_html(r))
    ordered = sorted(results, key=lambda r: r.student)
    atomic_write(out_dir / "grades.json",
                 json.dumps({"assignment": ordered[0].assignment if ordered else out_dir.name,
                             "answer_key": answer_key or {}, "columns": columns,
                             "results": [_row(r, submission_sha256) for r in ordered],
                             **({"not_graded": not_graded} if not_graded else {})}, indent=1) + "\n")
    atomic_write(out_dir / "grades.csv", csv_text(ordered, columns, written))
    return {"csv": out_dir / "grades.csv", "json": out_dir / "grades.json", "feedback": feedback_dir}


def _row(res: SubmissionResult, sha256: dict[str, dict] | None) -> dict:
    row = res.to_dict()
    if sha256 is not None and res.student in sha256:
        row["submission_sha256"] = sha256[res.student]
    return row


def write_lms_csv(out_dir: str | Path, filename: str = "lms_grades.csv") -> Path:
    """Sum up every assignment gradebook under ``out_dir`` for an LMS gradebook import.

    Reads ``<out_dir>/<assignment>/grades.json`` and writes ``<out_dir>/lms_grades.csv``: a
    header ``student,<assignment>...,total``, then one row per learner with the total points
    of each assignment (empty where the learner has no row for that assignment) and the sum.
    LMS imports expect learner rows only, so the maximum points of each assignment go to
    ``lms_max_points.csv`` beside it.

    Written answers graded by hand (in Formgrader) are not in these totals until the teacher
    has graded them: when any learner has points still to grade by hand, a last column
    ``pending_manual`` gives them (a learner's totals are provisional while it is not 0), and
    the maxima include them. The final grades, manual scores included, are nbgrader's
    (``nbgrader export``) after Formgrader.

    Returns:
        The path of the CSV file.
    """
    out_dir = Path(out_dir)
    totals: dict[str, dict[str, float]] = {}
    maxima: dict[str, float] = {}
    pending: dict[str, float] = {}
    for path in sorted(out_dir.glob("*/grades.json")):
        try:
            data = json.loads(path.read_text("utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        name = str(data.get("assignment") or path.parent.name)
        for r in data.get("results", []):
            totals.setdefault(str(r["student"]), {})[name] = float(r["total"])
            waiting = r.get("pending_manual")
            if isinstance(waiting, (int, float)) and not isinstance(waiting, bool) and waiting > 0:
                pending[str(r["student"])] = pending.get(str(r["student"]), 0.0) + float(waiting)
            maxima[name] = max(maxima.get(name, 0.0), float(r.get("max_total", 0.0)))
    names = sorted(maxima)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["student", *map(csv_cell, names), "total", *(["pending_manual"] if pending else [])])
    for student in sorted(totals):
        row = totals[student]
        writer.writerow([csv_cell(student), *(_fmt(row[n]) if n in row else "" for n in names), _fmt(sum(row.values())),
                         *([_fmt(pending.get(student, 0.0))] if pending else [])])
    target = out_dir / filename
    atomic_write(target, buf.getvalue())
    mx = io.StringIO()
    w2 = csv.writer(mx, lineterminator="\n")
    w2.writerow(["assignment", "max_points"])
    for n in names:
        w2.writerow([csv_cell(n), _fmt(maxima[n])])
    w2.writerow(["total", _fmt(sum(maxima.values()))])
    atomic_write(out_dir / "lms_max_points.csv", mx.getvalue())
    return target
