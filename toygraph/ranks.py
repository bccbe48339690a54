"""Ranks: several toy GPUs on one communicator, and collectives that finish only when every rank reaches the same one.

A job on several GPUs runs one process per GPU, a *rank*. An all-reduce is a rendezvous: each rank's
kernel waits until every rank of the communicator has reached *its* all-reduce, then all of them sum.
NCCL pairs them by order alone: the k-th collective a rank issues meets the k-th of every other rank.
Capture does not change that. NCCL's guide ("Using NCCL with CUDA Graphs") says whether an operation
is graph-captured is "a collective property" that "must be uniform over all ranks", and the launch of
a graph holding a captured NCCL operation is itself collective: every rank present at the capture
must launch the graph derived from it. So every rank must capture the same collectives, in the same
order, at the same sizes, and replay them together. A rank that pads its batch to another size, or
skips a replay, leaves the others waiting in a collective: a hang, which only a timeout ends. The rule
that follows: the ranks agree on each step's batch first, then all pad to one capture size
(:func:`shared_bucket`), never each to the bucket of its own batch.

:class:`World` holds ``n`` :class:`Rank` s (each a toy device with one stream) and one communicator::

    world = World(2, timeout_steps=50)
    r0, r1 = world.ranks
    bufs = [r.tensor([float(r.index + 1)] * 4) for r in world.ranks]
    graphs = [r.graph("step") for r in world.ranks]
    for r, g, b in zip(world.ranks, graphs, bufs):
        with g.capture():
            r.launch(lambda x: [v * 2 for v in x], b, name="scale")
            r.all_reduce(b)
    for g in graphs:
        g.replay()
    world.synchronize()
    bufs[0].tolist()          # [6.0, 6.0, 6.0, 6.0]: (1*2) + (2*2), on both ranks

Had rank 1 captured ``r1.tensor([...] * 8)`` instead (padded to 8, rank 0 to 4), the same
``world.synchronize()`` raises :class:`CollectiveHang` after 50 steps without progress::

    rank 0 waits in all_reduce #1 (size 4, graph 'step' replay 1); rank 1 waits in all_reduce #1
    (size 8, graph 'step' replay 1): sizes differ: pad every rank to the same capture size, ...

Host code issues work (``launch``, ``all_reduce``, ``broadcast``, ``replay``) onto the rank's
stream and returns at once, as on a GPU; ``world.synchronize()`` (or ``rank.synchronize()``, or a
host read ``buf.tolist()``, which syncs) runs the streams. Each *step* every rank runs its local
kernels up to its next collective; a collective completes in the step where every rank's stream
is at a matching one (same operation, same size, same root, graphed on all or on none). A step in
which no rank can move counts against ``timeout_steps``, the toy's watchdog: when it runs out,
:class:`CollectiveHang` says which rank waits in which collective and which rank is elsewhere, and
the communicator is aborted (as PyTorch's NCCL watchdog aborts it after its timeout).

What else it shows:

* **Graphed and eager collectives on one communicator.** A collective captured on one rank and
  issued eagerly on another, at the same place in the order, is a mismatch (the uniformity rule
  above). Graph replays and eager collectives may otherwise be mixed on a communicator: NCCL
  supports "co-occurring outstanding NCCL launches from multiple CUDA graphs or a CUDA graph and
  non-captured NCCL calls" unless ``NCCL_GRAPH_MIXING_SUPPORT=0`` (default 1, since NCCL 2.13).
  With it 0, "correctness is only guaranteed" if the communicator never has (1) outstanding
  parallel graph launches on different streams, nor (2) an outstanding graph launch followed by a
  non-captured launch, whatever the stream dependencies. ``World(graph_mixing_support=False)``
  models case (2): an eager collective issued while a graph launch holding a collective is still
  outstanding on that rank raises :class:`GraphMixingError`; synchronize first. (The toy's trigger is
  narrower than NCCL's condition: it looks only for a collective of the replay still queued, where
  NCCL's outstanding launch is the whole graph until it completes; and real NCCL raises nothing, it
  just stops promising a right answer.) Why anyone turns it
  off: NCCL's docs report CUDA deadlocks with it on "when the graphs of multiple communicators are
  cudaGraphLaunch()'d from the same thread"
  (vllm-project/vllm#2770, a tensor-parallel all-reduce timing out, quotes that caveat).
* **Teardown order.** Every graph that captured a collective holds the communicator. Destroying it
  while such a graph is alive waits for the graph to go (pytorch/pytorch#115388:
  ``destroy_process_group()`` hangs after a graph captured NCCL operations; a comment there reports
  ``del graph`` as the fix, and NVIDIA/TransformerEngine#2367 added ``reset()`` for graphs because of it). :meth:`World.destroy` with a live graph raises
  :class:`CommunicatorHang` naming the graphs; :meth:`RankGraph.free` each one, then destroy.

* **A custom all-reduce.** :class:`CustomAllReduce` is vLLM's peer-to-peer all-reduce in miniature:
  a captured call gets an empty slot for its peers' addresses, which
  :meth:`CustomAllReduce.register_graph_buffers` fills after the capture; a replay before that
  raises :class:`UnregisteredBufferError` (an illegal address on GPUs: sgl-project/sglang#14193).

Where the toy simplifies, said plainly:

* A hang is detected, not suffered: the toy knows no rank can move, so its steps are a count, not
  time. A real hang is silent until a timeout fires, and a collective replayed from a graph is not
  watched by PyTorch's NCCL watchdog (ProcessGroupNCCL enqueues no work item for it during capture,
  pytorch/pytorch#103503, which relanded #102542), so set a timeout of your own around replays
  (``graphcourse.gpulib.multirank`` kills its ranks after one).
* What a mismatch does on real NCCL is not specified. The toy reports every mismatch as a hang,
  except that ``World(on_size_mismatch="wrong_sum")`` lets an all-reduce of different sizes
  complete with a silently wrong sum: users report both outcomes for mismatched sizes
  (NVIDIA/nccl#1394: one size pair hangs, another "can finish properly"; NVIDIA/nccl#1417: "some
  shapes may cause the process to hang ... incorrect results may be calculated at times"). The
  toy's wrong sum is one illustrative result (each element summed over the ranks that have it,
  so the longer rank's tail lacks the shorter rank's part), not NCCL's algorithm.
* One stream per rank, so case (1) of the mixing rule (parallel graph launches) cannot happen
  here, nor the same-thread launches behind the hangs the variable works around.
* Destroying the communicator is local here; ``ncclCommDestroy`` is itself collective (a rank that
  exited early leaves the others waiting), which the toy does not show.
* Kernels work in place on one buffer; captured kernels are frozen (:mod:`toygraph.freeze`).

Sources read: NCCL user guide, "Using NCCL with CUDA Graphs"
(https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/usage/cudagraph.html) and, for
``NCCL_GRAPH_MIXING_SUPPORT``, the NCCL 2.19 guide's ``env.rst`` (read in the copy
ouchyang/nccl-2.19-docs-cn@1f6e20581d8c0158eebc837102a44d5a78d6c3bd, docs/source/env.rst);
vllm-project/vllm#2770; pytorch/pytorch#115388; pytorch/pytorch#103503 (its commit message);
NVIDIA/TransformerEngine#2367; NVIDIA/nccl#1394 and #1417.
"""

