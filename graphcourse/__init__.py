"""graphcourse: the machinery around toygraph: real torch.cuda.graph helpers, plots, widgets, benchmarks, exercises, grading.

Importing it needs neither torch nor a GPU; `graphcourse.gpulib.graphs` and `graphcourse.gpulib.bench` import torch when used.
"""

__all__ = ["plots"]
