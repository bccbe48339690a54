"""The one small exception hierarchy of toygraph: every error says what happened, why it breaks a graph, and the fix."""

from __future__ import annotations


class ToyGraphError(Exception):
    """Base of every error toygraph raises on purpose; catch this to catch them all."""


class InvalidArgumentError(ToyGraphError, ValueError):
    """An argument has the wrong type or value (not callable, not a list of numbers, size <= 0, ...)."""


class GraphStateError(ToyGraphError, RuntimeError):
    """The graph is in the wrong state for the call: replay before any record, record into a sealed graph, ..."""


class ShapeMismatchError(ToyGraphError, ValueError):
    """Replayed with a batch size other than the captured one: the graph's addresses and shapes are baked in."""

    def __init__(self, captured: int, given: int, what: str = "batch") -> None:
        self.captured = captured
        self.given = given
        super().__init__(
            f"captured for {what} size {captured}, replayed with {what} size {given}: "
            f"a graph's shapes and addresses are baked in at capture. Capture one graph per "
            f"bucket (1, 2, 4, 8, ...) and pad each batch up to the smallest bucket that fits "
            f"(toygraph.BucketedGraphs does this)."
        )


class CaptureError(ToyGraphError, RuntimeError):
    """An operation that is not permitted while a stream is capturing (a sync, an allocation outside the pool, ...)."""


class OutOfMemoryError(ToyGraphError, MemoryError):
    """The toy device has no room left; a graph adds memory, it never frees what the eager run needs."""


class InputLivenessError(ToyGraphError, RuntimeError):
    """A graph captured with ``check_input_liveness=True`` would read or write a buffer freed after capture.

    The toy twin of the ``RuntimeError`` that PyTorch 2.13 raises from ``CUDAGraph.replay()`` when
    ``torch.cuda.graph(g, check_input_liveness=True)`` tracked an external input that was deallocated
    ("CUDA graph replay detected N dead tensor(s)."). ``dead`` lists what was found
    (:class:`toygraph.liveness.DeadTensor`).
    """

    def __init__(self, message: str, dead: list) -> None:
        self.dead = dead
        super().__init__(message)


class IllegalMemoryAccessError(ToyGraphError, RuntimeError):
    """The toy's stand-in for "CUDA error: an illegal memory access was encountered": a kernel touched memory no one owns.

    On a GPU this needs the freed block to have gone back to the driver (``torch.cuda.empty_cache()``); a
    block still in the caching allocator is read silently. Real hardware reports it later, at the next sync,
    without naming the kernel, and the CUDA context is unusable afterwards; the toy raises at once, names
    the node and carries on.
    """


class GraphUpdateError(ToyGraphError, RuntimeError):
    """``cudaGraphExecUpdate`` refused to update an instantiated graph in place (``cudaErrorGraphExecUpdateFailure``).

    ``result`` is the name of CUDA's ``cudaGraphExecUpdateResult`` code (``"cudaGraphExecUpdateErrorTopologyChanged"``,
    ...), ``error_node`` names the first node that differs (``"nodes[2] 'add'"``; None when there is none to name),
    ``error_from_node`` the mismatched dependency where there is one. The graph updated is left as it was
    (:mod:`toygraph.update`).
    """

    def __init__(self, message: str, result: str, error_node: str | None = None,
                 error_from_node: str | None = None) -> None:
        self.result = result
        self.error_node = error_node
        self.error_from_node = error_from_node
        super().__init__(message)
