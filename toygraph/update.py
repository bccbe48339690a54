"""Update an instantiated graph in place: the toy twin of ``cudaGraphExecUpdate``.

A captured graph bakes its kernels' arguments: the pointers they read and write and the scalars
they take. When only those arguments change from one step to the next (a new scale, a new
input buffer, another position in a KV cache), CUDA does not need a new capture and a new
instantiation: ``cudaGraphExecUpdate(hGraphExec, hGraph, &resultInfo)`` takes a newly captured
graph of the *same topology* and copies its nodes' parameters into the executable graph, which
is much cheaper than instantiating again. llama.cpp's CUDA backend (``ggml-cuda.cu``) captures
each step's graph and updates its instantiated one this way, instantiating again only when the
update fails with ``cudaErrorGraphExecUpdateFailure``; cuda.core exposes it as
``Graph.update(builder)`` ("The topology of the provided builder must be identical to this
graph"); ``cudaGraphExecKernelNodeSetParams`` does the same for one kernel node (not modelled
here: :func:`update` always takes a whole new capture).

Here :func:`update` (also ``g.update(new)``) pairs the nodes of ``new`` with those of ``g`` in
recording order and, when every pair may be updated, copies into ``g`` each node's function,
baked Python values, the buffers it reads and writes, and the graph's static input and output:
``g``'s next replay computes what ``new`` recorded, and ``g`` was not captured again. When one
pair may not be updated it raises :class:`~toygraph.errors.GraphUpdateError` naming CUDA's result
code, the first node that differs and the fix, and ``g`` is left exactly as it was (every check
runs before anything is copied).

The rules, from the CUDA runtime API reference (``cudaGraphExecUpdate``, Graph Management; the
enum ``cudaGraphExecUpdateResult``; the struct ``cudaGraphExecUpdateResultInfo``:
https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__GRAPH.html), as the toy models them:

* ``cudaGraphExecUpdateErrorTopologyChanged``: the count of nodes directly in the two graphs
  differs (the docs: "The count of nodes directly in hGraphExec and hGraph differ"), or a node
  has other dependencies. A ToyGraph is captured from one stream, so its nodes form a chain in
  recording order: with equal counts the edges are equal too. A conditional node's body is a
  graph of its own, checked the same way ("Changing parameters of nodes within the conditional
  body graph is subject to the rules above"): a body with another count of nodes is reported
  as a topology change (the toy's reading of that sentence).
* ``cudaGraphExecUpdateErrorNodeTypeChanged``: "the type of a node changed": a kernel node
  where a copy (memcpy) node or a conditional node was, or the reverse.
* ``cudaGraphExecUpdateErrorParametersChanged``: "any parameters to a node changed in a way that
  is not supported". Conditional nodes: "Changing node parameters is not supported" (its kind,
  IF/WHILE/SWITCH, its number of bodies, its condition); memcpy nodes: "Changing either the
  source or destination memory type ... is not supported" (a copy from host values where a
  copy from a device buffer was), and "The CUDA device(s) to which the operand(s) was
  allocated/mapped cannot change".
* ``cudaGraphExecUpdateErrorUnsupportedFunctionChange``: "the func field of a kernel changed in
  an unsupported way": among the limits, "The owning context of the function cannot change"
  (here: a node of ``new`` on another toy device).
* ``cudaGraphExecUpdateErrorFunctionChanged``: "the function of a kernel node changed (CUDA
  driver < 11.2)". Since driver 11.2 a kernel node may be updated to *another* kernel (within
  the limits above), so with the default ``driver_version`` (13000, the course's CUDA 13.0) a
  changed kernel is updated and listed in :attr:`UpdateResult.functions_changed`; pass
  ``driver_version=11010`` to see the old refusal.
* The call returns ``cudaErrorGraphExecUpdateFailure`` when it does not update; the toy raises.

What is a kernel's "function" and what are its "parameters" in the toy: the function is the
Python code of the kernel and the code it binds (helper functions, builtins such as
``operator.mul``, classes, modules); the parameters are what :mod:`toygraph.freeze` bakes (its
closure values, globals, defaults) and the buffers it reads and writes (pointers). Buffers of
another length are allowed, as CUDA lets a kernel node's pointers and grid change; the static
input then has the length ``new`` was captured with.

Where the toy simplifies, said plainly:

* A ToyGraph is both the graph and its instantiation (``cudaGraph_t`` and ``cudaGraphExec_t``):
  the toy has no capture without instantiation, so ``new`` must be a captured ToyGraph, and it
  ran its kernels once at capture, as every toy capture does. Only ``g`` is spared a capture.
* Prices: neither :mod:`toygraph.prices` nor the timeline has a price for capturing,
  instantiating or updating (the course's benchmark measured launches, kernels, graph launches
  and syncs only), so the toy's clock charges nothing for either path. The toy counts instead:
  ``g.updates`` (successful updates of ``g``) and the :class:`UpdateResult` each update returns.
* After an update ``g`` reads and writes ``new``'s buffers, some of them in ``new``'s private
  pool: in CUDA too the executable graph now holds those pointers, and that memory must stay
  allocated for as long as ``g`` replays. ``g``'s own pool keeps its memory (nothing is freed).
* CUDA sets ``errorNode`` to NULL when the counts of nodes differ; the toy still names the first
  node without a partner, to say where the graphs part.
* Graphs that draw random numbers (:mod:`toygraph.rng`) are refused: the generator's offsets
  live in host code that PyTorch runs around each replay, which no graph update reaches.
  :class:`toygraph.streams.StreamGraph` (a DAG) has no ``update``.
"""

