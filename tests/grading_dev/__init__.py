"""Authoring and QA tools of the grader (not shipped with it, not run when grading):

* :mod:`grading_dev.generate` - regenerate ``exercises/`` from ``solutions/`` (and the Chinese
  ``zh/exercises/`` from ``zh/solutions/``) with nbgrader (``bash scripts/generate_exercises.sh``,
  which runs ``python -m grading_dev generate``);
* :mod:`grading_dev.zh` - build Chinese notebooks in a temporary folder with ``scripts/i18n.py``
  (for tests that need them before the translations are finished);
* :mod:`grading_dev.testing` - build learner notebooks from a solution (``variant``,
  ``write_notebook``) and read ``solutions/<assignment>/mistakes.py`` (``load_mistakes``);
* :mod:`grading_dev.fairness` - run an instructor's notebook's test cells under many seeds
  (the fairness tests).

Importable from the tests (``tests/`` is on ``sys.path`` there) and from the benchmarks and
the script, which put ``tests/`` on ``sys.path`` themselves.
"""
