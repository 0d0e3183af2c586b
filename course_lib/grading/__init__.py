"""The checks toolkit that assignment test cells import (:mod:`course_lib.grading.checks`).

The grading engine itself (sandbox, proxies, runner, gradebooks, ``course-grade``) is the
top-level package :mod:`course_grader`, outside the library learners read. The old engine
paths ``course_lib.grading.cli``, ``course_lib.grading.nbgrader_course`` and
``python -m course_lib.grading`` still work and lead there (for nbgrader configurations and
scripts written before the move).
"""

from __future__ import annotations

__all__ = ["checks"]
