#!/usr/bin/env python3
"""`python scripts/build_fra_eng_sample.py ARGS` is `python -m course_tools.build_fra_eng_sample ARGS`: the tool lives in
course_tools/build_fra_eng_sample.py (installed with the course; this command line is kept for habit and old notes)."""

import sys

from course_tools.build_fra_eng_sample import main

sys.exit(main())
