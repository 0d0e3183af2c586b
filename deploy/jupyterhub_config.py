"""JupyterHub configuration: the course for a class on one server.

Start it as root (JupyterHub starts each user's server as that Unix user)::

    sudo /opt/attention-course/venv/bin/jupyterhub -f deploy/jupyterhub_config.py

What it sets up (README "Run a class"):

* Login with the server's own Unix accounts and passwords (PAM, JupyterHub's default
  authenticator). Members of the Unix group ``COURSE_LEARNER_GROUP`` or
  ``COURSE_INSTRUCTOR_GROUP`` may log in; nobody else.
* Each user's JupyterLab runs as that user (``LocalProcessSpawner``) with the course
  environment (``COURSE_PREFIX/venv``) as server and as the ``python3`` kernel.
* On first login a learner finds the lessons in ``~/lessons`` (a copy; their edits are kept).
* nbgrader's exchange in ``COURSE_EXCHANGE``. Learners get the Assignment List and the
  Validate button; instructors also get the Formgrader, on the course directory
  ``~/course`` that ``deploy/make_course.py`` creates. The role is chosen by Unix group
  membership when the server starts, through the configuration folders
  ``deploy/jupyter/learner`` and ``deploy/jupyter/instructor``.

Every setting can be changed with an environment variable (defaults in brackets):
``COURSE_PREFIX`` [/opt/attention-course], ``COURSE_EXCHANGE`` [/srv/nbgrader/exchange],
``COURSE_ID`` [attention], ``COURSE_LEARNER_GROUP`` [course-learners],
``COURSE_INSTRUCTOR_GROUP`` [course-instructors], ``COURSE_HUB_IP`` [127.0.0.1],
``COURSE_HUB_PORT`` [8000] (the public port), ``COURSE_HUB_INTERNAL_PORT`` [8081],
``COURSE_PROXY_API_PORT`` [8001], ``COURSE_HUB_STATE`` [/var/lib/attention-course-hub]
(the hub's database, cookie secret and proxy token), ``COURSE_SPAWN_PORTS``
[a free port chosen by JupyterHub for each server].
"""

from __future__ import annotations

import grp
import os
import pwd
import shutil
from pathlib import Path

c = get_config()  # noqa: F821 - injected by JupyterHub

HERE = Path(__file__).resolve().parent
PREFIX = Path(os.environ.get("COURSE_PREFIX", "/opt/attention-course"))
VENV = PREFIX / "venv"
EXCHANGE = os.environ.get("COURSE_EXCHANGE", "/srv/nbgrader/exchange")
COURSE_ID = os.environ.get("COURSE_ID", "attention")
LEARNERS = os.environ.get("COURSE_LEARNER_GROUP", "course-learners")
INSTRUCTORS = os.environ.get("COURSE_INSTRUCTOR_GROUP", "course-instructors")
IP = os.environ.get("COURSE_HUB_IP", "127.0.0.1")
STATE = Path(os.environ.get("COURSE_HUB_STATE", "/var/lib/attention-course-hub"))

if not (VENV / "bin" / "jupyterhub-singleuser").exists():
    raise SystemExit(f"no course environment in {VENV}: run `sudo bash deploy/install.sh` first "
                     "(or set COURSE_PREFIX to where it was installed)")
STATE.mkdir(parents=True, exist_ok=True, mode=0o700)

# --- network: public proxy port, hub API and proxy API on the same address ---------------
c.JupyterHub.ip = IP
c.JupyterHub.port = int(os.environ.get("COURSE_HUB_PORT", "8000"))
c.JupyterHub.hub_ip = IP
c.JupyterHub.hub_port = int(os.environ.get("COURSE_HUB_INTERNAL_PORT", "8081"))
c.ConfigurableHTTPProxy.api_url = f"http://{IP}:{int(os.environ.get('COURSE_PROXY_API_PORT', '8001'))}"
_chp = shutil.which("configurable-http-proxy")
if _chp is None:
    raise SystemExit("configurable-http-proxy not found on PATH: `npm install -g configurable-http-proxy` "
                     "(scripts/setup_system.sh does it)")
c.ConfigurableHTTPProxy.command = [_chp]
c.ConfigurableHTTPProxy.pid_file = str(STATE / "proxy.pid")
c.JupyterHub.db_url = f"sqlite:///{STATE / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(STATE / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(STATE / "jupyterhub.pid")
# Stop every user's server when the hub stops (one machine, nothing outlives the hub).
c.JupyterHub.cleanup_servers = True
c.JupyterHub.cleanup_proxy = True

# --- who may log in ----------------------------------------------------------------------
c.JupyterHub.authenticator_class = "pam"
c.PAMAuthenticator.allowed_groups = {LEARNERS, INSTRUCTORS}
c.PAMAuthenticator.admin_groups = {INSTRUCTORS}
# PAM's account check (expired accounts, pam_nologin) as well as the password.
c.PAMAuthenticator.check_account = True


def _members(group: str) -> set[str]:
    """Users in a Unix group, as primary or supplementary members."""
    try:
        g = grp.getgrnam(group)
    except KeyError:
        return set()
    primary = {p.pw_name for p in pwd.getpwall() if p.pw_gid == g.gr_gid}
    return set(g.gr_mem) | primary


# --- each user's server ------------------------------------------------------------------
c.JupyterHub.spawner_class = "localprocess"
c.Spawner.cmd = [str(VENV / "bin" / "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"
c.Spawner.notebook_dir = "~"
# A loaded machine (a class logging in at once) starts servers slowly; fail clearly, not never.
c.Spawner.start_timeout = 180
c.Spawner.http_timeout = 180
c.Spawner.environment = {
    "PATH": f"{VENV / 'bin'}:/usr/local/bin:/usr/bin:/bin",
    # Idle OpenMP threads must not spin: many learners share the server's cores.
    "OMP_WAIT_POLICY": "PASSIVE",
    "COURSE_EXCHANGE": EXCHANGE,
    "COURSE_ID": COURSE_ID,
}


def pre_spawn_hook(spawner) -> None:  # noqa: ANN001 - JupyterHub's Spawner
    """Pick the user's role from their Unix groups; give a new learner the lessons."""
    name = spawner.user.name
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        raise RuntimeError(f"no Unix account {name!r} on this server: create it with useradd") from None
    instructor = name in _members(INSTRUCTORS)
    role = "instructor" if instructor else "learner"
    # A new dict: the configured one is shared by every user's spawner.
    env = dict(spawner.environment, JUPYTER_CONFIG_PATH=str(HERE / "jupyter" / role))
    # torch's compiler cache (made by a lesson's first optimizer step) in the user's home, not as
    # /tmp/torchinductor_<user>, which would outlive the account
    env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(pw.pw_dir, ".cache", "torchinductor")
    if instructor:
        env["COURSE_DIR"] = os.path.join(pw.pw_dir, "course")
    spawner.environment = env
    lessons = Path(pw.pw_dir) / "lessons"
    if not lessons.exists():
        shutil.copytree(PREFIX / "lessons", lessons)
        for path in [lessons, *lessons.iterdir()]:
            os.chown(path, pw.pw_uid, pw.pw_gid)
            os.chmod(path, 0o700 if path.is_dir() else 0o600)
    spawner.log.info("starting %s's server as %s (config %s)", name, role, env["JUPYTER_CONFIG_PATH"])


c.Spawner.pre_spawn_hook = pre_spawn_hook
