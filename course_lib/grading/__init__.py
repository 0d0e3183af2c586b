"""Old home of the checks toolkit, now :mod:`course_grader.checks` (issue 19).

Only ``course_lib.grading.checks`` remains, as the same module object as
``course_grader.checks``, for assignments written before the move; the grading engine is the
top-level package :mod:`course_grader`.
"""

from __future__ import annotations

__all__: list[str] = []
