"""Real CUDA graphs with torch: whether CUDA is here, capture and replay, the memory a capture takes.

:func:`capture` is toygraph's record-then-replay on a GPU; :class:`EagerStep` runs the same step without a graph
(on a CPU too), so what is built on it can be tested there. Part of :mod:`graphcourse.gpulib.graphs`."""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import Tensor

from ..errors import BatchShapeError, NoCudaError

# --------------------------------------------------------------------------- CUDA presence


def cuda_available() -> bool:
    """True when torch sees a CUDA GPU here."""
    return torch.cuda.is_available()


def require_cuda(what: str = "this step") -> None:
    """Raise NoCudaError, naming `what`, when there is no CUDA GPU."""
    if not cuda_available():
        raise NoCudaError(what)


# --------------------------------------------------------------------------- capture and replay


@dataclass(frozen=True)
class MemoryDelta:
    """GPU memory a capture added to its graph's pool, as the caching allocator accounts that pool.

    ``allocated_bytes``: blocks held by the graph's tensors (each rounded up to 512 bytes);
    ``reserved_bytes``: whole segments the pool took from the driver (a request of at most 1 MiB is
    served from a 2 MiB segment, one of up to 10 MiB from a 20 MiB segment, larger ones are rounded
    up to a multiple of 2 MiB); ``requested_bytes``: what the tensors asked for, before rounding.
    """

    allocated_bytes: int
    reserved_bytes: int
    requested_bytes: int = 0


@dataclass(frozen=True)
class PoolMemory:
    """One memory pool's own statistics, summed over its segments in ``torch.cuda.memory_snapshot()``."""

    reserved_bytes: int
    allocated_bytes: int
    requested_bytes: int
    segments: int

    def minus(self, earlier: "PoolMemory") -> MemoryDelta:
        """What was added to this pool since `earlier`."""
        return MemoryDelta(self.allocated_bytes - earlier.allocated_bytes, self.reserved_bytes - earlier.reserved_bytes,
                           self.requested_bytes - earlier.requested_bytes)


EMPTY_POOL = PoolMemory(0, 0, 0, 0)


def pool_memory(pool_id: Any) -> PoolMemory:
    """Statistics of one graph pool (``g.pool()`` or ``torch.cuda.graph_pool_handle()``) from the allocator's snapshot.

    Every segment of the caching allocator's snapshot names the pool that owns it
    (``segment_pool_id``); summing the segments of one pool gives that pool's reserved,
    allocated and requested bytes, untouched by whatever other pools or tensors are doing.
    """
    require_cuda("reading a graph pool's memory")
    torch.cuda.synchronize()
    want = tuple(pool_id)
    reserved = allocated = requested = segments = 0
    for seg in torch.cuda.memory_snapshot():
        if tuple(seg.get("segment_pool_id", ())) != want:
            continue
        segments += 1
        reserved += seg["total_size"]
        allocated += seg["allocated_size"]
        requested += sum(b.get("requested_size", b["size"]) for b in seg.get("blocks", ())
                         if b.get("state") == "active_allocated")
    return PoolMemory(reserved, allocated, requested, segments)


def _memory_now() -> tuple[int, int]:
    torch.cuda.synchronize()
    gc.collect()
    torch.cuda.empty_cache()  # torch.cuda.graph does this on entry too; without it the delta hides cached blocks
    return torch.cuda.memory_allocated(), torch.cuda.memory_reserved()


def _as_tuple(x: Any) -> tuple:
    return x if isinstance(x, tuple) else (x,)


@dataclass
class CapturedGraph:
    """A callable captured once: static input tensors, the graph, and the static output it writes on replay."""

    graph: Any  # torch.cuda.CUDAGraph
    static_inputs: tuple[Tensor, ...]
    static_output: Any
    memory: MemoryDelta
    capture_s: float

    def replay(self, *inputs: Tensor) -> Any:
        """Copy `inputs` (if given) into the static inputs, replay the graph and return the static output."""
        if inputs:
            if len(inputs) != len(self.static_inputs):
                raise BatchShapeError(
                    f"captured with {len(self.static_inputs)} input(s), replayed with {len(inputs)}: "
                    f"a graph reads exactly the tensors it was captured with."
                )
            for static, new in zip(self.static_inputs, inputs):
                _check_same_shape(static, new)
                static.copy_(new)
        self.graph.replay()
        return self.static_output

    __call__ = replay


