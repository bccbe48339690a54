"""The grader, in rooms of its own: reading untrusted notebooks (notebooks), the exercises (assignment), confinement
(sandbox), running kernels (runner), what a check cell calls (observe), the static review (scan), the verdict outside
every kernel (verdict), the reports (reports), the run (engine), the command line (cli) and, on the class server,
collecting the learners' notebooks (collect).

Entry point: ``python -m graphcourse.grading`` (__main__.py runs graphcourse/grading/cli.py; see docs/grading.md).
"""
