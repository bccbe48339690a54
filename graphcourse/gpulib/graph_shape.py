"""The shape of a captured graph: its nodes and edges, read from CUDA's DOT dump (lesson 10; part of
:mod:`graphcourse.gpulib.beyond`)."""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass, field
from typing import Any

import torch


# --------------------------------------------------------------------------- the shape of a graph


@dataclass(frozen=True)
class GraphShape:
    """Nodes and edges of a captured graph, read from CUDA's DOT dump (cudaGraphDebugDotPrint)."""

    nodes: int
    edges: int
    kernels: int
    longest_path: int
    widest_level: int
    kinds: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"nodes": self.nodes, "edges": self.edges, "kernels": self.kernels,
                "longest_path": self.longest_path, "widest_level": self.widest_level, "kinds": dict(self.kinds)}


_DOT_EDGE = re.compile(r'^\s*"([^"]+)"\s*->\s*"([^"]+)"')
_DOT_NODE = re.compile(r'^\s*"([^"]+)"\s*\[(.*)$')


def _node_kind(attrs: str) -> str:
    text = attrs.upper()
    for kind in ("KERNEL", "MEMSET", "MEMCPY", "EVENT_RECORD", "WAIT_EVENT", "EMPTY", "HOST", "MEM_ALLOC",
                 "MEM_FREE", "CONDITIONAL", "GRAPH"):
        if kind in text:
            return kind.lower()
    return "other"


def parse_dot(text: str) -> GraphShape:
    """Count the nodes and edges of a DOT graph as ``CUDAGraph.debug_dump`` writes it; depth and width of its DAG.

    A node starts on a line ``"name"[...`` (its label may go on over several lines, as CUDA's verbose dump's
    HTML tables do); an edge is a line ``"a" -> "b"``. ``longest_path`` is the number of nodes on the longest
    dependency chain; ``widest_level`` the most nodes at one depth (the most that could run at once).
    Subgraph clusters and attribute lines are not nodes.
    """
    if not isinstance(text, str) or "digraph" not in text:
        raise ValueError("parse_dot expects the text of a DOT file ('digraph ...'), as CUDAGraph.debug_dump writes.")
    texts: dict[str, list[str]] = {}
    edges: set[tuple[str, str]] = set()
    current: str | None = None
    for line in text.splitlines():
        edge = _DOT_EDGE.match(line)
        if edge:
            edges.add((edge.group(1), edge.group(2)))
            current = None
            continue
        node = _DOT_NODE.match(line)
        if node:
            current = node.group(1)
            texts.setdefault(current, []).append(node.group(2))
        elif current is not None:
            texts[current].append(line)
    kinds = {name: _node_kind(" ".join(lines)) for name, lines in texts.items()}
    for a, b in edges:
        kinds.setdefault(a, "other")
        kinds.setdefault(b, "other")
    preds: dict[str, set[str]] = {n: set() for n in kinds}
    for a, b in edges:
        preds[b].add(a)
    depth: dict[str, int] = {}

    def level(n: str, seen: frozenset = frozenset()) -> int:
        if n in depth:
            return depth[n]
        if n in seen:
            raise ValueError(f"the DOT graph has a cycle through {n!r}: a CUDA graph is a DAG.")
        depth[n] = 1 + max((level(p, seen | {n}) for p in preds[n]), default=0)
        return depth[n]

    for n in kinds:
        level(n)
    per_level: dict[int, int] = {}
    for d in depth.values():
        per_level[d] = per_level.get(d, 0) + 1
    counts: dict[str, int] = {}
    for k in kinds.values():
        counts[k] = counts.get(k, 0) + 1
    return GraphShape(len(kinds), len(edges), counts.get("kernel", 0), max(depth.values(), default=0),
                      max(per_level.values(), default=0), counts)


def graph_shape(graph: Any) -> GraphShape:
    """The shape of a captured ``torch.cuda.CUDAGraph`` made by :func:`debug_graph`, read before instantiation."""
    import warnings

    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="DEBUG: calling")   # torch's TORCH_WARN progress notes
        path = os.path.join(tmp, "graph.dot")
        try:
            graph.debug_dump(path)
        except RuntimeError:
            # newer torch routes debug_dump through the cuda-bindings package; the C++ method
            # (cudaGraphDebugDotPrint) is the one torch 2.11 calls, so try it before giving up
            torch._C._CUDAGraph.debug_dump(graph, path)
        if not os.path.exists(path):
            raise RuntimeError("debug_dump wrote no file: the cudaGraph_t was gone. Make the graph with "
                               "torch.cuda.CUDAGraph(keep_graph=True) and call enable_debug_mode() before capture "
                               "(see debug_graph).")
        with open(path) as f:
            return parse_dot(f.read())