def _check_same_shape(static: Tensor, new: Tensor) -> None:
    if static.shape != new.shape:
        raise BatchShapeError(
            f"captured with an input of shape {tuple(static.shape)}, replayed with {tuple(new.shape)}: "
            f"a graph's shapes and addresses are baked in at capture. Capture one graph per bucket "
            f"(1, 2, 4, 8, ...) and pad each batch to the smallest bucket that fits (BucketedRunner does this)."
        )


_CAPTURE_STREAMS: dict[int, Any] = {}


def capture_stream() -> Any:
    """The one side stream on which every capture of this process warms up and is captured, per device.

    One stream for all captures, as vLLM's ``graph_capture()`` and torch's own default capture
    stream do: the caching allocator reuses a freed block only for allocations on the stream it
    was freed on, so graphs sharing a pool reuse each other's freed memory only if they were
    captured on the same stream.
    """
    require_cuda("a CUDA capture stream")
    device = torch.cuda.current_device()
    if device not in _CAPTURE_STREAMS:
        _CAPTURE_STREAMS[device] = torch.cuda.Stream()
    return _CAPTURE_STREAMS[device]


def capture(
    fn: Callable[..., Any],
    *example_inputs: Tensor,
    warmup_iters: int = 3,
    pool: Any = None,
) -> CapturedGraph:
    """Warm `fn` up on a side stream, capture it on that same stream with torch.cuda.graph, return the replayable graph.

    The example inputs are cloned into static inputs that the graph reads on every replay; copy new
    data into them (``replay(*new_inputs)`` does) rather than passing new tensors. Give the same
    `pool` (from ``torch.cuda.graph_pool_handle()``) to several captures to let them share memory.
    Graphs sharing a pool must never run at the same time; graphs that do not consume each
    other's outputs may replay in any order, each output read or cloned before another graph of
    the pool replays; graphs that do consume them must replay in capture order (lesson 03).
    """
    require_cuda("capturing a CUDA graph")
    static_inputs = tuple(x.clone() for x in example_inputs)
    # Warm-up: lazy initialisation (cuBLAS handles and their workspaces, which PyTorch keys by stream,
    # algorithm choice) must not happen during capture. Warm up on the stream the capture will use,
    # the same for every capture, so graphs sharing a pool can reuse each other's freed blocks.
    side = capture_stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup_iters):
            fn(*static_inputs)
    before = pool_memory(pool) if pool is not None else EMPTY_POOL
    graph = torch.cuda.CUDAGraph()
    start_s = time.perf_counter()
    with torch.cuda.graph(graph, pool=pool, stream=side):  # capture on the warmed-up, non-default stream
        static_output = fn(*static_inputs)
    torch.cuda.synchronize()
    capture_s = time.perf_counter() - start_s
    memory = pool_memory(graph.pool()).minus(before)
    return CapturedGraph(graph, static_inputs, static_output, memory, capture_s)


@dataclass
class EagerStep:
    """The interface of CapturedGraph with no graph: replay() calls fn eagerly on the static inputs (CPU tests, toy twins)."""

    fn: Callable[..., Any]
    static_inputs: tuple[Tensor, ...]
    static_output: Any = None
    memory: MemoryDelta = field(default_factory=lambda: MemoryDelta(0, 0))
    capture_s: float = 0.0

    @classmethod
    def build(cls, fn: Callable[..., Any], *example_inputs: Tensor, **_: Any) -> "EagerStep":
        """Make an EagerStep with static copies of the example inputs (same signature as capture)."""
        step = cls(fn, tuple(x.clone() for x in example_inputs))
        step.static_output = fn(*step.static_inputs)
        return step

    def replay(self, *inputs: Tensor) -> Any:
        """Copy `inputs` (if given) into the static inputs, run fn eagerly and return its output."""
        for static, new in zip(self.static_inputs, inputs):
            _check_same_shape(static, new)
            static.copy_(new)
        self.static_output = self.fn(*self.static_inputs)
        return self.static_output

    __call__ = replay
