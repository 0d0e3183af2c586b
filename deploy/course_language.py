"""``python3 -m deploy.course_language ...`` (deploy/install.sh, with the system's Python from the
checkout) is ``python3 -m course_tools.course_language ...``: the class language's rules live in
course_tools/course_language.py (standard library only)."""

import sys

from course_tools.course_language import main

if __name__ == "__main__":
    sys.exit(main())
