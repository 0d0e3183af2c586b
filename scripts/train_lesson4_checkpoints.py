#!/usr/bin/env python3
"""`python scripts/train_lesson4_checkpoints.py ARGS` is `python -m course_tools.train_lesson4_checkpoints ARGS`: the tool lives in
course_tools/train_lesson4_checkpoints.py (installed with the course; this command line is kept for habit and old notes)."""

import sys

from course_tools.train_lesson4_checkpoints import main

sys.exit(main())
