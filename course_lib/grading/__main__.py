"""``python -m course_lib.grading``: the old name of ``python -m course_grader`` (kept for old scripts)."""

from course_grader.cli import main

raise SystemExit(main())
