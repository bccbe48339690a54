"""Conditional nodes: a branch or a loop that the GPU decides at replay, from a value in device memory.

Since CUDA 12.4 a graph can hold an IF node and a WHILE node (CUDA 12.8 adds IF/ELSE and
SWITCH): a subgraph that replay runs once, not at all, or again and again, depending on a
condition the GPU reads from its own memory when the node is reached. So "control flow is
frozen at capture" holds for host code, not for these nodes. The toy's twins::

    with tg.graph(g):
        tg.if_node(flag, lambda: tg.launch(double, x, out=x))     # runs only while flag[0] != 0
        tg.while_node(left, lambda: tg.launch(countdown, left, out=left))

During capture, the body's launches become the node's subgraph instead of nodes of the graph;
at replay the node reads its condition buffer on the device (no sync) and runs the subgraph
zero or one time (IF) or until the condition reads 0 (WHILE); the node's output buffer holds
how many times the body ran. Outside a capture the same calls are plain host control flow: the
CPU reads the condition, which is a sync each time, exactly what the nodes remove.

Simplifications, said plainly: the toy runs a body once while capturing (as it runs every
kernel once, to show values), where CUDA only records it; on the timeline a conditional node
is one GPU bar lasting the kernels its body ran plus ``condition_us`` per evaluation; and a
WHILE that never sets its condition to 0 raises after ``max_iterations`` where a GPU would spin.
"""

from __future__ import annotations

from typing import Callable

from . import capture as _capture
from .errors import CaptureError, InvalidArgumentError, ToyGraphError
from .memory import Buffer

__all__ = ["CONDITION_US", "ConditionalNode", "NeverEndingLoopError", "if_node", "while_node"]

CONDITION_US = 1.0
"""GPU time the toy charges for evaluating a condition (an assumption of the toy: about one tiny kernel)."""


class NeverEndingLoopError(ToyGraphError):
    """A WHILE node's body never set its condition to 0: on a GPU the replay would never finish."""


def _device_values(buf: Buffer) -> list:
    """The buffer's values as a kernel reads them on the device (never a host sync)."""
    reader = getattr(buf, "_read", None)
    return list(reader()) if reader is not None else list(buf)  # older toy buffers are plain lists


def _store(buf: Buffer, values: list) -> None:
    writer = getattr(buf, "_write", None)
    if writer is not None:
        writer(values)
    else:
        list.__setitem__(buf, slice(None), values)


def _check_condition(cond: object, what: str) -> Buffer:
    if not isinstance(cond, Buffer):
        raise InvalidArgumentError(
            f"{what} takes its condition as a one-value device buffer (device.tensor([1])), got "
            f"{type(cond).__name__}: a conditional node reads its condition from device memory at replay. "
            f"A Python bool or number would be read once, at capture, and baked."
        )
    if len(cond) != 1:
        raise InvalidArgumentError(f"{what}'s condition must hold exactly one value, this one holds {len(cond)}.")
    return cond


class ConditionalNode:
    """The runner of an IF or WHILE node: its condition buffer, the body's recorded nodes and what it did."""

    def __init__(self, kind: str, condition: Buffer, body: list, max_iterations: int) -> None:
        self.kind = kind
        self.condition = condition
        self.body = body
        self.max_iterations = max_iterations
        self.node = None  # the graph node this runner stands behind, set after capture
        self.last_iterations = 0

    def _run_body(self) -> float:
        spent = 0.0
        for n in self.body:
            result = _capture._run_kernel(n.fn, n.inputs, n.name)
            _store(n.output, result)
            spent += n.kernel_us
        return spent

    def __call__(self, *_: object) -> list:
        """Run at replay, on the device: evaluate the condition, run the body accordingly, return [iterations]."""
        iterations, spent = 0, CONDITION_US
        while _device_values(self.condition)[0]:
            if iterations == self.max_iterations:
                raise NeverEndingLoopError(
                    f"the {self.kind} node's body ran {iterations} times and its condition is still non-zero: "
                    f"on a GPU this replay would never finish. The body must write 0 into the condition "
                    f"buffer (e.g. a countdown), or raise max_iterations if {iterations} is too few."
                )
            spent += self._run_body()
            iterations += 1
            if self.kind == "IF":
                break
            spent += CONDITION_US
        self.last_iterations = iterations
        if self.node is not None:
            self.node.kernel_us = spent  # the timeline charges what the GPU did this time
        return [iterations]


def _conditional(kind: str, condition: Buffer, body: Callable[[], object], max_iterations: int) -> Buffer | int:
    what = "if_node()" if kind == "IF" else "while_node()"
    cond = _check_condition(condition, what)
    if not callable(body):
        raise InvalidArgumentError(f"{what} takes its body as a function of no arguments that launches kernels, "
                                   f"e.g. lambda: tg.launch(double, x, out=x); got {body!r}.")
    if isinstance(max_iterations, bool) or not isinstance(max_iterations, int) or max_iterations < 1:
        raise InvalidArgumentError(f"max_iterations must be a whole number >= 1, got {max_iterations!r}.")
    device = cond.device
    graph = device.capturing
    if graph is None:  # plain host control flow: reading the condition is a sync, every time
        runs = 0
        while cond.item():
            if runs == max_iterations:
                raise NeverEndingLoopError(f"{what} ran its body {runs} times eagerly and the condition is "
                                           f"still non-zero: make the body write 0 into it.")
            body()
            runs += 1
            if kind == "IF":
                break
        return runs
    first = len(graph.nodes)
    body()
    recorded = graph.nodes[first:]
    del graph.nodes[first:]
    if not recorded:
        raise CaptureError(f"{what}'s body launched no kernel during capture: a conditional node needs a body.")
    runner = ConditionalNode(kind, cond, recorded, max_iterations)
    output = device._alloc([0], graph.pool)
    node = _capture.Node(f"{kind} node", runner, (cond,), output, CONDITION_US)
    runner.node = node
    graph.nodes.append(node)
    return output


def if_node(condition: Buffer, body: Callable[[], object]) -> Buffer | int:
    """An IF node: at replay the GPU runs `body`'s kernels only if ``condition[0]`` is non-zero then.

    During capture returns a one-value buffer that each replay sets to 1 or 0 (did the body run);
    outside a capture it is a plain host ``if`` (one sync) and returns 1 or 0.
    """
    return _conditional("IF", condition, body, 1)


def while_node(condition: Buffer, body: Callable[[], object], max_iterations: int = 10_000) -> Buffer | int:
    """A WHILE node: at replay the GPU runs `body`'s kernels again and again while ``condition[0]`` is non-zero.

    The body itself must update the condition buffer. During capture returns a one-value buffer
    that each replay sets to the number of iterations; outside a capture it is a host ``while``
    loop, one sync per test of the condition, and returns the number of iterations.
    """
    return _conditional("WHILE", condition, body, max_iterations)
