"""The course's autograder: nbgrader for authoring, our own engine for grading.

Learner code runs only in a sandbox subprocess; the instructor's test cells run in the
trusted grader process against proxies of the learner's objects (see docs/GRADING.md).

Modules: :mod:`checks` (toolkit for test cells), :mod:`notebook` (source and submitted
notebooks), :mod:`sandbox` (the subprocess and its limits), :mod:`rpc` (proxies),
:mod:`runner` (grade one submission), :mod:`feedback`, :mod:`gradebook`, :mod:`cli`;
:mod:`selfcheck` (the learner's ``--check``), :mod:`fairness` (same grade under every seed),
:mod:`nbgrader_course` (the course's nbgrader settings, ``init-course``),
:mod:`nbgrader_export` (grades into nbgrader's ``gradebook.db`` and ``feedback/``).
"""

from __future__ import annotations

__all__ = ["checks"]