from __future__ import annotations

from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Callable, Iterator, Sequence

from ._guard import Guarded, Record
from .buckets import bucket_for
from .errors import GraphStateError, InvalidArgumentError, ToyGraphError
from .freeze import freeze

__all__ = ["World", "Rank", "shared_bucket", "RankGraph", "RankBuffer", "Collective", "CollectiveHang", "CommunicatorHang",
           "GraphMixingError", "CommunicatorDestroyedError", "CustomAllReduce", "UnregisteredBufferError"]


def shared_bucket(batch_sizes: Sequence[int], buckets: Sequence[int]) -> int:
    """The one capture size every rank pads to: the smallest bucket that fits the largest rank's batch.

    Padding each rank to the bucket of its *own* batch gives ranks with different batches different
    collective sizes, which hang; the ranks must agree on the batch first, then all pad to one bucket.
    """
    if isinstance(batch_sizes, (str, bytes)) or not isinstance(batch_sizes, Sequence) or not batch_sizes:
        raise InvalidArgumentError(f"batch_sizes lists each rank's batch size, got {batch_sizes!r}.")
    bucket = bucket_for(max(batch_sizes), buckets)
    if bucket is None:
        raise InvalidArgumentError(f"the largest rank's batch, {max(batch_sizes)}, fits no bucket of {tuple(buckets)}: "
                                   "every rank must then run that step eagerly, together.")
    return bucket


