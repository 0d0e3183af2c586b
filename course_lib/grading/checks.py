"""Old path of :mod:`course_grader.checks` (the checks toolkit moved to the grader in issue 19).

Assignments written before the move (``from course_lib.grading.checks import ...``) keep
working: this is the same module object. New assignments import ``course_grader.checks``.
"""

import sys

from course_grader import checks as _moved

sys.modules[__name__] = _moved
