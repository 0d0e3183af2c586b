"""nbgrader configuration of the course (used for AUTHORING and generating exercises).

nbgrader turns the instructor notebooks in ``solutions/<assignment>/`` into the learner
versions in ``exercises/<assignment>/`` (``scripts/generate_exercises.sh``). Grading is
done by ``course-grade`` (course_lib.grading), not by ``nbgrader autograde``: see
docs/GRADING.md for why.
"""

import os

c = get_config()  # noqa: F821 - injected by nbgrader

_ROOT = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.root = _ROOT
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"
# generate_assignment: no gradebook is needed to produce the learner versions.
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(os.environ.get("TMPDIR", "/tmp"), "course-nbgrader-gradebook.db")
# Clear outputs and execution counts so the released notebooks diff cleanly.
c.ClearOutput.enabled = True
# Files of solutions/<assignment>/ that must not be released to learners.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "mistakes.py", "*.md"]
