"""The course's autograder: nbgrader for authoring, our own engine for grading.

Learner code runs only in a sandbox subprocess; the instructor's test cells run in the
trusted grader process against proxies of the learner's objects (see docs/GRADING.md).

Read :mod:`policy` first (what a learner's sandbox sees and may do). Modules: :mod:`checks`
(toolkit for test cells), :mod:`notebook` (source and submitted notebooks), :mod:`sandbox`
and :mod:`sandbox_main` (the sandbox, grader side and inside), :mod:`protocol` (the bounded
wire format), :mod:`rpc` (proxies), :mod:`runner` (grade one submission), :mod:`results` (what is
recorded; no torch), :mod:`submission` (the one door for a submission's files), :mod:`worker`,
:mod:`feedback`, :mod:`gradebook`, :mod:`cli`;
:mod:`selfcheck` (the learner's ``course-grade check``), :mod:`nbgrader_course` (the course's
nbgrader settings, ``init-course``), :mod:`nbgrader_export` (grades into nbgrader's
``gradebook.db``, ``autograded/`` and ``feedback/``). The authoring and QA tools (exercise
generation, notebook builders, the fairness harness) live in the repository's
``course_tools/grading_dev/``, not here.
"""

from __future__ import annotations

__all__ = ["checks"]
