"""nbgrader configuration of the course repository (authoring: generating ``exercises/``).

nbgrader turns the instructor notebooks in ``solutions/<assignment>/`` into the learner
versions in ``exercises/<assignment>/`` (``scripts/generate_exercises.sh``). Grading is
done by ``course-grade`` (the course_grader package), not by ``nbgrader autograde``: see
docs/GRADING.md for why. The course's rules (instructor-only files such as ``mistakes.py``
never released, stderr never fails a cell in Validate or autograde, nbgrader usable
without activating the virtual environment) live in ``course_grader.nbgrader_course``
and are shared with the nbgrader course folders that ``course-grade init-course`` creates.
"""

import os
import sys

c = get_config()  # noqa: F821 - injected by nbgrader

_ROOT = os.path.dirname(os.path.abspath(__file__))
if _ROOT not in sys.path:  # course_lib importable even when nbgrader is not run from the venv
    sys.path.insert(0, _ROOT)

from course_grader.nbgrader_course import configure  # noqa: E402

configure(c)
c.CourseDirectory.root = _ROOT
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"
# generate_assignment: no gradebook is needed to produce the learner versions.
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(os.environ.get("TMPDIR", "/tmp"), "course-nbgrader-gradebook.db")
