"""Lesson helpers: what the lessons' cells call to explain, compare, draw and read recorded figures.

Importing this package needs neither torch nor a GPU; modules that need torch import it inside the
functions that use it.
"""
