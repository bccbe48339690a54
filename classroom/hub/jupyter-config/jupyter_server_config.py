"""The learners' JupyterLab on the class server: the course's own settings overrides (graphcourse/lab_settings).

JupyterLab asks every new user "Would you like to get notified about official Jupyter news?" unless the setting
fetchNews of @jupyterlab/apputils-extension:notification is decided; `news_url: null` (jupyter_server_config.json)
stops the fetching but not that question. The course's overrides decide it (no news, no update checks), for
`make lab` and the class server alike.
"""

import os

c = get_config()  # noqa: F821 (traitlets' config loader provides it)
c.LabApp.app_settings_dir = os.path.normpath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "graphcourse", "lab_settings"))
