"""A graph captured from two streams: fork and join with events, a DAG of kernels, branches that overlap.

Capture records more than a list. When a second stream waits on an event of the capturing
stream (``side.wait_stream(main)``: the *fork*), its work joins the capture as a branch that
depends only on what it waited for; when the capturing stream waits on the branch's last event
(``main.wait_stream(side)``: the *join*), the branch rejoins. The graph is a DAG, and a replay
runs independent branches at the same time. This is how stream capture turns events
(``cudaEventRecord`` / ``cudaStreamWaitEvent``) into graph edges (CUDA programming guide, "Cross-stream
Dependencies and Events"), and a capture whose fork never rejoined the origin stream ends with
``cudaErrorStreamCaptureUnjoined`` ("the capture sequence contains a fork that was not joined to the
primary stream"). In PyTorch the same is ``side.wait_stream(torch.cuda.current_stream())`` inside
``torch.cuda.graph`` and ``torch.cuda.current_stream().wait_stream(side)`` before it ends.

:class:`StreamGraph` captures one: ``with sg.capture():`` then ``main.launch(...)``,
``side.wait_stream(main)``, ``side.launch(...)``, ``main.wait_stream(side)``. A replay writes
``gpu:<stream>`` lanes on the device's timeline (the stream each kernel was captured on), where
overlapping bars show the branches running together.

Where the toy simplifies: a launch on a stream that was never forked into the capture (it did
not wait on the capturing stream) is a :class:`CaptureError` in the toy. CUDA does not refuse
the launch itself: the kernel runs eagerly, outside the graph, while the capture goes on. What
happens next depends on the join. If the capturing stream later waits on that stream (the join
kept, the fork forgotten), it waits on an event of uncaptured work, which CUDA forbids ("It is
invalid to wait on a non-captured event from a stream which is being captured", programming guide,
stream capture): the capture is invalidated (``cudaErrorStreamCaptureIsolation``) and fails loudly;
the toy raises the same at that join (:meth:`ToyStream.wait_event`). With no join either, nothing
fails: the work ran once, eagerly, and the graph lacks it, a *silent* error (PyTorch's CUDA notes
list non-captured work during capture among the silent errors). The toy turns that silent
misbehaviour into an error you can read, at the launch.
Kernels compute in the order they were recorded (one topological
order of the DAG), and any number of independent kernels may run at once (a GPU runs them
together only while it has free SMs). Two kernels that touch the same buffer with no path
between them are a race on a GPU; the toy cannot show that nondeterminism, so it lists them
in :attr:`StreamGraph.races` instead.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

from ._guard import Guarded, Record, RecordDict
from .capture import Node, ToyGraph, count, graph, launch
from .errors import CaptureError, GraphStateError, InvalidArgumentError
from .memory import Buffer, ToyDevice, default_device
from .timeline import Event

__all__ = ["StreamGraph", "ToyStream", "ToyEvent"]


@dataclass(frozen=True)
class ToyEvent:
    """A point in one stream's work: whatever waits on it waits for that stream's kernels up to here."""

    stream: str
    node: Node | None


class ToyStream(Guarded):
    """One stream of a StreamGraph's capture: launch kernels on it, record events, wait on other streams."""

    def __init__(self, owner: "StreamGraph", name: str) -> None:
        self.owner, self.name = owner, name
        self.last: Node | None = None
        self.joined = name == owner.main_name  # the capturing stream itself is always part of the capture
        self._waits: list[Node] = Record()

    def launch(self, fn: Callable, *inputs: Buffer, name: str | None = None, kernel_us: float | None = None,
               out: Buffer | None = None) -> Buffer:
        """Launch a kernel on this stream during capture: it depends on this stream's last kernel and its waits."""
        owner = self.owner
        if owner.graph.state != "capturing":
            raise GraphStateError("launch on a toy stream inside `with sg.capture():`; a StreamGraph only captures.")
        if not self.joined:
            raise CaptureError(
                f"stream {self.name!r} is not part of the capture: before launching on it, make it wait on the "
                f"capturing stream ({self.name}.wait_stream({owner.main_name})), the fork that brings it in. "
                f"(CUDA would not refuse this launch: the kernel would run eagerly, outside the graph. A later join "
                f"({owner.main_name}.wait_stream({self.name})) would then fail the capture with "
                f"cudaErrorStreamCaptureIsolation; with no join the error is silent. The toy makes it loud here.)"
            )
        result = launch(fn, *inputs, name=name, kernel_us=kernel_us, out=out)
        node = owner.graph.nodes[-1]
        deps = self._waits + ([self.last] if self.last is not None else [])
        owner.deps[id(node)] = frozenset(id(d) for d in deps)
        owner.stream_of[id(node)] = self.name
        self.last, self._waits = node, []
        return result

    def record_event(self) -> ToyEvent:
        """An event after this stream's work so far."""
        return ToyEvent(self.name, self.last)

    def wait_event(self, event: ToyEvent) -> None:
        """Later kernels on this stream wait for the event's stream up to the event (a fork or a join)."""
        if not isinstance(event, ToyEvent):
            raise InvalidArgumentError(f"wait_event takes an event from record_event(), got {event!r}.")
        source = self.owner.streams[event.stream]
        if not source.joined:
            if self.owner.graph.state == "capturing":
                self.owner.graph._invalidate("a wait on uncaptured work")
            raise CaptureError(
                f"stream {event.stream!r} is not part of the capture: waiting on it waits on uncaptured work, "
                f"which invalidates the capture (CUDA: cudaErrorStreamCaptureIsolation). Fork it first: "
                f"{event.stream}.wait_stream({self.owner.main_name}) before launching on it.")
        self.joined = True
        if event.node is not None:
            self._waits.append(event.node)
        if self.name == self.owner.main_name:
            self.owner._joined_up_to[event.stream] = event.node

    def wait_stream(self, other: "ToyStream") -> None:
        """Wait for everything `other` has launched so far (record an event on it and wait on that)."""
        if not isinstance(other, ToyStream):
            raise InvalidArgumentError(f"wait_stream takes another toy stream, got {other!r}.")
        self.wait_event(other.record_event())

    def __repr__(self) -> str:
        return f"ToyStream({self.name!r})"


