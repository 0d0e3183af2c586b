#!/usr/bin/env python3
"""`python site/learner_branch.py ARGS` is `python -m course_tools.learner_branch ARGS`: the tool
lives in course_tools/learner_branch.py."""

import sys

from course_tools.learner_branch import main

sys.exit(main())
