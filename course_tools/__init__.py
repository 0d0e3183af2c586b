"""The course's own tools (not what learners import): how lesson notebooks are named and
ordered (``course_tools.lessons``, the one lesson glob of the repository), the test tiers
(``course_tools.tiers``). Installed with the course (pyproject.toml); standard library only, so
that the class hub's installer can run it with the system Python from a checkout
(``python3 -m course_tools.lessons list notebooks``)."""
