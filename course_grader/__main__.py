"""``python -m course_grader grade ASSIGNMENT SUBMISSIONS_DIR`` (same as ``course-grade``)."""

from course_grader.cli import main

raise SystemExit(main())
