#!/usr/bin/env python3
"""`python scripts/run_notebooks.py ARGS` is `python -m course_tools.run_notebooks ARGS`: the tool lives in
course_tools/run_notebooks.py (installed with the course; this command line is kept for habit and old notes)."""

import sys

from course_tools.run_notebooks import main

sys.exit(main())
