"""Jupyter Server settings of the course's JupyterLab, for `make lab` and the class server alike.

`make lab` puts this folder on JUPYTER_CONFIG_PATH (bootstrap.py, `lab_env`); the class server's Jupyter config
(classroom/hub/jupyter-config/jupyter_server_config.py) loads this file. Both win over a ~/.jupyter config (Jupyter
reads JUPYTER_CONFIG_PATH first); the command line wins over both:
`make lab LAB_ARGS=--MappingKernelManager.cull_idle_timeout=0` never culls.

Kernels pile up (issue 21, item 13): a lesson's "next →" link opens the next lesson in a new tab and leaves the last
one open, its kernel running, so after lesson 10 eleven kernels held 3.2 GB; on a class server that is thirty times
as much. Two settings free them:

- Closing a lesson's tab shuts its kernel down (JupyterLab's `kernelShutdown` in overrides.json, beside this file).
- A kernel that has run nothing for an hour is shut down, even with its tab still open (below). Jupyter Server counts
  a kernel idle from the last thing it did for the learner (a cell run, a slider moved: its messages on IOPub);
  reading and scrolling send it nothing. An hour is longer than any lesson takes in the workshop plan
  (docs/instructor/workshop-plan.md: the longest, lesson 09, 53 minutes, in which a learner runs a cell every few
  minutes) and than its break, so a learner reading a lesson, or back from the break, finds its kernel alive; a
  kernel untouched for an hour belongs to a lesson they have left. Reopening it, they re-run the lesson from the
  top (Run > Run All Cells). Far shorter timeouts would cull a kernel under a learner thinking over an exercise.
"""

c = get_config()  # noqa: F821 (traitlets' config loader provides it)

# Idle for an hour: shut down (jupyter_server.services.kernels.kernelmanager.MappingKernelManager).
c.MappingKernelManager.cull_idle_timeout = 3600
# Look every 5 minutes (Jupyter Server's default): a kernel goes at most 65 minutes after its last run.
c.MappingKernelManager.cull_interval = 300
# Also kernels whose tab is open: the "next →" link leaves the last lesson's tab open, so without this no kernel
# the lessons leave behind would ever be culled.
c.MappingKernelManager.cull_connected = True
# Never a kernel that is running a cell (a long benchmark, a training step): only idle ones.
c.MappingKernelManager.cull_busy = False
