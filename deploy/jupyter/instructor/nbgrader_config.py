"""nbgrader settings of an instructor's server on the class hub (deploy/jupyterhub_config.py).

The Formgrader works on the course directory ``~/course`` (``COURSE_DIR``), created by
``deploy/make_course.py``, whose own ``nbgrader_config.py`` holds the course's settings
(the files never released, the gradebook); this file only says where it is and where the
exchange is.
"""

import os

c = get_config()  # noqa: F821 - injected by nbgrader

c.CourseDirectory.course_id = os.environ.get("COURSE_ID", "attention")
c.CourseDirectory.root = os.environ.get("COURSE_DIR", os.path.expanduser("~/course"))
c.Exchange.root = os.environ.get("COURSE_EXCHANGE", "/srv/nbgrader/exchange")
c.Exchange.path_includes_course = False
# The course's own settings (instructor-only files never released, the gradebook), so the
# Formgrader uses them too, whatever folder the server was started in.
if os.path.exists(os.path.join(c.CourseDirectory.root, "nbgrader_config.py")):
    load_subconfig("nbgrader_config.py", path=c.CourseDirectory.root)  # noqa: F821 - traitlets