class StreamGraph(Guarded):
    """A toy graph captured from several streams: a DAG whose independent branches overlap at replay."""

    def __init__(self, device: ToyDevice | None = None, *, name: str = "dag", main: str = "main") -> None:
        self.device = device or default_device()
        self.graph = ToyGraph(self.device, name=name)
        self.main_name = main
        self.streams: dict[str, ToyStream] = RecordDict({main: ToyStream(self, main)})
        self.deps: dict[int, frozenset[int]] = RecordDict()  # guarded: the DAG replay draws is the captured one
        self.stream_of: dict[int, str] = RecordDict()
        self._joined_up_to: dict[str, Node | None] = RecordDict()
        self.last_replay_us = 0.0

    @property
    def main(self) -> ToyStream:
        """The capturing stream."""
        return self.streams[self.main_name]

    def stream(self, name: str) -> ToyStream:
        """A side stream, by name (made on first use)."""
        if not isinstance(name, str) or not name:
            raise InvalidArgumentError(f"a stream is named by a non-empty string, got {name!r}.")
        if name not in self.streams:
            self.streams[name] = ToyStream(self, name)
        return self.streams[name]

    @contextmanager
    def capture(self) -> Iterator["StreamGraph"]:
        """Capture the block; at the end every forked stream must have rejoined the capturing stream."""
        with graph(self.graph):
            yield self
            unjoined = [s.name for s in self.streams.values() if s.name != self.main_name and s.joined
                        and s.last is not None and self._joined_up_to.get(s.name, None) is not s.last]
            if unjoined:
                self.graph._invalidate("a forked stream that never rejoined")
                raise CaptureError(
                    f"capture ended with work on stream(s) {unjoined} that {self.main_name!r} never waited for "
                    f"(CUDA: cudaErrorStreamCaptureUnjoined). Join each one before the capture ends: "
                    f"{self.main_name}.wait_stream({unjoined[0]})."
                )

    def _ancestors(self) -> dict[int, set[int]]:
        every: dict[int, set[int]] = {}
        for node in self.graph.nodes:  # recording order is a topological order
            key = id(node)
            found: set[int] = set()
            for d in self.deps.get(key, ()):
                found |= {d} | every.get(d, set())
            every[key] = found
        return every

    @property
    def races(self) -> list[tuple[str, str]]:
        """Pairs of kernels with no path between them where one writes a buffer the other reads or writes."""
        ancestors, nodes, found = self._ancestors(), self.graph.nodes, []
        for i, a in enumerate(nodes):
            for b in nodes[i + 1:]:
                if id(a) in ancestors[id(b)]:
                    continue
                a_reads = {id(x._storage) for x in a.inputs}
                b_reads = {id(x._storage) for x in b.inputs}
                wa, wb = id(a.output._storage), id(b.output._storage)
                if wa == wb or wa in b_reads or wb in a_reads:
                    found.append((a.name, b.name))
        return found

    def replay(self) -> None:
        """One graph launch: compute every kernel, and draw each as soon as all it depends on has finished."""
        clock, nodes = self.device.clock, self.graph.nodes
        gpu_free_before = clock.gpu_free_us
        self.graph.replay()  # computes the values in recording order and charges the launch on the clock
        events = clock.timeline.events
        del events[len(events) - len(nodes):]  # replace the graph's one-lane bars with the DAG's lanes
        ready_at = max(clock.cpu_us, gpu_free_before)
        ends: dict[int, float] = {}
        for node in nodes:
            start = max([ready_at] + [ends[d] for d in self.deps.get(id(node), ())])
            ends[id(node)] = start + node.kernel_us
            events.append(Event(f"gpu:{self.stream_of.get(id(node), self.main_name)}", start, ends[id(node)],
                                node.name, "kernel", clock.step))
        finish = max(ends.values(), default=ready_at)
        clock.gpu_free_us = finish
        self.last_replay_us = finish - ready_at

    @property
    def serial_us(self) -> float:
        """GPU time of the kernels one after another: what one stream would take."""
        return sum(n.kernel_us for n in self.graph.nodes)

    def __repr__(self) -> str:
        return (f"StreamGraph({self.graph.name!r}, {count(len(self.graph.nodes), 'kernel')} on "
                f"{sorted({*self.stream_of.values()})}, last replay {self.last_replay_us:.1f} µs of GPU time)")
