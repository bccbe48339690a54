"""graphcourse: the machinery around toygraph, one room per concern.

- ``graphcourse.lessons``: what the lessons' cells call (comparisons, plots, widgets, recorded figures).
- ``graphcourse.gpulib``: real CUDA graphs with torch, the tiny GPT, decode loops, the GPU benchmarks.
- ``graphcourse.authoring``: exercises, self-check, navigation, slides, instructor kit, site, JupyterLite.
- ``graphcourse.grading``: the grader (``python -m graphcourse.grading``) and collecting a class's work.
- ``graphcourse.errors``: the one exception hierarchy every room shares.

Importing it needs neither torch nor a GPU; ``graphcourse.gpulib``'s modules import torch when used.
"""
