"""Conditional nodes: a decision the GPU takes at every replay, inside the graph (CUDA 12.3+).

A Python ``if`` in a captured step is decided once, at capture (on a host value) or refused
(on a device value: asking for its truth is a sync). Conditional nodes first shipped in CUDA
12.3 (its release notes; NVIDIA/cuda-samples#233); PyTorch's support needs CUDA 12.4 or later
at build time (``CUDA_VERSION >= 12040`` in ``aten/src/ATen/cuda/CUDAGraph.h``), and the driver
must be new enough too. A node holds one or more *body graphs* and a *condition*; the node
runs a body depending on its value at each replay, with no trip to the CPU. Sources: NVIDIA's
post "Dynamic Control Flow in CUDA Graphs with Conditional Nodes" (as updated in February 2025 it
dates IF and WHILE to CUDA 12.4, the version PyTorch needs) and the CUDA runtime API's
``cudaConditionalNodeParams``.

* **IF** (CUDA 12.3; PyTorch from 12.4): the body runs once if the condition is non-zero. With a second
  body, **IF/ELSE** (CUDA 12.8): that one runs when it is zero.
* **WHILE** (CUDA 12.3; PyTorch from 12.4): the body runs again and again as long as the condition is
  non-zero; a kernel in the body must update the condition, or the loop never ends.
* **SWITCH** (CUDA 12.8): body ``n`` runs when the condition equals ``n``; none when it is
  out of range.

In the toy the condition is a one-value device buffer: any kernel that writes it (for
instance ``launch(..., out=cond)``) sets it. Call
:func:`if_node`, :func:`while_node` or :func:`switch_node` inside ``with graph(g):``; each body
is host code run once, at capture, to record its kernels. Conditional nodes exist only in
graphs: outside capture these functions refuse, since deciding on the host would be a sync.

Where the toy simplifies: in CUDA the condition is not memory at all but an opaque
``cudaGraphConditionalHandle``, set only by device code calling ``cudaGraphSetConditional``
(with an optional default value applied at every launch of the graph,
``cudaGraphCondAssignDefault``). PyTorch bridges a bool tensor to it by capturing a one-thread
kernel (``set_conditional_handle_kernel`` in ``aten/src/ATen/cuda/CUDAGraph.cu``) that reads the
tensor and calls ``cudaGraphSetConditional``; the toy skips that bridge and lets the node read
the buffer. The toy also runs the node once when its capture ends, as it runs every kernel
once at capture; a WHILE loop is stopped after ``max_iterations`` with an error instead of
hanging the GPU; and each node's evaluation costs no time on the timeline (only the kernels
its bodies run do).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from .errors import GraphStateError, InvalidArgumentError
from .memory import Buffer

__all__ = ["ConditionalNode", "if_node", "while_node", "switch_node"]


@dataclass
class ConditionalNode:
    """One conditional node: its kind, its condition buffer and its body graphs (lists of nodes)."""

    kind: str  # "if", "if/else", "while" or "switch"
    condition: Buffer
    bodies: list[list] = field(default_factory=list)
    name: str = "conditional"
    max_iterations: int = 10_000
    iterations: list[int] = field(default_factory=list)
    """How many times a body ran at each execution (for a WHILE node: the trip count; else 0 or 1)."""

    @property
    def inputs(self) -> tuple[Buffer, ...]:
        """The condition: the one buffer the node itself reads."""
        return (self.condition,)

    def _value(self) -> object:
        return self.condition._read()[0]  # the GPU reads its own memory: no sync

    def _body(self, index: int, executed: list[float]) -> None:
        for node in self.bodies[index]:
            node.run(executed)

    def run(self, executed: list[float]) -> None:
        """Evaluate the condition on the device and run the body (or bodies) it selects."""
        if self.kind in ("if", "if/else"):
            chosen = 0 if self._value() else (1 if len(self.bodies) == 2 else None)
            if chosen is not None:
                self._body(chosen, executed)
            self.iterations.append(int(chosen == 0))
        elif self.kind == "while":
            trips = 0
            while self._value():
                if trips == self.max_iterations:
                    raise GraphStateError(
                        f"WHILE node {self.name!r} ran its body {trips} times and its condition is still non-zero: "
                        f"a kernel in the body must update the condition (launch(..., out=condition)), or the "
                        f"loop never ends. Raise max_iterations if the loop is meant to be this long."
                    )
                self._body(0, executed)
                trips += 1
            self.iterations.append(trips)
        else:  # switch
            value = self._value()
            index = value if isinstance(value, int) and not isinstance(value, bool) else -1
            if 0 <= index < len(self.bodies):
                self._body(index, executed)
            self.iterations.append(int(0 <= index < len(self.bodies)))

    def __repr__(self) -> str:
        sizes = ", ".join(str(len(b)) for b in self.bodies)
        return f"ConditionalNode({self.kind} {self.name!r}, bodies of [{sizes}] nodes)"


def _check(condition: object, bodies: Sequence[object], what: str):
    if not isinstance(condition, Buffer):
        raise InvalidArgumentError(
            f"{what} takes its condition as a one-value device buffer that a kernel writes (e.g. "
            f"launch(lambda t: [t[0] != eos], token, out=cond)), got {type(condition).__name__}."
        )
    if len(condition) != 1:
        raise InvalidArgumentError(f"{what}'s condition must hold one value, this buffer holds {len(condition)}.")
    if not bodies or not all(callable(b) for b in bodies):
        raise InvalidArgumentError(f"{what} takes its body as a function of no arguments that launches kernels.")
    graph = condition.device.capturing
    if graph is None:
        raise GraphStateError(
            f"{what} exists only inside a captured graph: call it inside `with graph(g):`. Outside a graph, "
            f"deciding on the value would mean reading it on the host, a sync (lesson 01, Rule 4)."
        )
    return graph


def _record(kind: str, condition: Buffer, bodies: Sequence[Callable[[], object]], name: str,
            max_iterations: int = 10_000) -> ConditionalNode:
    graph = _check(condition, bodies, f"{kind.upper()} node")
    recorded = []
    for body in bodies:
        sink, previous = [], graph._sink
        graph._sink, graph._body_depth = sink, graph._body_depth + 1
        try:
            body()
        finally:
            graph._sink, graph._body_depth = previous, graph._body_depth - 1
        recorded.append(sink)
    node = ConditionalNode(kind, condition, recorded, name, max_iterations)
    graph._sink.append(node)
    if not graph._body_depth:  # the toy runs what it captures once, as it does each kernel
        node.run([])
    return node


def if_node(condition: Buffer, then: Callable[[], object], otherwise: Callable[[], object] | None = None, *,
            name: str = "if") -> ConditionalNode:
    """Record an IF node (CUDA 12.3), or IF/ELSE with `otherwise` (CUDA 12.8): `then` runs when condition != 0."""
    if otherwise is None:
        return _record("if", condition, [then], name)
    return _record("if/else", condition, [then, otherwise], name)


def while_node(condition: Buffer, body: Callable[[], object], *, name: str = "while",
               max_iterations: int = 10_000) -> ConditionalNode:
    """Record a WHILE node (CUDA 12.3): `body` runs while condition != 0; a kernel in it must update the condition."""
    if isinstance(max_iterations, bool) or not isinstance(max_iterations, int) or max_iterations < 1:
        raise InvalidArgumentError(f"max_iterations must be a whole number >= 1, got {max_iterations!r}.")
    return _record("while", condition, [body], name, max_iterations)


def switch_node(index: Buffer, bodies: Sequence[Callable[[], object]], *, name: str = "switch") -> ConditionalNode:
    """Record a SWITCH node (CUDA 12.8): body n runs when the index buffer holds n; none when out of range."""
    if isinstance(bodies, (str, bytes)) or not isinstance(bodies, Sequence):
        raise InvalidArgumentError(f"switch_node takes a list of body functions, got {bodies!r}.")
    return _record("switch", index, list(bodies), name)
