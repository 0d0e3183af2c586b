"""The one door for a learner's files: read without following links, bounded, validated.

Every file of a submission (the notebook, ``timestamp.txt``, ``submission_secret.txt``), for
grading and for the nbgrader export, is read by :func:`read_submission`. No torch here.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from course_grader.i18n import N_
from course_grader.notebook import load_notebook_bytes

__all__ = ["MAX_NOTEBOOK_BYTES", "SubmissionRefused", "read_submission", "load_submission"]

#: Largest submitted notebook read (bytes); bigger files are refused.
MAX_NOTEBOOK_BYTES = 16 * 2**20


class SubmissionRefused(Exception):
    """The submitted file is not a regular file inside the learner's folder (symlink, FIFO,
    device, too big...); the message says what was wrong."""


def read_submission(path: str | Path, student: str, max_bytes: int = MAX_NOTEBOOK_BYTES) -> bytes:
    """Read a learner's notebook without following symlinks or opening special files.

    Every path component from the learner's folder (the nearest ancestor named ``student``;
    for ``alice.ipynb`` the file itself) down to the file must be a real directory or, last,
    a regular file: a symlink (to the solutions, a classmate's notebook, ``/dev/zero``), a
    FIFO or a device is refused. The file is opened with ``O_NOFOLLOW | O_NONBLOCK`` and
    checked again on the open descriptor, and at most ``max_bytes`` are read.

    Raises:
        SubmissionRefused: with a message for the learner and the teacher.
    """
    p = Path(os.path.abspath(path))
    parts = p.parts
    top = len(parts) - 1
    for i in range(len(parts) - 1, 0, -1):
        if parts[i] == student or (i == len(parts) - 1 and p.stem == student):
            top = i
            break
    for i in range(top, len(parts)):
        comp = Path(*parts[: i + 1])
        try:
            st = os.lstat(comp)
        except OSError as exc:
            raise SubmissionRefused(N_("cannot read {name}: {reason}").format(name=comp.name, reason=exc.strerror)) from None
        last = i == len(parts) - 1
        if stat.S_ISLNK(st.st_mode):
            raise SubmissionRefused(N_("{name} is a symbolic link; submit the notebook file itself").format(name=comp.name))
        if not last and not stat.S_ISDIR(st.st_mode):
            raise SubmissionRefused(N_("{name} is not a folder").format(name=comp.name))
        if last and not stat.S_ISREG(st.st_mode):
            raise SubmissionRefused(N_("{name} is not a regular file (a FIFO, a device or a folder); "
                                       "submit the notebook file itself").format(name=comp.name))
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise SubmissionRefused(N_("cannot open {name}: {reason}").format(name=p.name, reason=exc.strerror)) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SubmissionRefused(N_("{name} is not a regular file; submit the notebook file itself").format(name=p.name))
        if st.st_size > max_bytes:
            raise SubmissionRefused(N_("{name} is {size} MB, more than the {limit} MB accepted; clear the outputs "
                                       "and re-save it").format(name=p.name, size=f"{st.st_size / 2**20:.1f}",
                                                                limit=f"{max_bytes / 2**20:.0f}"))
        chunks, total = [], 0
        while total <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > max_bytes:
            raise SubmissionRefused(f"{p.name} is more than the {max_bytes / 2**20:.0f} MB accepted")
        return b"".join(chunks)
    finally:
        os.close(fd)


def load_submission(path: str | Path, student: str) -> dict:
    """Read a learner's notebook through :func:`read_submission` and parse it (NotebookError for
    broken JSON)."""
    return load_notebook_bytes(read_submission(path, student), Path(path).name)
