"""Authoring and QA tools of the grader (not shipped with it, not run when grading):

* :mod:`course_tools.grading_dev.generate` - regenerate ``exercises/`` from ``solutions/`` (and the Chinese
  ``zh/exercises/`` from ``zh/solutions/``) with nbgrader (``bash scripts/generate_exercises.sh``,
  which runs ``python -m course_tools.grading_dev generate``);
* :mod:`course_tools.grading_dev.zh` - build Chinese notebooks in a temporary folder with ``scripts/i18n.py``
  (for tests that need them before the translations are finished);
* :mod:`course_tools.grading_dev.testing` - build learner notebooks from a solution (``variant``,
  ``write_notebook``) and read ``solutions/<assignment>/mistakes.py`` (``load_mistakes``);
* :mod:`course_tools.grading_dev.points` - an assignment's points (auto-graded, written, per test, public or
  hidden) and its cells by grade id or by the name they define, read from the instructor's notebook, so that
  grader tests state their expectations without hard-coding one edition of an assignment;
* :mod:`course_tools.grading_dev.fairness` - run an instructor's notebook's test cells under many seeds
  (the fairness tests).

Part of the installed ``course_tools`` package: the tests, the benchmarks and
``scripts/generate_exercises.sh`` import it as any other module.
"""