class CollectiveHang(ToyGraphError, TimeoutError):
    """Ranks wait in collectives that can never complete; raised after the toy's watchdog budget of steps.

    ``waits`` maps each rank to what it was doing (``"waits in all_reduce #3 (size 8, eager)"`` or
    ``"is elsewhere: ..."``); ``steps`` is how many steps passed without progress.
    """

    def __init__(self, message: str, waits: dict[int, str], steps: int) -> None:
        self.waits = waits
        self.steps = steps
        super().__init__(message)


class CommunicatorHang(CollectiveHang):
    """Destroying the communicator waits for graphs that still hold it (pytorch/pytorch#115388)."""


class GraphMixingError(ToyGraphError, RuntimeError):
    """With NCCL_GRAPH_MIXING_SUPPORT=0, an eager collective was issued while a graph launch with collectives was outstanding."""


class UnregisteredBufferError(ToyGraphError, RuntimeError):
    """A custom all-reduce reads a peer buffer whose address was never exchanged (CustomAllReduce)."""


class CommunicatorDestroyedError(ToyGraphError, RuntimeError):
    """A collective on a communicator that was destroyed, or aborted after a hang."""


class RankBuffer(Guarded):
    """A buffer on one rank's toy device; ``tolist()`` is a host read, so it waits for that rank's stream."""

    def __init__(self, rank: "Rank", values: list[float]) -> None:
        self.rank = rank
        self._values = values

    def __len__(self) -> int:
        return len(self._values)

    def copy_(self, values: Sequence) -> None:
        """Queue a copy of new host values into this buffer (same size), in order with the rank's other work."""
        new = _check_values(values)
        if len(new) != len(self._values):
            raise InvalidArgumentError(f"copy_ of {len(new)} values into a buffer of {len(self._values)}: a captured "
                                       "buffer keeps its size; pad the new values to it.")
        self.rank.launch(lambda _old: list(new), self, name="copy_")

    def tolist(self) -> list[float]:
        """Copy to the host: a sync, so the rank's queued work (collectives included) runs first."""
        self.rank.synchronize()
        return list(self._values)

    def __repr__(self) -> str:
        return f"RankBuffer(rank {self.rank.index}, size {len(self._values)})"


@dataclass(frozen=True)
class Collective:
    """One collective call: the operation, its buffer and size, its root, and the graph it was captured in (None: eager)."""

    op: str
    buffer: RankBuffer
    size: int
    root: int | None = None
    graph: str | None = None
    slot: int | None = None  # a custom all-reduce captured in a graph: its rank's slot of peer addresses


@dataclass(frozen=True)
class _Kernel:
    fn: Callable
    buffer: RankBuffer
    name: str


@dataclass(frozen=True)
class _Queued:
    """Work on a rank's stream: a kernel or a collective, eager (replay None) or from a graph's replay."""

    work: _Kernel | Collective
    replay: int | None = None


def _check_values(values: Sequence) -> list[float]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
        raise InvalidArgumentError(f"a rank's buffer is made from a non-empty list of numbers, got {values!r}.")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        raise InvalidArgumentError(f"a rank's buffer holds numbers only, got {list(values)!r}.")
    return [float(v) for v in values]


