#!/usr/bin/env python3
"""`python scripts/train_lesson11_checkpoints.py ARGS` is `python -m course_tools.train_lesson11_checkpoints ARGS`: the tool
lives in course_tools/train_lesson11_checkpoints.py (installed with the course), as for lessons 4 and 12."""

import sys

from course_tools.train_lesson11_checkpoints import main

sys.exit(main())
