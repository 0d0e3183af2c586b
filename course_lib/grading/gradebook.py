"""Writing the gradebook (``grades.csv``, ``grades.json``) and feedback files.

Everything is written from the grader's memory after every sandbox process is dead,
each file atomically (temporary file in the same directory + ``os.replace``). A previous
gradebook is never overwritten: it is renamed ``grades.<timestamp>.csv`` (and likewise
``grades.<timestamp>.json`` and ``feedback.<timestamp>/``) before grading starts.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable

from course_lib.grading.feedback import render_html
from course_lib.grading.runner import SubmissionResult

__all__ = ["atomic_write", "rotate_previous", "write_gradebook", "csv_text", "safe_name"]


def atomic_write(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (readers see the old or the new file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
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
            moved.append((old, target))
    return moved


def _fmt(x: float) -> str:
    return f"{x:g}"


def safe_name(student: str) -> str:
    """A file name for a learner id (keeps letters, digits, ``-_.@``)."""
    cleaned = "".join(ch if ch.isalnum() or ch in "-_.@" else "_" for ch in student).strip(".")
    return cleaned or "_"


def csv_text(results: Iterable[SubmissionResult], columns: list[str]) -> str:
    """The gradebook as CSV text, one row per learner, sorted by learner id."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["student", "assignment", *columns, "total", "max", "status"])
    for r in sorted(results, key=lambda r: r.student):
        scores = r.scores
        writer.writerow([r.student, r.assignment, *(_fmt(scores.get(c, 0.0)) for c in columns),
                         _fmt(r.total), _fmt(r.max_total), r.status])
    return buf.getvalue()


def write_gradebook(results: list[SubmissionResult], columns: list[str], out_dir: str | Path) -> dict[str, Path]:
    """Write ``grades.csv``, ``grades.json`` and ``feedback/<student>.html`` in ``out_dir``.

    Returns:
        The paths written: ``{"csv": ..., "json": ..., "feedback": ...}``.
    """
    out_dir = Path(out_dir)
    feedback_dir = out_dir / "feedback"
    feedback_dir.mkdir(parents=True, exist_ok=True)
    for r in results:
        atomic_write(feedback_dir / f"{safe_name(r.student)}.html", render_html(r))
    ordered = sorted(results, key=lambda r: r.student)
    atomic_write(out_dir / "grades.json",
                 json.dumps({"columns": columns, "results": [r.to_dict() for r in ordered]}, indent=1) + "\n")
    atomic_write(out_dir / "grades.csv", csv_text(ordered, columns))
    return {"csv": out_dir / "grades.csv", "json": out_dir / "grades.json", "feedback": feedback_dir}
