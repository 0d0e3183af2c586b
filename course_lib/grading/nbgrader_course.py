"""Old path of :mod:`course_grader.nbgrader_course` (the engine moved out of course_lib); the same module object."""

import sys

from course_grader import nbgrader_course as _moved

sys.modules[__name__] = _moved
