"""Liveness: a graph keeps addresses, not tensors, so a replay after a captured buffer is freed reads whoever lives there now.

A CUDA graph's kernel nodes hold raw device addresses. Buffers the graph allocated during capture
live in its private pool, which holds them for the graph's life. A buffer from *outside* the pool
(a static input made before capture, weights, a cache) lives only as long as the program keeps it:
once it is freed (``device.free(x)``; in PyTorch, when the last Python reference goes), the caching
allocator hands its block to the next allocation that fits, and a replay reads the new owner's
values: a wrong answer and no error. Once the block has gone back to the driver
(``device.empty_cache()``), a replay faults instead (:class:`~toygraph.errors.IllegalMemoryAccessError`).
PyTorch's rule: "you must maintain long-lived references to tensors that hold input and output data
during capture".

``graph(g, check_input_liveness=True)`` (or ``g.capture(x, check_input_liveness=True)``) makes every
replay check first and raise :class:`~toygraph.errors.InputLivenessError`, naming each dead buffer,
the nodes that read or write it and what lives there now. It mirrors PyTorch 2.13's
``torch.cuda.graph(g, check_input_liveness=True)``: "If ``True``, tracks external tensor inputs during
graph capture and raises an error if any are deallocated before replay. This helps debug 'use after
free' errors where input tensors are garbage collected between capture and replay. Default:
``False``." (``torch/cuda/graphs.py``; the check is ``_CUDAGraphInputLivenessTracker.check_alive`` in
``torch/utils/_cuda_debug.py``, which skips blocks of the graph's own pool, as the toy does.)

The toy's default is off, as PyTorch's is: the same program behaves the same on the toy and on a
GPU, so a learner first meets the silent wrong answer, then switches the check on the way they
would in torch. Where the toy differs: PyTorch's message gives each dead tensor's creation and
deletion tracebacks; the toy names the nodes that touch it and the buffer that owns the block now.
Custom kernels launched outside PyTorch are not tracked by torch's check; the toy sees every node.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator, Sequence

from .errors import InputLivenessError
from .memory import Buffer

if TYPE_CHECKING:
    from .capture import ToyGraph


@dataclass(frozen=True)
class DeadTensor:
    """One buffer from outside a graph's pool, freed after capture: what it was, who touches it, what is there now."""

    name: str
    """What it was captured as: ``buffer 'x'``, ``the graph's static_input``, or its size."""
    address: int
    touched_by: tuple[str, ...]
    """Each node that reads or writes it, e.g. ``read by node 'double' (nodes[0], input 0)``."""
    state: str
    """``"re-used"`` (another buffer owns the block), ``"cached"`` (the allocator keeps it) or ``"unmapped"``."""
    now: str
    """What happened to the block and what a replay would do, in words."""

    def describe(self) -> str:
        """One line for the error message."""
        return f"{self.name}, {' and '.join(self.touched_by)}: {self.now}"


FIX = ("Fix: keep a reference to every tensor the graph reads: hold static inputs for the graph's life "
       "and copy each new batch into them (static_x.copy_(new)) rather than making new tensors. Buffers "
       "the graph allocated during capture are safe: its private pool holds them.")
"""What every liveness error ends with: how to keep what the graph reads alive."""


def walk(nodes: Sequence, path: str = "nodes") -> Iterator[tuple[str, object]]:
    """Every node of a graph with where it sits (``nodes[2]``, ``nodes[1].bodies[0][3]``), bodies of conditional nodes included."""
    for i, node in enumerate(nodes):
        here = f"{path}[{i}]"
        yield here, node
        for j, body in enumerate(getattr(node, "bodies", ())):
            yield from walk(body, f"{here}.bodies[{j}]")


def touched(node: object) -> Iterator[tuple[Buffer, str, str]]:
    """The buffers one node reads or writes at replay: (buffer, "read" or "written", which argument)."""
    for i, buf in enumerate(getattr(node, "inputs", ())):
        yield buf, "read", f"input {i}"
    for name, buf in getattr(node, "live", {}).items():
        if isinstance(buf, Buffer):
            yield buf, "read", f"by the name {name!r}"
    output = getattr(node, "output", None)
    if isinstance(output, Buffer):
        yield output, "written", "its output"