class RankGraph(Guarded):
    """A graph captured on one rank: kernels and collectives, replayed together on that rank's stream."""

    def __init__(self, rank: "Rank", name: str) -> None:
        self.rank, self.name = rank, name
        self.ops: list[_Kernel | Collective] = Record()
        self.state = "recording"  # -> "capturing" -> "captured" -> "freed"
        self.replays = 0

    @property
    def collectives(self) -> list[Collective]:
        """The collectives this graph captured, in order."""
        return [op for op in self.ops if isinstance(op, Collective)]

    @property
    def holds_communicator(self) -> bool:
        """Whether this graph keeps the communicator alive: it captured a collective and was not freed."""
        return self.state == "captured" and any(c.op != "custom_all_reduce" for c in self.collectives)

    @contextmanager
    def capture(self) -> Iterator["RankGraph"]:
        """Record this rank's launches and collectives in the block into the graph (nothing runs)."""
        rank = self.rank
        if self.state != "recording":
            raise GraphStateError(f"graph {self.name!r} on rank {rank.index} was already captured ({self.state}): "
                                  "a graph is captured once. Make a new one with rank.graph(name).")
        if rank.capturing is not None:
            raise GraphStateError(f"rank {rank.index} is already capturing graph {rank.capturing.name!r}.")
        rank.world._check_alive("capture a graph")
        rank.capturing, self.state = self, "capturing"
        try:
            yield self
        except BaseException:
            self.state = "recording"
            self.ops.clear()
            raise
        finally:
            rank.capturing = None
        self.state = "captured"
        if self.collectives:
            rank.graphs.append(self)

    def replay(self) -> None:
        """Launch the graph on its rank's stream (returns at once; the collectives wait for the other ranks)."""
        self.rank.replay(self)

    def free(self) -> None:
        """Release the graph (``del g`` or ``g.reset()`` in PyTorch): it no longer holds the communicator."""
        if self.state == "capturing":
            raise GraphStateError(f"graph {self.name!r} is still capturing: leave its `with` block first.")
        if self in self.rank.graphs:
            self.rank.graphs.remove(self)
        self.state = "freed"

    def __repr__(self) -> str:
        return (f"RankGraph({self.name!r} on rank {self.rank.index}, {self.state}, {len(self.ops)} ops, "
                f"{len(self.collectives)} collectives, replayed {self.replays}x)")


