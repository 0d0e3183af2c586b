"""Old path of :mod:`course_grader.cli` (the engine moved out of course_lib); the same module object."""

import sys

from course_grader import cli as _moved

sys.modules[__name__] = _moved