def external_buffers(g: "ToyGraph") -> list[Buffer]:
    """The buffers g's nodes read or write that live outside g's pool: the ones a program must keep alive."""
    found: dict[int, Buffer] = {}
    for _, node in walk(g.nodes):
        for buf, _, _ in touched(node):
            if buf.pool is not g.pool:
                found.setdefault(id(buf._storage), buf if buf.base is None else buf.base)
    return list(found.values())


def _captured_as(buf: Buffer, g: "ToyGraph") -> str:
    base = buf if buf.base is None else buf.base
    if base.name:
        return f"buffer {base.name!r}"
    if g.static_input is not None and g.static_input._storage is base._storage:
        return "the graph's static_input"
    return base.label


def _is_dead(buf: Buffer) -> bool:
    return buf._storage.taken_back


def _now(buf: Buffer) -> tuple[str, str]:
    storage, block = buf._storage, buf._storage.block
    if block.state == "unmapped":
        return "unmapped", ("freed after capture and its block given back to the driver (empty_cache): this "
                            "replay would fault with an illegal memory access")
    if block.state == "cached":
        held = ("still holding its old values" if block.owner() is storage
                else f"holding the values of {block.tenant}")
        return "cached", (f"freed after capture; its block waits in the allocator's cache, {held}: this replay "
                          f"would only look right until the next allocation of a fitting size takes the block")
    return "re-used", (f"freed after capture; its block now holds {block.tenant}: this replay would read "
                       f"those values, a wrong answer with no error")


def dead_tensors(g: "ToyGraph") -> list[DeadTensor]:
    """The buffers from outside g's pool that g's nodes read or write and that were freed after capture."""
    dead: dict[int, tuple[Buffer, list[str]]] = {}
    for path, node in walk(g.nodes):
        for buf, verb, role in touched(node):
            if buf.pool is g.pool or not _is_dead(buf):
                continue  # the graph's own pool holds its blocks for the graph's life
            name = getattr(node, "name", type(node).__name__)
            dead.setdefault(id(buf._storage), (buf, []))[1].append(f"{verb} by node {name!r} ({path}, {role})")
    found = []
    for buf, uses in dead.values():
        state, now = _now(buf)
        base = buf if buf.base is None else buf.base
        found.append(DeadTensor(_captured_as(buf, g), base.address, tuple(uses), state, now))
    return found


def check_input_liveness(g: "ToyGraph") -> None:
    """Raise InputLivenessError if g would touch a freed buffer: what ``check_input_liveness=True`` runs before each replay."""
    dead = dead_tensors(g)
    if not dead:
        return
    lines = [f"CUDA graph replay detected {len(dead)} dead tensor(s)."]
    for i, d in enumerate(dead[:5], 1):
        lines.append(f"Dead tensor #{i} (data_ptr={d.address:#x}): {d.describe()}.")
    if len(dead) > 5:
        lines.append(f"  ... and {len(dead) - 5} more")
    lines.append(FIX)
    lines.append(f"(toy graph {g.name!r}, captured with check_input_liveness=True, checks before every replay; "
                 f"PyTorch's message gives each dead tensor's creation and deletion tracebacks instead of its nodes.)")
    raise InputLivenessError("\n".join(lines), dead)


def fault_message(node_name: str, buf: Buffer, verb: str) -> str:
    """The toy's illegal-memory-access message for a node that touches a block given back to the driver."""
    return (f"CUDA error: an illegal memory access was encountered (the toy's stand-in for a fault): node "
            f"{node_name!r} {verb} {buf.label} at {buf.address:#x}, which was freed after capture and its block "
            f"given back to the driver (empty_cache). A GPU reports this later, at the next sync, without naming "
            f"the kernel (compute-sanitizer names it), and the CUDA context is unusable afterwards; while the "
            f"block sits in the allocator's cache a replay reads it silently instead. {FIX}")
