"""GPU side of lesson 10, in one place to import from: two streams in one graph, random numbers in a graph, capture
modes, a graphed training step (one module per topic: :mod:`.graph_shape`, :mod:`.fork_join`, :mod:`.graph_rng`,
:mod:`.capture_modes`, :mod:`.graphed_training`; the child snippets' result line is :mod:`graphcourse.core.child`'s).

Every function that needs a GPU says so with :class:`graphcourse.errors.NoCudaError`; the pure parts
(:func:`parse_dot`, the child snippets, the training model and its eager loop) run on a CPU too, so they
are tested there. Sources, checked against PyTorch 2.11-era code:

- ``torch/cuda/graphs.py``: ``graph.__init__`` (``default_capture_stream`` made once per process, on the
  device current at the first capture without ``stream=``), ``CUDAGraph.capture_begin``
  (``capture_error_mode``), ``CUDAGraph.enable_debug_mode`` / ``debug_dump`` (DOT file of the graph),
  ``CUDAGraph.register_generator_state``, ``make_graphed_callables`` (refuses autocast with its cache on).
- ``aten/src/ATen/cuda/CUDAGeneratorImpl.cpp``: ``CUDAGeneratorState::register_graph`` /
  ``capture_prologue`` / ``replay_prologue`` / ``increase`` (seed and offset in device memory, the
  whole-graph increment added to the host offset at every replay; "Attempt to increase offset for a CUDA
  generator not in capture mode." for a generator the graph does not know).
- ``docs/source/notes/cuda.md`` ("CUDA Graphs": whole-network capture, partial-network capture, usage with
  multiple streams, usage with torch.cuda.amp); ``torch/optim/adamw.py`` (``capturable``).
- CUDA runtime API, ``cudaStreamBeginCapture`` / ``cudaThreadExchangeStreamCaptureMode`` (what each
  ``cudaStreamCaptureMode`` prohibits), and the programming guide's "Cross-stream Dependencies and Events".
"""

from __future__ import annotations

from ..core.child import RESULT, result_line  # noqa: F401
from .graph_shape import (  # noqa: F401
    graph_shape,
    GraphShape,
    parse_dot,
)
from .fork_join import (  # noqa: F401
    debug_graph,
    fork_join,
    unforked_join_snippet,
    unjoined_fork_snippet,
)
from .graph_rng import (  # noqa: F401
    dropout_replays,
    generator_facts,
    generator_snippet,
    replay_matches_eager_sequence,
)
from .capture_modes import (  # noqa: F401
    capture_mode_matrix,
    capture_mode_snippet,
    CAPTURE_MODES,
)
from .graphed_training import (  # noqa: F401
    autocast_cache_refusal,
    count_kernels_per_step,
    make_batches,
    make_model,
    make_optimizer,
    noncapturable_refusal,
    NONCAPTURABLE_SNIPPET,
    partial_step,
    time_training,
    train_eager,
    train_partial,
    TrainConfig,
    WholeStepGraph,
)

__all__ = [
    "CAPTURE_MODES",
    "GraphShape",
    "TrainConfig",
    "WholeStepGraph",
    "capture_mode_matrix",
    "capture_mode_snippet",
    "dropout_replays",
    "fork_join",
    "generator_facts",
    "graph_shape",
    "make_batches",
    "noncapturable_refusal",
    "make_model",
    "make_optimizer",
    "parse_dot",
    "partial_step",
    "replay_matches_eager_sequence",
    "result_line",
    "train_eager",
    "unforked_join_snippet",
    "unjoined_fork_snippet",
    "debug_graph",
    "RESULT",
    "NONCAPTURABLE_SNIPPET",
    "autocast_cache_refusal",
    "count_kernels_per_step",
    "generator_snippet",
    "time_training",
    "train_partial",
]