from __future__ import annotations

import functools
import types
from dataclasses import dataclass
from typing import Any

from .capture import Node, ToyGraph, _same
from .conditional import ConditionalNode
from .errors import GraphStateError, GraphUpdateError, InvalidArgumentError
from .freeze import _CODE_LIKE, _global_names
from .memory import Buffer, _DeviceObject

__all__ = ["ERROR", "FUNCTION_CHANGED", "NODE_TYPE_CHANGED", "NOT_SUPPORTED", "PARAMETERS_CHANGED", "SUCCESS",
           "TOPOLOGY_CHANGED", "UNSUPPORTED_FUNCTION_CHANGE", "UpdateResult", "update"]

# cudaGraphExecUpdateResult, by name (CUDA runtime API, "Data types used by CUDA Runtime")
SUCCESS = "cudaGraphExecUpdateSuccess"
ERROR = "cudaGraphExecUpdateError"
TOPOLOGY_CHANGED = "cudaGraphExecUpdateErrorTopologyChanged"
NODE_TYPE_CHANGED = "cudaGraphExecUpdateErrorNodeTypeChanged"
FUNCTION_CHANGED = "cudaGraphExecUpdateErrorFunctionChanged"
PARAMETERS_CHANGED = "cudaGraphExecUpdateErrorParametersChanged"
NOT_SUPPORTED = "cudaGraphExecUpdateErrorNotSupported"
UNSUPPORTED_FUNCTION_CHANGE = "cudaGraphExecUpdateErrorUnsupportedFunctionChange"

_RECAPTURE = ("capture again and instantiate: make a new ToyGraph, capture the new step into it and replay that one")
_KEEP_FIXED = ("or keep the topology fixed from step to step (the same kernels in the same order whatever the "
               "data: pad each batch to a bucket, toygraph.pad_to / BucketedGraphs, and move a data-dependent "
               "branch into a conditional node) so that an update applies")


@dataclass(frozen=True)
class UpdateResult:
    """What an update did: CUDA's result code and, by node, what changed (node paths as ``"nodes[1] 'scale'"``)."""

    result: str
    """``"cudaGraphExecUpdateSuccess"``: failures raise :class:`~toygraph.errors.GraphUpdateError` instead."""
    nodes_updated: int
    """Kernel and copy nodes whose parameters were copied (those inside conditional bodies included)."""
    values_changed: tuple[str, ...]
    """Nodes whose baked Python values (scalars, lists, ...) differ from what they were."""
    buffers_changed: tuple[str, ...]
    """Nodes that now read or write other buffers (other addresses) than before."""
    functions_changed: tuple[str, ...]
    """Kernel nodes updated to another kernel function (allowed since CUDA driver 11.2)."""
    updates: int
    """How many times the graph has been updated, this one included (``g.updates``)."""