class Rank(Guarded):
    """One rank: a toy GPU with one stream, on the world's communicator."""

    def __init__(self, world: "World", index: int) -> None:
        self.world, self.index = world, index
        self.stream: deque[_Queued] = deque()
        self.completed = 0
        """Collectives this rank has completed on the communicator: the next one it reaches is number completed + 1."""
        self.last_completed = ""
        self.capturing: RankGraph | None = None
        self.graphs: list[RankGraph] = Record()
        """Live graphs on this rank that captured a collective: each holds the communicator."""

    def tensor(self, values: Sequence) -> RankBuffer:
        """A buffer on this rank's device, filled with values."""
        return RankBuffer(self, _check_values(values))

    def _own(self, buf: RankBuffer, what: str) -> None:
        if not isinstance(buf, RankBuffer):
            raise InvalidArgumentError(f"{what} takes a buffer made with rank.tensor([...]), got {buf!r}.")
        if buf.rank is not self:
            raise InvalidArgumentError(f"{what} on rank {self.index} got a buffer of rank {buf.rank.index}: each rank "
                                       "works on its own device's memory.")

    def launch(self, fn: Callable, buf: RankBuffer, *, name: str | None = None) -> None:
        """Queue a kernel that rewrites buf in place (fn takes the list of values and returns as many)."""
        if not callable(fn):
            raise InvalidArgumentError(f"a kernel is a function such as `lambda x: [v * 2 for v in x]`, got {fn!r}.")
        self._own(buf, "launch")
        label = name or getattr(fn, "__name__", "kernel")
        self._issue(_Kernel(freeze(fn).fn, buf, label))  # its Python values as they are at launch

    def all_reduce(self, buf: RankBuffer) -> None:
        """Queue an all-reduce (sum) of buf over every rank: it completes when every rank reaches the same one."""
        self._own(buf, "all_reduce")
        self._collective(Collective("all_reduce", buf, len(buf)))

    def broadcast(self, buf: RankBuffer, root: int = 0) -> None:
        """Queue a broadcast of rank root's buf to every rank's buf."""
        self._own(buf, "broadcast")
        if isinstance(root, bool) or not isinstance(root, int) or not 0 <= root < len(self.world.ranks):
            raise InvalidArgumentError(f"root is a rank between 0 and {len(self.world.ranks) - 1}, got {root!r}.")
        self._collective(Collective("broadcast", buf, len(buf), root))

    def _collective(self, c: Collective) -> None:
        self.world._check_alive(c.op)
        if self.capturing is not None:
            c = replace(c, graph=self.capturing.name)
        elif not self.world.graph_mixing_support:
            outstanding = sorted({q.work.graph for q in self.stream if isinstance(q.work, Collective) and q.work.graph})
            if outstanding:
                raise GraphMixingError(
                    f"rank {self.index} issues an eager {c.op} while a launch of graph {outstanding[0]!r}, which holds "
                    "collectives, is still outstanding on its stream. With NCCL_GRAPH_MIXING_SUPPORT=0 NCCL guarantees "
                    "correctness only if an outstanding graph launch is never followed by a non-captured launch on the "
                    "communicator, whatever the stream dependencies. Synchronize after the replay first, or leave "
                    "graph mixing support on (the default, 1).")
        self._issue(c)

    def _issue(self, work: _Kernel | Collective) -> None:
        if self.capturing is not None:
            self.capturing.ops.append(work)
        else:
            self.stream.append(_Queued(work))

    def graph(self, name: str = "graph") -> RankGraph:
        """A new, empty graph on this rank: capture into it with ``with g.capture():``."""
        if not isinstance(name, str) or not name:
            raise InvalidArgumentError(f"a graph is named by a non-empty string, got {name!r}.")
        return RankGraph(self, name)

    def replay(self, g: RankGraph) -> None:
        """Queue one launch of graph g on this rank's stream."""
        if not isinstance(g, RankGraph) or g.rank is not self:
            raise InvalidArgumentError(f"rank {self.index} replays graphs captured on it, got {g!r}.")
        if g.state != "captured":
            raise GraphStateError(f"graph {g.name!r} on rank {self.index} cannot replay: it is {g.state}.")
        if self.capturing is not None:
            raise GraphStateError(f"rank {self.index} is capturing {self.capturing.name!r}: replay after the capture.")
        if g.collectives:
            self.world._check_alive(f"replay graph {g.name!r}")
        g.replays += 1
        self.stream.extend(_Queued(op, g.replays) for op in g.ops)

    def synchronize(self) -> None:
        """Wait until this rank's stream is empty (its collectives need the other ranks to reach theirs)."""
        if self.capturing is not None:
            raise GraphStateError(f"rank {self.index} synchronizes while capturing {self.capturing.name!r}: a sync is "
                                  "not allowed during capture.")
        self.world._run(lambda: not self.stream)

    def _where(self) -> str:
        """What this rank is doing now, for a hang report."""
        if not self.stream:
            last = f"; its last collective was #{self.completed} ({self.last_completed})" if self.completed else \
                "; it has completed no collective"
            return f"rank {self.index} is elsewhere: nothing queued on its stream{last}"
        head = self.stream[0]
        c = head.work
        assert isinstance(c, Collective)
        return f"rank {self.index} waits in {_describe(c, self.completed + 1, head.replay)}"

    def __repr__(self) -> str:
        return f"Rank({self.index}, {len(self.stream)} queued, {self.completed} collectives done)"


def _describe(c: Collective, seq: int, replay: int | None) -> str:
    root = f", root {c.root}" if c.root is not None else ""
    origin = f"graph {c.graph!r} replay {replay}" if c.graph else "eager"
    return f"{c.op} #{seq} (size {c.size}{root}, {origin})"


