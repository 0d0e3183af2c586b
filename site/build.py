#!/usr/bin/env python3
"""`python site/build.py ARGS` is `python -m course_tools.site_build ARGS`: the website's build lives
in course_tools/site_build.py (site/ keeps its Sphinx conf.py, templates and static files)."""

import sys

from course_tools.site_build import main

sys.exit(main())
