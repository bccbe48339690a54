"""ToyGraph: record a list of kernels once, capture them at fixed addresses, replay them for one launch.

The example of the seed lesson (the one-page text lesson this course grew from) works as it is::

    g = ToyGraph()
    g.record(lambda x: [v * 2 for v in x])
    g.record(lambda x: [v + 1 for v in x])
    print(g.replay([1, 2, 3]))        # [3, 5, 7]

Around it, the toy enforces what a real CUDA graph enforces:

* The first replay (or an explicit :meth:`ToyGraph.capture`) captures: it allocates the
  static input first, from the ordinary (eager) pool, as PyTorch code allocates its static
  input before ``with torch.cuda.graph(g):``; then one static buffer per kernel from the
  graph's private pool; and it seals the graph. Recording into a sealed graph is an error:
  the topology is fixed.
* Replay copies new data into the static input, reruns the recorded kernels on the same
  addresses and returns the static output: the *same* buffer every time, overwritten by
  the next replay unless you copy it out: ``out.clone()`` on the device (no sync) or
  ``out.tolist()`` to the host (a sync). ``list(out)`` is *not* a copy: it is a list of
  one-element views of the static output (torch's ``unbind``), overwritten with it.
* A batch of another size than the captured one is refused (:class:`ShapeMismatchError`).
* The graph keeps the addresses of buffers from outside its pool, not the buffers: free one after
  capture (``device.free``) and a replay reads whatever owns that block now. Capture with
  ``check_input_liveness=True`` to have every replay check first (:mod:`toygraph.liveness`).
* Capture bakes the Python values each kernel reads (its closure variables, the globals it
  names, its default arguments: see :mod:`toygraph.freeze`); rebinding them afterwards
  changes nothing a replay computes. The contents of device buffers stay live.
* Host code runs once, at capture. A Python ``if`` on a *host* value (a flag, a Python
  number) picks a branch then, and replay repeats that branch forever (frozen control
  flow). An ``if`` on a *device* value (``if h[0] > 0:``) launches the compare as a kernel,
  then asks for its truth, which is a sync: like ``.item()`` or ``synchronize()`` during
  capture it raises :class:`CaptureError`.

Kernels are plain Python functions from lists to a list (or to one value): each input
buffer arrives as a plain list of its values, read on the device (no sync). The toy runs
each kernel once while capturing, so the static output holds values after capture; a real
GPU only records, and a static output holds garbage until the first replay.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence

from ._guard import Guarded, Record
from .errors import CaptureError, GraphStateError, IllegalMemoryAccessError, InvalidArgumentError, ShapeMismatchError
from .freeze import Frozen, freeze
from .liveness import DeadTensor, check_input_liveness as _check_liveness, dead_tensors, external_buffers, fault_message
from .memory import Buffer, MemoryPool, ToyDevice, _check_values, _kernel_running, default_device


def count(n: int, word: str, plural: str | None = None) -> str:
    """'1 kernel', '2 kernels': a count with its noun in the right number (plural defaults to word + 's')."""
    return f"{n} {word if n == 1 else (plural or word + 's')}"

Kernel = Callable[..., object]


@dataclass
class Node:
    """One recorded kernel: its frozen function, the buffers it reads and the static buffer it writes."""

    name: str
    fn: Kernel
    inputs: tuple[Buffer, ...]
    output: Buffer
    kernel_us: float
    frozen: dict = field(default_factory=dict)
    """The Python values the kernel read at capture, by name: baked, as a kernel's arguments are."""
    live: dict = field(default_factory=dict)
    """Buffers the kernel reads by name (besides its inputs): device memory, read afresh at every replay."""

    def run(self, executed: list[float]) -> None:
        """Run the kernel on the current contents of its inputs and write its static output (at replay)."""
        for buf in (*self.inputs, *self.live.values(), self.output):  # a block given back to the driver: a fault
            block = buf._storage.block
            if block is not None and block.state == "unmapped":
                raise IllegalMemoryAccessError(fault_message(self.name, buf, "writes" if buf is self.output else "reads"))
        result = _run_kernel(self.fn, self.inputs, self.name)
        if len(result) != len(self.output):
            raise ShapeMismatchError(len(self.output), len(result), what=f"output of kernel {self.name!r}")
        self.output._write(result)
        executed.append(self.kernel_us)


def kernel_nodes(nodes: Sequence) -> list[Node]:
    """Every kernel node of a graph, including those inside conditional nodes' bodies, in recording order."""
    found: list[Node] = []
    for node in nodes:
        if isinstance(node, Node):
            found.append(node)
        for body in getattr(node, "bodies", ()):
            found += kernel_nodes(body)
    return found


def _same(values: list) -> list:
    return values