class World(Guarded):
    """n toy ranks on one communicator, with the toy's watchdog: a hang is reported after timeout_steps idle steps."""

    def __init__(self, n_ranks: int = 2, *, timeout_steps: int = 100, graph_mixing_support: bool = True,
                 on_size_mismatch: str = "hang") -> None:
        if isinstance(n_ranks, bool) or not isinstance(n_ranks, int) or n_ranks < 2:
            raise InvalidArgumentError(f"a world has at least 2 ranks, got {n_ranks!r}.")
        if isinstance(timeout_steps, bool) or not isinstance(timeout_steps, int) or timeout_steps < 1:
            raise InvalidArgumentError(f"timeout_steps is a whole number of steps >= 1, got {timeout_steps!r}.")
        if not isinstance(graph_mixing_support, bool):
            raise InvalidArgumentError(f"graph_mixing_support is True or False, got {graph_mixing_support!r}.")
        if on_size_mismatch not in ("hang", "wrong_sum"):
            raise InvalidArgumentError(f"on_size_mismatch is 'hang' or 'wrong_sum', got {on_size_mismatch!r}.")
        self.timeout_steps = timeout_steps
        self.graph_mixing_support = graph_mixing_support
        self.on_size_mismatch = on_size_mismatch
        self.custom: CustomAllReduce | None = None  # a custom all-reduce over these ranks, if one was made
        self.ranks = tuple(Rank(self, i) for i in range(n_ranks))
        self.steps = 0
        """Steps run so far, over every synchronize: bounded, since each wait gives up after timeout_steps."""
        self.state = "ready"  # -> "destroyed" or "aborted: <why>"

    def __getitem__(self, index: int) -> Rank:
        return self.ranks[index]

    def _check_alive(self, what: str) -> None:
        if self.state != "ready":
            raise CommunicatorDestroyedError(
                f"cannot {what}: the communicator is {self.state}. After a destroy or an abort, make a new World "
                "(a new process group) and capture new graphs on it.")

    def synchronize(self) -> None:
        """Run every rank's stream until all are empty, or raise CollectiveHang when no rank can move."""
        self._run(lambda: not any(r.stream for r in self.ranks))

    def _run(self, done: Callable[[], bool]) -> None:
        idle = 0
        while not done():
            self.steps += 1
            if self._step():
                idle = 0
                continue
            idle += 1
            if idle >= self.timeout_steps:
                self._hang(idle)

    def _step(self) -> bool:
        """One step: each rank runs its kernels up to its next collective; a collective every rank reached completes."""
        moved = False
        for r in self.ranks:
            while r.stream and isinstance(r.stream[0].work, _Kernel):
                k = r.stream.popleft().work
                values = list(k.fn(list(k.buffer._values)))
                if len(values) != len(k.buffer):
                    raise InvalidArgumentError(f"kernel {k.name!r} on rank {r.index} returned {len(values)} values for "
                                               f"a buffer of {len(k.buffer)}: a kernel here rewrites its buffer in place.")
                k.buffer._values = [float(v) for v in values]
                moved = True
        heads = [r.stream[0] if r.stream else None for r in self.ranks]
        if all(heads):
            why = _mismatch([h.work for h in heads])  # type: ignore[union-attr]
            if why is None or (why.startswith("sizes differ") and self.on_size_mismatch == "wrong_sum"
                               and len({h.work.op for h in heads}) == 1):  # type: ignore[union-attr]
                self._complete([h.work for h in heads])  # type: ignore[union-attr]
                moved = True
        return moved

    def _complete(self, calls: list[Collective]) -> None:
        c = calls[0]
        if c.op == "custom_all_reduce":
            custom = self.custom
            assert custom is not None  # only a CustomAllReduce issues these
            peers = [custom._peers(r, x) for r, x in zip(self.ranks, calls)]
            total = [sum(b._values[i] for b in peers[0]) for i in range(c.size)]
            for x in calls:
                x.buffer._values = list(total)
        elif c.op == "all_reduce":
            longest = max(x.size for x in calls)
            total = [sum(x.buffer._values[i] for x in calls if i < x.size) for i in range(longest)]
            for x in calls:
                x.buffer._values = total[:x.size]
        else:
            source = calls[c.root].buffer._values  # type: ignore[index]
            for x in calls:
                x.buffer._values = (source + x.buffer._values[len(source):])[:x.size]
        for r in self.ranks:
            r.completed += 1
            r.last_completed = r.stream[0].work.op  # type: ignore[union-attr]
            r.stream.popleft()

    def _hang(self, idle: int) -> None:
        waits = {r.index: r._where() for r in self.ranks}
        elsewhere = [r.index for r in self.ranks if not r.stream]
        seq = min(r.completed for r in self.ranks if r.stream) + 1
        if elsewhere:
            who = ", ".join(str(i) for i in elsewhere)
            why = (f"rank {who} never reached collective #{seq}. Every rank must replay the same graphs the same "
                   "number of times and issue the same eager collectives: a rank that skips a replay leaves the "
                   "others waiting")
        else:
            why = _mismatch([r.stream[0].work for r in self.ranks]) or "no rank can move"  # type: ignore[misc]
        message = (f"{'; '.join(waits.values())}: {why}. No rank made progress for {idle} steps (the toy's "
                   "watchdog), so the communicator is aborted; on GPUs this is a hang that only a timeout ends.")
        self.state = "aborted after a hang"
        for r in self.ranks:
            r.stream.clear()
        raise CollectiveHang(message, waits, idle)

    def destroy(self) -> None:
        """Destroy the communicator (``destroy_process_group()``): first every graph holding it must be freed."""
        self._check_alive("destroy the communicator")
        self.synchronize()
        holding = [g for r in self.ranks for g in r.graphs if g.holds_communicator]
        if holding:
            idle = 0
            while idle < self.timeout_steps:  # nothing frees a graph while destroy waits: the wait cannot end
                self.steps += 1
                idle += 1
            waits = {r.index: (f"rank {r.index} waits in destroy for its graph(s) "
                               f"{[g.name for g in r.graphs if g.holds_communicator]} that hold the communicator")
                     for r in self.ranks if any(g.holds_communicator for g in r.graphs)}
            raise CommunicatorHang(
                f"{'; '.join(waits.values())}. Destroying a communicator waits until every graph that captured a "
                "collective on it is gone (pytorch/pytorch#115388: destroy_process_group() hangs after graph capture "
                "of NCCL operations). Safe order: free the graphs first (g.free() here; del g or g.reset() in "
                f"PyTorch), then destroy. No progress for {idle} steps.", waits, idle)
        self.state = "destroyed"

    def __repr__(self) -> str:
        return f"World({len(self.ranks)} ranks, {self.state}, {self.steps} steps run)"


