"""The grader, in rooms of its own: reading untrusted notebooks (notebooks), the exercises (assignment), confinement
(sandbox), running kernels (runner), what a check cell calls (observe), the static review (scan), the verdict outside
every kernel (verdict), the reports (reports), the run (engine) and the command line (cli).

Entry point: ``python -m graphcourse.grading`` (see graphcourse/grading/cli.py and docs/grading.md).
"""
