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

try:
    from course_grader.nbgrader_course import configure
except ImportError as exc:  # an nbgrader outside the course environment
    raise SystemExit(f"nbgrader_config.py: {exc}. Run nbgrader from the course environment, where the course's "
                     "packages are installed: `.venv/bin/python -m nbgrader ...` or `bash scripts/generate_exercises.sh` "
                     "(`bash scripts/setup.sh` makes .venv)") from exc

c = get_config()  # noqa: F821 - injected by nbgrader

_ROOT = os.path.dirname(os.path.abspath(__file__))

configure(c)
c.CourseDirectory.root = _ROOT
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"
# generate_assignment: no gradebook is needed to produce the learner versions.
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(os.environ.get("TMPDIR", "/tmp"), "course-nbgrader-gradebook.db")
