"""The course's own tools (not what learners import): how lesson notebooks are named and
ordered (``course_tools.lessons``, the one lesson glob of the repository), the test tiers
(``course_tools.tiers``), their measured figures (``course_tools.figures``), and the assignment
authoring and fairness helpers (``course_tools.grading_dev``: exercise generation, learner
variants, mistakes, fairness over seeds). Installed with the course (pyproject.toml).
``lessons`` and this package's ``__init__`` are standard library only, so that the class hub's
installer can run ``python3 -m course_tools.lessons list notebooks`` with the system Python."""
