"""toygraph: a pure-Python model of a CUDA graph, standard library only.

It makes a CUDA graph's rules visible: baked addresses, a fixed topology, buckets and
padding, syncs that are illegal during capture, and a simulated CPU/GPU timeline.
Read it in this order: errors, timeline, memory, freeze, capture, buckets.
Beyond the lessons: conditional (IF/WHILE/SWITCH nodes), multistep (K decode steps in one
graph), streams (a DAG captured from two streams), rng (a generator graphs can replay).
"""

from .buckets import (BucketedGraphs, EagerFallbackWarning, PaddingReport, bucket_for, check_buckets,
                      every_n, pad_to, padding_report, powers_of_two, waste_fraction)
from .capture import Node, ToyGraph, graph, launch
from .errors import (CaptureError, GraphStateError, InvalidArgumentError, OutOfMemoryError,
                     ShapeMismatchError, ToyGraphError)
from .freeze import Frozen, freeze
from .memory import BLOCK_BYTES, WORD_BYTES, Buffer, MemoryPool, ToyDevice, default_device
from .timeline import (DEFAULT_COSTS, H200_COSTS, Clock, CostModel, Event, Timeline, describe_prices,
                       predicted_speedup, simulate, step_time_us)

__all__ = [
    "BucketedGraphs", "EagerFallbackWarning", "PaddingReport", "bucket_for", "check_buckets", "every_n",
    "pad_to", "padding_report", "powers_of_two", "waste_fraction", "Node", "ToyGraph", "graph", "launch",
    "CaptureError", "GraphStateError", "InvalidArgumentError", "OutOfMemoryError", "ShapeMismatchError",
    "ToyGraphError", "Frozen", "freeze", "BLOCK_BYTES", "WORD_BYTES", "Buffer", "MemoryPool", "ToyDevice", "default_device", "DEFAULT_COSTS", "H200_COSTS", "describe_prices",
    "Clock", "CostModel", "Event", "Timeline", "predicted_speedup", "simulate", "step_time_us",
]
