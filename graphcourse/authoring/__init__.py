"""Authoring: what turns the sources (lessons, solutions, recorded data) into what learners and
instructors use: exercises (build_exercises), self-check data (selfcheck), a learner's own copy of the
exercises (mycopy), navigation (nav), slides (slides), the instructor kit (instructor), the site (site),
JupyterLite (lite), the toy's prices from the recorded benchmark (toy_prices), and executing lessons so
they are stored with outputs (execute). Each is a command: ``python -m graphcourse.authoring.<module>``.
"""
