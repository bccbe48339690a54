"""Two streams in one graph: fork, join, and what CUDA says when either is missing (lesson 10; part of
:mod:`graphcourse.gpulib.beyond`)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from .graphs import require_cuda
from .graph_shape import graph_shape

# --------------------------------------------------------------------------- fork and join


def _branch(x: Tensor, w: Tensor, n: int) -> Tensor:
    for _ in range(n):
        x = torch.tanh(x @ w)
    return x


def debug_graph() -> tuple[Any, bool]:
    """A ``torch.cuda.CUDAGraph`` whose ``cudaGraph_t`` survives capture, so ``debug_dump`` can print it.

    ``CUDAGraph::capture_end`` (``aten/src/ATen/cuda/CUDAGraph.cpp``, 2.11-era) instantiates the graph and,
    unless it was made with ``keep_graph=True``, sets ``has_graph_ = false`` (destroying the ``cudaGraph_t``
    too unless ``enable_debug_mode()`` was called); ``CUDAGraph::debug_dump`` prints only ``if (has_graph_)``,
    so it writes no file, silently, debug mode or not. So: make the graph
    with ``keep_graph=True`` where this torch has the argument (it then instantiates at ``instantiate()`` or
    the first replay), and also ``enable_debug_mode()``. Returns ``(graph, kept)``; ``kept`` is False on a
    torch without ``keep_graph``, where the dump may be missing.
    """
    try:
        graph, kept = torch.cuda.CUDAGraph(keep_graph=True), True
    except TypeError:                                # a torch whose CUDAGraph has no keep_graph argument
        graph, kept = torch.cuda.CUDAGraph(), False
    graph.enable_debug_mode()
    return graph, kept


def fork_join(n_per_branch: int = 4, size: int = 256, two_streams: bool = True, debug: bool = True) -> dict[str, Any]:
    """Capture ``tanh(x)``, then two chains of ``n_per_branch`` (matmul, tanh) pairs, then their sum.

    With ``two_streams`` the second chain runs on a side stream between a fork (``side.wait_stream(main)``)
    and a join (``main.wait_stream(side)``), as docs/source/notes/cuda.md, "Usage with multiple streams";
    otherwise everything is captured on one stream. Returns the graph, its output, whether a replay equals
    the eager result, and (with ``debug``) the graph's shape from its DOT dump.

    The graph reads ``x``, ``w1`` and ``w2`` at the addresses it captured, so they are returned with it
    (``"inputs"``): whoever replays the graph must hold them. Dropping them hands their memory back to the
    caching allocator while the graph still reads it (PyTorch's notes: "you must maintain long-lived
    references to tensors that hold input and output data during capture").
    """
    require_cuda("capturing work on two streams")
    gen = torch.Generator(device="cpu").manual_seed(0)
    x = torch.randn(size, size, generator=gen).cuda()
    w1 = (torch.randn(size, size, generator=gen) / size ** 0.5).cuda()
    w2 = (torch.randn(size, size, generator=gen) / size ** 0.5).cuda()
    capture_stream, side = torch.cuda.Stream(), torch.cuda.Stream()

    def work() -> Tensor:
        main = torch.cuda.current_stream()
        h = torch.tanh(x)                            # before the fork: both branches depend on it
        if not two_streams:
            return _branch(h, w1, n_per_branch) + _branch(h, w2, n_per_branch)
        side.wait_stream(main)                       # fork: the side stream joins the capture
        out_a = _branch(h, w1, n_per_branch)         # branch A on the capturing stream
        with torch.cuda.stream(side):
            out_b = _branch(h, w2, n_per_branch)     # branch B on the side stream
        main.wait_stream(side)                       # join: back into the capturing stream
        return out_a + out_b                         # after the join: depends on both branches

    capture_stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(capture_stream):
        for _ in range(2):                           # warm-up (cuBLAS handles) on the capturing stream
            work()
    torch.cuda.synchronize()
    kept = False
    if debug:
        graph, kept = debug_graph()
    else:
        graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=capture_stream):
        out = work()
    shape = None
    if debug:
        try:                                         # before instantiate: the kept cudaGraph_t is printed
            shape = graph_shape(graph).as_dict()
        except Exception as exc:  # the dump needs cudaGraphDebugDotPrint through torch; say why not
            shape = {"error": f"{type(exc).__name__}: {exc}"}
        shape["keep_graph"] = kept
        if kept:
            graph.instantiate()
    graph.replay()
    torch.cuda.synchronize()
    h = torch.tanh(x)
    expected = _branch(h, w1, n_per_branch) + _branch(h, w2, n_per_branch)
    return {"graph": graph, "output": out, "inputs": (x, w1, w2), "shape": shape,
            "matches_eager": bool(torch.allclose(out, expected, atol=1e-5))}


def unjoined_fork_snippet() -> str:
    """A child process that forks a side stream into a capture and never joins it back."""
    return '''
import json, torch
x = torch.ones(1024, device="cuda")
side = torch.cuda.Stream()
g = torch.cuda.CUDAGraph()
print("capturing a fork with no join")
with torch.cuda.graph(g):
    side.wait_stream(torch.cuda.current_stream())   # fork
    with torch.cuda.stream(side):
        y = x * 2                                  # work on the side stream
    # missing: torch.cuda.current_stream().wait_stream(side)
print("RESULT " + json.dumps({"captured": True}))
'''


def unforked_join_snippet() -> str:
    """A child process that forgets the fork but keeps the join: a launch on a stream outside the capture,
    then the capturing stream waits on that stream (CUDA: cudaErrorStreamCaptureIsolation)."""
    return '''
import json, torch
x = torch.ones(1024, device="cuda")
y = torch.empty_like(x)
side = torch.cuda.Stream()
g = torch.cuda.CUDAGraph()
print("capturing a join to a stream that was never forked")
with torch.cuda.graph(g):
    # missing: side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.mul(x, 2, out=y)                     # not capturing: runs eagerly (no allocation, so
                                                   # no cudaMalloc refusal hides the join's error)
    torch.cuda.current_stream().wait_stream(side)  # join: waits on an event of uncaptured work
print("RESULT " + json.dumps({"captured": True}))
'''
