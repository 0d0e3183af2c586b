"""What a class run keeps on disk while it grades (issue 29).

* :func:`snapshot_submissions` reads every submitted notebook once, through the one door
  (:func:`course_grader.runner.read_submission`), into a private folder, and records the
  SHA-256 of those bytes: the workers grade the copies and ``--to-nbgrader`` exports the
  same copies, so a learner who swaps the file during the run changes neither.
* :class:`Journal` keeps each learner's result, as soon as it is known, in
  ``<out>/<assignment>/journal/<learner>.json`` (one atomic write per learner). A run that is
  interrupted (Ctrl-C, SIGTERM) leaves the journal; the next run of the same command takes
  from it every learner whose submission (SHA-256), answer key (SHA-256), seed and limits are
  unchanged, and grades only the others. A complete run removes the journal after writing
  the gradebook.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from course_grader.gradebook import atomic_write, safe_name
from course_grader.results import SubmissionResult
from course_grader.submission import SubmissionRefused, read_submission

__all__ = ["GradedFiles", "snapshot_submissions", "Journal"]


@dataclass
class GradedFiles:
    """One learner's notebooks as read for grading."""

    #: notebook name -> private copy to grade and export (None: missing or refused)
    paths: dict[str, Path | None] = field(default_factory=dict)
    #: notebook name -> SHA-256 of the bytes read (None: missing or refused)
    sha256: dict[str, str | None] = field(default_factory=dict)
    #: notebook name -> why it was refused (a symbolic link, a FIFO, too big...)
    refused: dict[str, str] = field(default_factory=dict)


def snapshot_submissions(submissions: dict[str, dict[str, Path | None]], folder: Path) -> dict[str, GradedFiles]:
    """Copy each submitted notebook's bytes into ``folder`` (private) and hash them.

    The copy of learner ``s``'s notebook ``x.ipynb`` is ``folder/<n>/s/x.ipynb`` (``<n>`` a
    number: learner ids are used as they are, one folder each), so that grading reads it as
    the learner's own file, with the same name in its messages."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    out: dict[str, GradedFiles] = {}
    for n, (student, notebooks) in enumerate(sorted(submissions.items())):
        files = GradedFiles()
        for name, path in notebooks.items():
            files.paths[name] = None
            files.sha256[name] = None
            if path is None:
                continue
            try:
                data = read_submission(path, student)
            except SubmissionRefused as exc:
                files.refused[name] = str(exc)
                continue
            target = folder / str(n) / student / Path(path).name
            target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            files.paths[name] = target
            files.sha256[name] = hashlib.sha256(data).hexdigest()
        out[student] = files
    return out


class Journal:
    """Results of the run in progress, one file per learner (see the module docstring)."""

    def __init__(self, folder: Path, fingerprint: dict) -> None:
        self.folder = Path(folder)
        #: what must be equal for a journaled result to be taken again (answer key, seed, limits)
        self.fingerprint = json.loads(json.dumps(fingerprint))

    def _file(self, student: str) -> Path:
        return self.folder / f"{safe_name(student)}.json"

    def record(self, res: SubmissionResult, sha256: dict[str, str | None]) -> None:
        """Keep one learner's result (atomically: the file is complete or absent)."""
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        atomic_write(self._file(res.student), json.dumps(
            {"student": res.student, "fingerprint": self.fingerprint, "submission_sha256": sha256,
             "result": res.to_dict()}) + "\n")

    def resumable(self, student: str, sha256: dict[str, str | None]) -> SubmissionResult | None:
        """The journaled result of ``student`` when it was graded on the same bytes with the
        same answer key, seed and limits (and was not a grader error); else None."""
        path = self._file(student)
        try:
            data = json.loads(path.read_text("utf-8"))
            if (data.get("student") != student or data.get("fingerprint") != self.fingerprint
                    or data.get("submission_sha256") != sha256):
                return None
            res = SubmissionResult.from_dict(data["result"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if res.student != student or str(res.status) == "grader error":
            return None
        return res

    def entries(self) -> int:
        return len(list(self.folder.glob("*.json"))) if self.folder.is_dir() else 0

    def clear(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