# what a node is ---------------------------------------------------------------------------------

def _node_type(node: object) -> str:
    if isinstance(node, ConditionalNode):
        return "conditional"
    if isinstance(node, Node) and (node.fn is _same or _is_host_copy(node)):
        return "memcpy"
    return "kernel"


def _is_host_copy(node: Node) -> bool:
    """A copy_ of host values during capture: ToyGraph._record_copy bakes them into a small node of its own."""
    return node.name == "copy_" and not node.inputs and getattr(node.fn, "__qualname__", "").startswith("ToyGraph._record_copy")


def _is_code(value: object) -> bool:
    return isinstance(value, (types.FunctionType, types.MethodType, functools.partial, *_CODE_LIKE))


def _function_key(fn: Any, seen: set[int] | None = None) -> object:
    """The kernel's function: its code and the code it binds (helpers, builtins, classes), not its values."""
    seen = set() if seen is None else seen
    if isinstance(fn, types.MethodType):
        return ("method", _function_key(fn.__func__, seen))
    if isinstance(fn, functools.partial):
        return ("partial", _function_key(fn.func, seen))
    if isinstance(fn, types.FunctionType):
        if id(fn) in seen:
            return ("again", fn.__code__)
        seen.add(id(fn))
        bound: list[object] = [fn.__code__]
        for var, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            if _is_code(value):
                bound.append((var, _function_key(value, seen)))
        for var in _global_names(fn.__code__):
            value = fn.__globals__.get(var, None)
            if _is_code(value):
                bound.append((var, _function_key(value, seen)))
        for value in (*(fn.__defaults__ or ()), *(fn.__kwdefaults__ or {}).values()):
            if _is_code(value):
                bound.append(_function_key(value, seen))
        return ("function", tuple(bound))
    if isinstance(fn, _CODE_LIKE):
        return ("code", fn)
    return ("object", type(fn))


def _same_value(a: object, b: object) -> bool:
    """Whether two baked values are equal, without ever comparing buffers by value (that would launch a kernel)."""
    if a is b:
        return True
    if isinstance(a, _DeviceObject) or isinstance(b, _DeviceObject) or type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))  # type: ignore[arg-type]
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same_value(a[k], b[k]) for k in a)  # type: ignore[union-attr,index]
    try:
        same = a == b
    except Exception:  # noqa: BLE001  (an object whose == raises is simply not the same value)
        return False
    return same if isinstance(same, bool) else False


def _node_buffers(node: Node) -> tuple[Buffer, ...]:
    return (*node.inputs, *node.live.values(), node.output)


# checking, then copying --------------------------------------------------------------------------

class _Plan:
    def __init__(self) -> None:
        self.pairs: list[tuple[Node, Node, str]] = []
        self.conditionals: list[tuple[ConditionalNode, ConditionalNode]] = []


def _label(path: str, node: object) -> str:
    return f"{path} {getattr(node, 'name', type(node).__name__)!r}"


def _fail(g: ToyGraph, result: str, node: str | None, what: str, fix: str) -> GraphUpdateError:
    where = f" at {node}" if node else ""
    return GraphUpdateError(
        f"cudaGraphExecUpdate of graph {g.name!r} failed (cudaErrorGraphExecUpdateFailure), resultInfo.result = "
        f"{result}{where}: {what}. The graph is unchanged: its next replay runs what it ran before. Fix: {fix}.",
        result, node)


