"""``python -m course_lib.grading grade ASSIGNMENT SUBMISSIONS_DIR`` (same as ``course-grade``)."""

from course_lib.grading.cli import main

raise SystemExit(main())
