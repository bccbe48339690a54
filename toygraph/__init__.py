"""toygraph: a pure-Python model of a CUDA graph, standard library only.

It makes a CUDA graph's rules visible: baked addresses, a fixed topology, buckets and
padding, syncs that are illegal during capture, a simulated CPU/GPU timeline, and what a
replay reads once a buffer it captured from outside its pool is freed (liveness:
``device.free``, ``graph(g, check_input_liveness=True)``).
Read it in this order: errors, timeline, memory, freeze, capture, buckets, liveness.
Beyond the lessons: conditional (IF/WHILE/SWITCH nodes), multistep (K decode steps in one
graph), streams (a DAG captured from two streams), rng (a generator graphs can replay),
update (a captured graph updated in place from a new capture, as cudaGraphExecUpdate does),
dispatch (which graph a serving engine runs for a batch: vLLM's modes and their downgrade),
ranks (several ranks on one communicator: mismatched captures and replays as named hangs).
The timeline's ``CostModel.node_gap_us`` spaces a replay's kernels as a real GPU does (lesson 13).
"""

from .buckets import (BucketedGraphs, EagerFallbackWarning, PaddingReport, bucket_for, check_buckets,
                      every_n, pad_to, padding_report, powers_of_two, waste_fraction)
from .capture import Node, ToyGraph, graph, launch
from .errors import (CaptureError, GraphStateError, GraphUpdateError, IllegalMemoryAccessError, InputLivenessError,
                     InvalidArgumentError, OutOfMemoryError, ShapeMismatchError, ToyGraphError)
from .freeze import Frozen, freeze
from .liveness import DeadTensor, check_input_liveness, dead_tensors, external_buffers
from .memory import BLOCK_BYTES, WORD_BYTES, Buffer, MemoryPool, ToyDevice, default_device
from .timeline import (DEFAULT_COSTS, H200_COSTS, Clock, CostModel, Event, Timeline, describe_prices,
                       predicted_speedup, simulate, step_time_us)
from .update import UpdateResult, update

__all__ = [
    "BucketedGraphs", "EagerFallbackWarning", "PaddingReport", "bucket_for", "check_buckets", "every_n",
    "pad_to", "padding_report", "powers_of_two", "waste_fraction", "Node", "ToyGraph", "graph", "launch",
    "CaptureError", "GraphStateError", "GraphUpdateError", "UpdateResult", "update", "InvalidArgumentError", "OutOfMemoryError", "ShapeMismatchError",
    "ToyGraphError", "IllegalMemoryAccessError", "InputLivenessError", "DeadTensor", "check_input_liveness",
    "dead_tensors", "external_buffers", "Frozen", "freeze", "BLOCK_BYTES", "WORD_BYTES", "Buffer", "MemoryPool", "ToyDevice", "default_device", "DEFAULT_COSTS", "H200_COSTS", "describe_prices",
    "Clock", "CostModel", "Event", "Timeline", "predicted_speedup", "simulate", "step_time_us",
]
