"""nbgrader settings of a learner's server on the class hub (deploy/jupyterhub_config.py).

Learners only fetch, validate and submit through nbgrader's exchange; they have no course
directory and no gradebook.
"""

import os

c = get_config()  # noqa: F821 - injected by nbgrader

c.CourseDirectory.course_id = os.environ.get("COURSE_ID", "attention")
c.Exchange.root = os.environ.get("COURSE_EXCHANGE", "/srv/nbgrader/exchange")
c.Exchange.path_includes_course = False