def _kernel_name(fn: Kernel, name: str | None, index: int) -> str:
    if name is not None:
        return name
    own = getattr(fn, "__name__", "")
    return own if own and own != "<lambda>" else f"op{index}"


def _run_kernel(fn: Kernel, inputs: Sequence[Buffer], name: str) -> list:
    try:
        with _kernel_running():  # the GPU reads its own memory: no sync
            result = fn(*(b._read() for b in inputs))
    except Exception as exc:  # the learner's kernel failed: keep its error, say where
        exc.add_note(f"(raised inside kernel {name!r})")
        raise
    if isinstance(result, (str, bytes)):
        raise InvalidArgumentError(f"kernel {name!r} returned a string {result!r}: a kernel returns a list of values or one value.")
    return list(result) if isinstance(result, (list, tuple, range)) else [result]


def launch(fn: Kernel, *inputs: Buffer, name: str | None = None, kernel_us: float | None = None,
           out: Buffer | None = None) -> Buffer:
    """Launch one kernel on device buffers: eagerly it runs now and costs a launch; during capture it is recorded.

    The kernel is frozen (toygraph.freeze): the Python values it reads are taken as they are now, and
    baked into the graph during capture; it can write nothing but its output, as a GPU kernel can.
    `out=` writes the result into an existing buffer (in place, like `torch.add(a, b, out=c)`).
    """
    if not callable(fn):
        raise InvalidArgumentError(f"a kernel must be a function such as `lambda x: [v * 2 for v in x]`, got {fn!r}.")
    if not inputs or not all(isinstance(b, Buffer) for b in inputs):
        raise InvalidArgumentError(
            "launch() takes device buffers as inputs: make one with device.tensor([1, 2, 3]); "
            f"got {[type(b).__name__ for b in inputs]}."
        )
    if out is not None and not isinstance(out, Buffer):
        raise InvalidArgumentError(f"out= takes a device buffer to write into, got {type(out).__name__}.")
    for b in (*inputs, *((out,) if out is not None else ())):
        b._check_not_freed("launching a kernel on it")
    device = inputs[0].device
    if any(b.device is not device for b in inputs) or (out is not None and out.device is not device):
        raise InvalidArgumentError("all inputs and the output of a kernel must live on the same toy device.")
    graph = device.capturing
    label = _kernel_name(fn, name, len(graph.nodes) if graph else 0)
    us = device.clock.cost.kernel_us if kernel_us is None else float(kernel_us)
    frozen = freeze(fn)  # eagerly too: a kernel reads host values as they are now, and can write none
    result = _run_kernel(frozen.fn, inputs, label)
    if out is not None:
        if len(result) != len(out):
            raise ShapeMismatchError(len(out), len(result), what=f"output of kernel {label!r} (out=)")
        if graph is None or not graph._body_depth:  # a conditional body is recorded, not run, at capture
            out._write(result)
        output = out
    else:
        output = device._alloc(result, graph.pool if graph is not None else device.eager_pool)
    if graph is None:
        device.clock.launch(label, us)
    else:
        graph._sink.append(Node(label, frozen.fn, tuple(inputs), output, us, frozen.values, frozen.buffers))
    return output


