#!/usr/bin/env python3
"""`python scripts/build_glossary.py ARGS` is `python -m course_tools.build_glossary ARGS`: the tool lives in
course_tools/build_glossary.py (installed with the course; this command line is kept for habit and old notes)."""

import sys

from course_tools.build_glossary import main

sys.exit(main())