def _check_nodes(g: ToyGraph, old: list, new: list, path: str, plan: _Plan, driver_version: int) -> None:
    if len(old) != len(new):
        first = min(len(old), len(new))
        extra = (f"the new graph's {_label(f'{path}[{first}]', new[first])} has no partner"
                 if len(new) > len(old) else f"the graph's {_label(f'{path}[{first}]', old[first])} has no partner")
        raise _fail(g, TOPOLOGY_CHANGED, _label(f"{path}[{first}]", (new if len(new) > len(old) else old)[first]),
                    f"the count of nodes differs ({len(old)} in the graph, {len(new)} in the new one; {extra})",
                    f"{_RECAPTURE}, {_KEEP_FIXED}")
    for i, (a, b) in enumerate(zip(old, new)):
        here = f"{path}[{i}]"
        label = _label(here, b)
        kind_a, kind_b = _node_type(a), _node_type(b)
        if kind_a != kind_b:
            raise _fail(g, NODE_TYPE_CHANGED, label, f"a {kind_b} node where the graph has a {kind_a} node "
                        f"({_label(here, a)})", f"{_RECAPTURE}, {_KEEP_FIXED}")
        if kind_a == "conditional":
            _check_conditional(g, a, b, here, label, plan, driver_version)
            continue
        if any(buf.device is not g.device for buf in _node_buffers(b)):
            if kind_a == "kernel":
                raise _fail(g, UNSUPPORTED_FUNCTION_CHANGE, label, "its kernel runs on another toy device (CUDA: "
                            "\"The owning context of the function cannot change\")",
                            f"capture the new step on the graph's own device ({g.device.name!r}), or {_RECAPTURE}")
            raise _fail(g, PARAMETERS_CHANGED, label, "the copy's memory is on another toy device (CUDA: \"The CUDA "
                        "device(s) to which the operand(s) was allocated/mapped cannot change\")",
                        f"copy between buffers of the graph's own device ({g.device.name!r}), or {_RECAPTURE}")
        if kind_a == "memcpy" and _is_host_copy(a) != _is_host_copy(b):
            source = {True: "host values", False: "a device buffer"}
            raise _fail(g, PARAMETERS_CHANGED, label, f"the copy's source changed from {source[_is_host_copy(a)]} "
                        f"to {source[_is_host_copy(b)]} (CUDA: changing the source memory type of a memcpy node is "
                        "not supported)", f"copy from the same kind of source at every step, or {_RECAPTURE}")
        if kind_a == "kernel" and driver_version < 11020 and _function_key(a.fn) != _function_key(b.fn):
            raise _fail(g, FUNCTION_CHANGED, label, f"the kernel's function changed (was {_label(here, a)}); a CUDA "
                        f"driver older than 11.2 (driver_version={driver_version}) cannot change a kernel node's "
                        "function", f"update to a driver >= 11.2, launch the same kernel at this step, or {_RECAPTURE}")
        plan.pairs.append((a, b, label))


def _check_conditional(g: ToyGraph, a: ConditionalNode, b: ConditionalNode, here: str, label: str, plan: _Plan,
                       driver_version: int) -> None:
    cond_a, cond_b = a.condition, b.condition
    changed = None
    if a.kind != b.kind:
        changed = f"its kind changed from {a.kind.upper()} to {b.kind.upper()}"
    elif len(a.bodies) != len(b.bodies):
        changed = f"its number of bodies changed from {len(a.bodies)} to {len(b.bodies)}"
    elif cond_a.device is not cond_b.device or cond_a.address != cond_b.address or len(cond_a) != len(cond_b):
        changed = (f"its condition changed from the buffer at {cond_a.address:#x} to the buffer at "
                   f"{cond_b.address:#x} (the toy's stand-in for the conditional handle)")
    if changed:
        raise _fail(g, PARAMETERS_CHANGED, label, f"{changed}; CUDA: for conditional nodes \"Changing node "
                    "parameters is not supported\"", f"keep the conditional node's kind, bodies and condition buffer "
                    f"the same at every step (only the kernels inside its bodies may change their arguments), or "
                    f"{_RECAPTURE}")
    for j, (body_a, body_b) in enumerate(zip(a.bodies, b.bodies)):
        _check_nodes(g, body_a, body_b, f"{here}.bodies[{j}]", plan, driver_version)
    plan.conditionals.append((a, b))