class ToyGraph(Guarded):
    """A toy CUDA graph: record kernels, capture them once at fixed addresses, replay them many times."""

    def __init__(self, device: ToyDevice | None = None, *, name: str = "graph") -> None:
        if device is not None and not isinstance(device, ToyDevice):
            raise InvalidArgumentError(f"device must be a toygraph.ToyDevice, got {device!r}.")
        self.ops: list[Kernel] = Record()
        self.device = device or default_device()
        self.name = name
        self.pool = MemoryPool(f"graph:{name}")
        self.nodes: list[Node] = Record()  # only the toy adds nodes (see _guard)
        self.state = "recording"  # -> "capturing" -> "captured", or "invalidated"
        self.static_input: Buffer | None = None
        self.static_output: Buffer | None = None
        self.replays = 0
        self._op_names: list[str | None] = Record()
        self._op_kernel_us: list[float | None] = Record()
        self._invalid_reason = ""
        self._sink: list = self.nodes  # where launches are recorded: the graph, or a conditional node's body
        self._body_depth = 0
        self._before_replay: list[Callable[[], None]] = Record()  # host work before each launch (RNG offsets)
        self.check_input_liveness = False
        """Whether each replay first checks that no buffer from outside the pool was freed (set at capture)."""

    # recording -------------------------------------------------------------
    def record(self, fn: Kernel, *, name: str | None = None, kernel_us: float | None = None) -> None:
        """Append a kernel (a function from a list to a list) to the script; only before capture."""
        if self.state != "recording":
            raise GraphStateError(
                f"graph {self.name!r} is sealed ({self.state}): its topology was fixed at capture"
                f"{self._captured_for()}. Recording now would change what replay runs. "
                f"Make a new ToyGraph for the new script and capture it."
            )
        if not callable(fn):
            raise InvalidArgumentError(f"record() takes a function such as `lambda x: [v * 2 for v in x]`, got {fn!r}.")
        if kernel_us is not None and (isinstance(kernel_us, bool) or not isinstance(kernel_us, (int, float)) or kernel_us < 0):
            raise InvalidArgumentError(f"kernel_us must be a number of microseconds >= 0, got {kernel_us!r}.")
        self.ops.append(fn)
        self._op_names.append(name)
        self._op_kernel_us.append(kernel_us)

    # capturing -------------------------------------------------------------
    def capture(self, example: Sequence, program: Callable[[Buffer], Buffer] | None = None, *,
                check_input_liveness: bool = False) -> Buffer:
        """Capture at the example's batch size: the recorded kernels, or `program(static_input)` run once as host code.

        `check_input_liveness=True` makes each replay check first that no buffer it reads was freed
        (see :func:`graph`).
        """
        if program is None and not self.ops:
            raise GraphStateError("nothing to capture: record(fn) at least one kernel first, or pass program=.")
        if program is not None and not callable(program):
            raise InvalidArgumentError(f"program must be a function of the static input buffer, got {program!r}.")
        values = _check_values(example, "the example input")
        if not values:
            raise InvalidArgumentError("the example input is empty: capture with a batch of at least one value.")
        static_input = self.device.tensor(values)  # before capture, from the ordinary pool, as in PyTorch
        with graph(self, check_input_liveness=check_input_liveness):
            if program is None:
                out = static_input
                for i, fn in enumerate(self.ops):
                    out = launch(fn, out, name=self._op_names[i] or _kernel_name(fn, None, i), kernel_us=self._op_kernel_us[i])
            else:
                out = program(static_input)
        if not isinstance(out, Buffer) or not any(out._storage is n.output._storage for n in kernel_nodes(self.nodes)):
            self._invalidate("a program that did not return a buffer written during capture")
            raise InvalidArgumentError(
                "the captured program must return the buffer its last kernel wrote (the value of a launch(...) "
                f"during capture), got {type(out).__name__}: replay can only hand back a static buffer."
            )
        self.static_input, self.static_output = static_input, out
        return out

    def _invalidate(self, reason: str) -> None:
        self.state = "invalidated"
        self._invalid_reason = reason

    def _captured_for(self) -> str:
        return f" for batch size {len(self.static_input)}" if self.static_input is not None else ""

    def register_generator_state(self, generator) -> None:
        """PyTorch's ``CUDAGraph.register_generator_state(gen)``: before capture, make this graph move a
        generator other than the device's default on at every replay (toygraph.rng.ToyGenerator.register)."""
        generator.register(self)

    # replaying -------------------------------------------------------------
    def replay(self, x: Sequence | None = None) -> Buffer:
        """Copy x (if given) into the static input, rerun every recorded kernel, return the static output."""
        if self.state == "recording":
            if not self.ops:
                raise GraphStateError("replay before any record: record(fn) at least one kernel, then replay(x).")
            if x is None:
                raise GraphStateError("the first replay captures the graph, so it needs an input: replay([1, 2, 3]).")
            self.capture(x)
        elif self.state == "invalidated":
            raise GraphStateError(f"graph {self.name!r} cannot replay: its capture was invalidated by {self._invalid_reason}. Make a new ToyGraph and capture again without it.")
        elif self.state == "capturing":
            raise GraphStateError("cannot replay a graph while it is still capturing: leave the `with graph(g):` block first.")
        if self.check_input_liveness:  # before anything touches device memory, as CUDAGraph.replay() checks
            _check_liveness(self)
        if x is not None:
            self.copy_in(x)
        for prologue in self._before_replay:  # e.g. a generator writes this replay's RNG offset
            prologue()
        executed: list[float] = []
        for node in self.nodes:
            node.run(executed)
        self.device.clock.replay(self.name, executed, n_nodes=len(self.nodes))
        self.replays += 1
        return self.static_output  # type: ignore[return-value]

    def copy_in(self, x: Sequence) -> None:
        """Copy new data into the static input at its baked-in address (same size only)."""
        if self.static_input is None:
            raise GraphStateError(
                "this graph has no single static input to copy into: copy new data into your own static "
                "buffer with static_x.copy_(new_values), then call replay() with no argument."
            )
        values = _check_values(x, "the replay input")  # from a buffer: device to device, no sync
        if len(values) != len(self.static_input):
            raise ShapeMismatchError(len(self.static_input), len(values))
        self.static_input._write(values)

    def _record_copy(self, target: Buffer, source: Buffer | None, values: list) -> bool:
        """A copy_ during capture is a node too: from a buffer it reads it at replay, from host values they are baked.

        Host values are baked as a kernel argument is: this mirrors ``fill_(scalar)`` or a small
        list handed to a kernel. A real captured host-to-device ``copy_`` is different: its memcpy
        node records the *host pointer* and reads host memory again at every replay (pinned memory;
        with pageable memory it is a known hazard), so changing that host memory between replays
        changes what the graph copies. The toy has no host tensors, so it cannot show that.

        Returns whether to write the values now (not while recording a conditional node's body).
        """
        if source is not None:
            self._sink.append(Node("copy_", _same, (source,), target, self.device.clock.cost.kernel_us))
        else:
            baked = list(values)
            self._sink.append(Node("copy_", lambda: list(baked), (), target, self.device.clock.cost.kernel_us,
                                   {"values": baked}))
        return not self._body_depth

    # looking inside ---------------------------------------------------------
    @property
    def external_buffers(self) -> list[Buffer]:
        """Buffers the graph reads or writes that live outside its pool: keep each alive for the graph's life."""
        return external_buffers(self)

    def dead_tensors(self) -> list[DeadTensor]:
        """Buffers from outside the pool that the graph touches and that were freed after capture (checking on or off)."""
        return dead_tensors(self)

    @property
    def memory_bytes(self) -> int:
        """Bytes held by this graph's private pool (the static input is not in it: it was allocated before capture).

        Simplified: the pool keeps every buffer allocated during capture; see :mod:`toygraph.memory`
        for how PyTorch's pools reuse freed blocks and hold whole segments.
        """
        return self.pool.used_bytes

    @property
    def addresses(self) -> dict[str, int]:
        """Address of the static input and of each kernel's static output buffer."""
        out = {"static_input": self.static_input.address} if self.static_input is not None else {}
        out.update({n.name: n.output.address for n in kernel_nodes(self.nodes)})
        return out

    def __repr__(self) -> str:
        return (f"ToyGraph({self.name!r}, {self.state}{self._captured_for()}, {count(len(self.nodes) or len(self.ops), 'kernel')}, "
                f"{self.memory_bytes} bytes in its pool, replayed {self.replays}x)")