def _mismatch(calls: list[Collective]) -> str | None:
    """Why these collectives (one per rank, each its rank's next) cannot complete together; None when they match."""
    def differ(attr: str) -> bool:
        return len({getattr(c, attr) for c in calls}) > 1

    if differ("op"):
        return "operations differ: every rank must call the same collectives in the same order"
    if {c.graph is None for c in calls} == {True, False}:
        return ("graphed on some ranks, eager on others: whether a collective is graph-captured must be the same "
                "on every rank (NCCL's CUDA-graph guide)")
    if differ("size"):
        return ("sizes differ: pad every rank to the same capture size, so that every rank replays (and "
                "captured) collectives of the same size")
    if differ("root"):
        return "broadcast roots differ: every rank must name the same root"
    return None


class CustomAllReduce(Guarded):
    """A toy of vLLM's custom all-reduce: each rank's kernel reads its peers' buffers directly.

    No NCCL: the ranks exchange the addresses of their buffers (IPC handles on GPUs) once, and the
    kernel sums what it finds at those addresses. Two ways to get there, as in vLLM's
    ``CustomAllreduce`` (``vllm/distributed/device_communicators/custom_all_reduce.py`` and
    ``csrc/custom_all_reduce.cuh``):

    * eager: :meth:`register_buffer` exchanges one buffer per rank up front; an eager
      :meth:`all_reduce` of a buffer never registered raises at once ("buffer address ... is not
      registered!" in vLLM);
    * captured: inside a capture the kernel is recorded with an empty slot for the peers' addresses
      (``d_rank_data_base_ + graph_unreg_buffers_.size()``) and the buffer is remembered; the
      addresses only exist once capture has allocated them, and exchanging them is host work that a
      capture cannot hold, so :meth:`register_graph_buffers`, called on every rank **after** the
      capture (vLLM's ``capture()`` context manager does it on exit), fills the slots. A replay
      before that reads an empty slot: :class:`UnregisteredBufferError` here, unset pointers
      (an illegal address, or garbage) on GPUs.

    Like a collective, a custom all-reduce completes when every rank reaches it, in the same order;
    the toy reuses the world's rendezvous for that (the real kernel spins on flags in peer memory).
    Where the toy simplifies: one buffer per call, sums only, no staging copy for unregistered eager
    inputs (vLLM copies those into its own registered buffer first).
    """

    def __init__(self, world: World) -> None:
        if not isinstance(world, World):
            raise InvalidArgumentError(f"a custom all-reduce spans the ranks of a World, got {world!r}.")
        if world.custom is not None:
            raise InvalidArgumentError("this world already has a custom all-reduce: use world.custom.")
        self.world = world
        self.registered: list[dict[int, list[RankBuffer]]] = [{} for _ in world.ranks]
        self.graph_unreg: list[list[RankBuffer]] = [[] for _ in world.ranks]  # captured, not yet exchanged
        self.slots: list[list[list[RankBuffer] | None]] = [[] for _ in world.ranks]
        world.custom = self

    def register_buffer(self, bufs: Sequence[RankBuffer]) -> None:
        """Exchange one buffer per rank, in rank order (eager use): afterwards each rank can all-reduce its own."""
        if len(bufs) != len(self.world.ranks) or any(not isinstance(b, RankBuffer) for b in bufs):
            raise InvalidArgumentError(f"register_buffer takes one buffer per rank, {len(self.world.ranks)} in all.")
        for r, b in zip(self.world.ranks, bufs):
            r._own(b, "register_buffer")
            if r.capturing is not None:
                raise GraphStateError(f"rank {r.index} is capturing {r.capturing.name!r}: exchanging addresses is "
                                      "host work a capture cannot hold; register before or after it.")
        for r, b in zip(self.world.ranks, bufs):
            self.registered[r.index][id(b)] = list(bufs)

    def all_reduce(self, rank: "Rank | int", buf: RankBuffer) -> None:
        """Queue rank's custom all-reduce (sum) of buf; every rank must reach its own, in the same order."""
        r = self.world[rank] if isinstance(rank, int) and not isinstance(rank, bool) else rank
        if not isinstance(r, Rank) or r.world is not self.world:
            raise InvalidArgumentError(f"all_reduce takes one of this world's ranks (or its index), got {rank!r}.")
        r._own(buf, "custom all_reduce")
        if r.capturing is not None:
            slot = len(self.graph_unreg[r.index]) + len(self.slots[r.index])
            self.graph_unreg[r.index].append(buf)
            r._collective(Collective("custom_all_reduce", buf, len(buf), slot=slot))
            return
        if id(buf) not in self.registered[r.index]:
            raise UnregisteredBufferError(
                f"rank {r.index}'s eager custom all-reduce of a buffer never registered: its peers do not know its "
                "address (vLLM: \"buffer address ... is not registered!\"). Register it with register_buffer() on "
                "every rank first, or copy the input into a registered buffer, as vLLM's all_reduce_unreg does.")
        r._collective(Collective("custom_all_reduce", buf, len(buf)))

    def register_graph_buffers(self) -> int:
        """After capture, on every rank at once: exchange the captured buffers' addresses and fill the slots.

        Returns how many addresses each rank registered. vLLM does not deduplicate them: a rank may get
        the same address twice where another rank does not.
        """
        busy = [r.index for r in self.world.ranks if r.capturing is not None]
        if busy:
            raise GraphStateError(f"rank {busy[0]} is still capturing: register the graph buffers after the capture "
                                  "(vLLM's CustomAllreduce.capture() does it when its block ends).")
        counts = [len(u) for u in self.graph_unreg]
        if len(set(counts)) > 1:
            raise InvalidArgumentError(
                f"the ranks captured different numbers of custom all-reduces ({counts}): the i-th address of one "
                "rank pairs with the i-th of every other, so every rank must capture the same calls in the same order.")
        for i in range(counts[0]):
            peers = [self.graph_unreg[r][i] for r in range(len(self.world.ranks))]
            for r in range(len(self.world.ranks)):
                self.slots[r].append(peers)
        for u in self.graph_unreg:
            u.clear()
        return counts[0]

    def _peers(self, rank: "Rank", c: Collective) -> list[RankBuffer]:
        if c.slot is None:
            return self.registered[rank.index][id(c.buffer)]
        if c.slot < len(self.slots[rank.index]):
            peers = self.slots[rank.index][c.slot]
            if peers is not None:
                return peers
        raise UnregisteredBufferError(
            f"rank {rank.index}'s custom all-reduce in graph {c.graph!r} reads its peers' addresses from slot {c.slot}, "
            "which register_graph_buffers() has not filled: on GPUs the kernel follows unset pointers (an illegal "
            "address, or garbage). Call register_graph_buffers() on every rank after the capture and before the "
            "first replay, as vLLM's CustomAllreduce.capture() does on exit.")

    def __repr__(self) -> str:
        pending = len(self.graph_unreg[0])
        return (f"CustomAllReduce({len(self.world.ranks)} ranks, {len(self.slots[0])} graph addresses registered, "
                f"{pending} captured and not yet registered)")

