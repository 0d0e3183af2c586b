#!/usr/bin/env python3
"""`python scripts/i18n.py ARGS` is `python -m course_tools.i18n ARGS`: the tool lives in
course_tools/i18n.py (installed with the course; this command line is kept for habit and old notes)."""

import sys

from course_tools.i18n import main

sys.exit(main())
