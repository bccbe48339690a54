"""Authoring: what turns the sources (lessons, solutions, recorded data) into what learners and
instructors use: exercises, self-check data, navigation, slides, instructor kit, site, JupyterLite.
"""
