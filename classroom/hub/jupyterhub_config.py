"""JupyterHub for a CUDA-graphs workshop: one JupyterLab per learner, each as its own Unix user.

Start it (as root, from the repository root) with ``make hub``, or:

    .venv/bin/python -m jupyterhub -f classroom/hub/jupyterhub_config.py

- Sign-in: PAM, i.e. the learner's Unix password (``coursehub.py add-users`` makes the accounts
  and a passwords sheet). Only members of the learners' group may sign in.
- Each learner's server runs AS that learner (LocalProcessSpawner) from the course's virtual
  environment (its Python is the kernel), in their home (mode 700, closed to classmates), and
  opens on their own copy of the course, ~/cuda-graphs-course (see coursehub.singleuser).
- The model answers (solutions/) are closed to learners at start (chmod go-rwx; root and the
  grader still read them). COURSE_HUB_PROTECT=0 leaves their mode alone.
- State (database, cookie secret, logs) lives in COURSE_HUB_ROOT (default classroom/hub/state).

Settings: see classroom/hub/README.md and coursehub.py's docstring (COURSE_HUB_* variables).
"""

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import coursehub  # noqa: E402

c = get_config()  # noqa: F821  (provided by JupyterHub)

state = coursehub.state_dir()
state.mkdir(parents=True, exist_ok=True)
os.chmod(state, 0o700)  # the cookie secret and the passwords sheet are root's alone

if os.geteuid() != 0:
    sys.exit("The class server starts each learner's JupyterLab as that learner's Unix user: "
             "start it as root (sudo make hub).")
try:
    coursehub.check_proxy()
    coursehub.check_learner_access()
except coursehub.HubSetupError as exc:
    sys.exit(f"Cannot start the class server: {exc}")
if os.environ.get("COURSE_HUB_PROTECT", "1") != "0":
    for path in coursehub.protect_private():
        print(f"coursehub: closed {path} to learners (chmod go-rwx)", file=sys.stderr)

# ---- where the class connects ------------------------------------------------------------
c.JupyterHub.ip = os.environ.get("COURSE_HUB_IP", "0.0.0.0")
c.JupyterHub.port = int(os.environ.get("COURSE_HUB_PORT", "8000"))
if os.environ.get("COURSE_HUB_SSL_CERT"):
    c.JupyterHub.ssl_cert = os.environ["COURSE_HUB_SSL_CERT"]
    c.JupyterHub.ssl_key = os.environ["COURSE_HUB_SSL_KEY"]
c.JupyterHub.hub_ip = "127.0.0.1"  # the hub's own API: reached by the proxy and servers only
if os.environ.get("COURSE_HUB_HUB_PORT"):
    c.JupyterHub.hub_port = int(os.environ["COURSE_HUB_HUB_PORT"])
if os.environ.get("COURSE_HUB_PROXY_API_PORT"):
    c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{os.environ['COURSE_HUB_PROXY_API_PORT']}"

# ---- state ---------------------------------------------------------------------------------
c.JupyterHub.db_url = f"sqlite:///{state / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(state / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(state / "jupyterhub.pid")
c.JupyterHub.cleanup_servers = True  # stopping the hub stops every learner's server
c.JupyterHub.cleanup_proxy = True

# ---- the proxy: configurable-http-proxy from npm, installed in classroom/hub/node ------------
c.ConfigurableHTTPProxy.command = [str(coursehub.PROXY)]
c.ConfigurableHTTPProxy.should_start = True
c.ConfigurableHTTPProxy.pid_file = str(state / "jupyterhub-proxy.pid")

# ---- who may sign in -------------------------------------------------------------------------
c.JupyterHub.authenticator_class = "pam"
c.PAMAuthenticator.allowed_groups = {coursehub.learners_group()}
c.PAMAuthenticator.open_sessions = False  # no login session (systemd-logind) for a web sign-in
admins = {a.strip() for a in os.environ.get("COURSE_HUB_ADMINS", "").split(",") if a.strip()}
if admins:
    c.Authenticator.admin_users = admins
    c.Authenticator.allowed_users = admins  # plus the learners' group above

# ---- each learner's JupyterLab ---------------------------------------------------------------
c.JupyterHub.spawner_class = "localprocess"
c.Spawner.cmd = [str(coursehub.venv_python()), str(HERE / "coursehub.py"), "singleuser"]
c.Spawner.notebook_dir = "~"
c.Spawner.default_url = f"/lab/tree/{coursehub.COURSE_DIR}/notebooks/00_setup_check.ipynb"
c.Spawner.env_keep = ["PATH", "LANG", "LC_ALL"]  # not root's PYTHONPATH or JUPYTER_* settings
c.Spawner.start_timeout = 180  # a busy workshop machine starting thirty servers at once
c.Spawner.http_timeout = 180
c.LocalProcessSpawner.shell_cmd = []
# A learner's server stopped by the hub takes its kernels with it (they are its children).
c.LocalProcessSpawner.interrupt_timeout = 10
c.LocalProcessSpawner.term_timeout = 10
c.LocalProcessSpawner.kill_timeout = 10
c.JupyterHub.shutdown_on_logout = False