def update(g: ToyGraph, new: ToyGraph, *, driver_version: int = 13000) -> UpdateResult:
    """Copy the node parameters of `new` (same topology) into the captured graph `g`, as cudaGraphExecUpdate does.

    Raises :class:`~toygraph.errors.GraphUpdateError` (naming CUDA's result code, the first node that
    differs and the fix) and leaves `g` as it was when `new` cannot be paired with `g` node by node.
    `driver_version` is CUDA's encoding (1000 * major + 10 * minor): below 11020 a changed kernel
    function is refused (``cudaGraphExecUpdateErrorFunctionChanged``), as drivers before 11.2 did.
    """
    for name, value in (("g", g), ("new", new)):
        if not isinstance(value, ToyGraph):
            raise InvalidArgumentError(f"update() takes two ToyGraphs (the captured graph and a new capture of the "
                                       f"same step), got {name}={value!r}.")
    if isinstance(driver_version, bool) or not isinstance(driver_version, int) or driver_version < 1000:
        raise InvalidArgumentError(f"driver_version is CUDA's encoding, 1000 * major + 10 * minor (12080 for 12.8), "
                                   f"got {driver_version!r}.")
    for name, value in (("the graph to update", g), ("the new graph", new)):
        if value.state != "captured":
            raise GraphStateError(
                f"{name} ({value.name!r}) is {value.state}, not captured: update() copies the parameters of a "
                f"captured graph into another captured graph. Capture it first (with graph(...) or .capture(x))"
                + (f"; {value._invalid_reason} invalidated it, so capture a new ToyGraph"
                   if value.state == "invalidated" else "")
                + ".")
    if g._before_replay or new._before_replay:
        raise GraphUpdateError(
            f"cudaGraphExecUpdate of graph {g.name!r}: the toy does not update graphs that draw random numbers "
            f"(toygraph.rng): their generator offsets are host code run around each replay, which an update does not "
            f"reach. The graph is unchanged. Fix: {_RECAPTURE}.", NOT_SUPPORTED, None)
    plan = _Plan()
    _check_nodes(g, list(g.nodes), list(new.nodes), "nodes", plan, driver_version)
    # every pair checked: now copy, so that a failure above left g as it was
    values_changed, buffers_changed, functions_changed = [], [], []
    for a, b, label in plan.pairs:
        if not (a.frozen.keys() == b.frozen.keys() and all(_same_value(a.frozen[k], b.frozen[k]) for k in a.frozen)):
            values_changed.append(label)
        if (len(a.inputs) != len(b.inputs) or any(x is not y for x, y in zip(_node_buffers(a), _node_buffers(b)))
                or a.live.keys() != b.live.keys()):
            buffers_changed.append(label)
        if _node_type(a) == "kernel" and _function_key(a.fn) != _function_key(b.fn):
            functions_changed.append(label)
    for a, b, _label_ in plan.pairs:
        a.name, a.fn, a.inputs, a.output, a.kernel_us = b.name, b.fn, b.inputs, b.output, b.kernel_us
        a.frozen, a.live = dict(b.frozen), dict(b.live)
    for a, b in plan.conditionals:
        a.max_iterations = b.max_iterations  # the toy's guard against an endless loop, not a CUDA parameter
    g.static_input, g.static_output = new.static_input, new.static_output
    g.updates += 1
    return UpdateResult(SUCCESS, len(plan.pairs), tuple(values_changed), tuple(buffers_changed),
                        tuple(functions_changed), g.updates)


def _update_method(self: ToyGraph, new: ToyGraph, *, driver_version: int = 13000) -> UpdateResult:
    """Copy the node parameters of `new` (same topology) into this captured graph: toygraph.update.update(self, new)."""
    return update(self, new, driver_version=driver_version)


_update_method.__name__ = _update_method.__qualname__ = "update"
ToyGraph.update = _update_method  # type: ignore[attr-defined]
ToyGraph.updates = 0  # type: ignore[attr-defined]  # a class default: how many times a graph was updated in place