@contextmanager
def graph(g: ToyGraph, pool: MemoryPool | None = None, *, check_input_liveness: bool = False) -> Iterator[ToyGraph]:
    """Capture every launch in the block into g, like `with torch.cuda.graph(g):` (pool= shares another graph's pool).

    `check_input_liveness=True`, as in PyTorch 2.13's ``torch.cuda.graph``, makes every replay first
    check the buffers from outside the graph's pool and raise :class:`InputLivenessError` if one was
    freed; off by default, as in PyTorch (:mod:`toygraph.liveness`). Entering the block gives cached
    free blocks back to the driver (``torch.cuda.graph`` calls ``torch.cuda.empty_cache()`` there too).
    """
    if not isinstance(g, ToyGraph):
        raise InvalidArgumentError(f"graph() takes a ToyGraph, got {g!r}.")
    if not isinstance(check_input_liveness, bool):
        raise InvalidArgumentError(f"check_input_liveness must be True or False, got {check_input_liveness!r}.")
    if g.state != "recording" or g.nodes:
        raise GraphStateError(f"graph {g.name!r} was already captured ({g.state}): a graph is captured once. Make a new ToyGraph.")
    device = g.device
    if device.capturing is not None:
        raise CaptureError(f"graph {device.capturing.name!r} is already capturing on this device: finish that capture first.")
    if pool is not None:
        if not isinstance(pool, MemoryPool):
            raise InvalidArgumentError(f"pool must be another graph's .pool, got {pool!r}.")
        g.pool = pool
    if g.pool not in device.graph_pools:
        device.graph_pools.append(g.pool)
    device.empty_cache()  # as torch.cuda.graph.__enter__ does
    g.check_input_liveness = check_input_liveness
    device.capturing, g.state = g, "capturing"
    try:
        yield g
    except BaseException:
        if g.state == "capturing":
            g._invalidate("an error during capture")
        raise
    finally:
        device.capturing = None
    g.state = "captured"
    if g.static_input is None:
        every = kernel_nodes(g.nodes)
        written = {id(n.output._storage) for n in every}
        external = {id(b._storage): (b if b.base is None else b.base) for n in every for b in n.inputs
                    if id(b._storage) not in written}
        if len(external) == 1:
            g.static_input = next(iter(external.values()))
        if every:
            g.static_output = every[-1].output
