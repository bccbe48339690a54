"""The learners' JupyterLab on the class server: the course's own settings overrides (graphcourse/lab_settings).

JupyterLab asks every new user "Would you like to get notified about official Jupyter news?" unless the setting
fetchNews of @jupyterlab/apputils-extension:notification is decided; `news_url: null` (jupyter_server_config.json)
stops the fetching but not that question. The course's overrides decide it (no news, no update checks), for
`make lab` and the class server alike, and shut a lesson's kernel down when its tab is closed; the course's
jupyter_server_config.py beside them, loaded below, shuts down kernels idle for an hour.
"""

import os

c = get_config()  # noqa: F821 (traitlets' config loader provides it)
LAB_SETTINGS = os.path.normpath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "graphcourse", "lab_settings"))
c.LabApp.app_settings_dir = LAB_SETTINGS
# The course's Jupyter Server settings, as `make lab` has them: a kernel idle for an hour is shut down, so the
# lessons a learner has left do not hold the class server's memory (their reasons are in that file).
load_subconfig("jupyter_server_config.py", path=LAB_SETTINGS)  # noqa: F821 (provided by the config loader)
