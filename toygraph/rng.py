"""A random-number generator a graph can replay: each replay draws fresh numbers, as eager calls would.

A random kernel (dropout, sampling) is seeded from a generator's *seed* and *offset*: the
offset says how far along its stream of random numbers the generator is. Eagerly, each call
passes the current offset to its kernel and moves the offset on. Baked into a graph, that
offset would repeat the same "random" numbers at every replay. PyTorch avoids this
(``aten/src/ATen/cuda/CUDAGeneratorImpl.cpp``): during capture a random kernel reads the seed and
a base offset from *device memory* and adds its own offset inside the graph; the graph records
its whole-graph increment; before each replay, ``replay_prologue`` writes the generator's
current seed and offset into that memory and moves the offset on by the increment. So replay
``k`` draws what the ``k``-th eager run of the same step would have drawn.

Which generators a graph looks after: the default generator of the device is registered with every
capture (``CUDAGraph::capture_begin``); any other generator must be registered before capture with
``graph.register_generator_state(gen)`` (``torch/cuda/graphs.py``; pytorch/pytorch#114068). A generator
the graph does not know, used during capture, is refused by ``CUDAGeneratorState::increase`` ("Attempt
to increase offset for a CUDA generator not in capture mode."). ``ToyGenerator(default=False)`` is such
another generator: :meth:`ToyGenerator.register` is its ``register_generator_state``, and without it
:func:`rand` raises :class:`~toygraph.errors.CaptureError` during capture.

:class:`ToyGenerator` and :func:`rand` do the same. Where the toy simplifies: its "random"
numbers come from Python's ``random`` seeded with ``(seed, position)``, not Philox, and offsets
count values rather than Philox's groups of four.
"""

from __future__ import annotations

import random

from ._guard import Guarded, Record, RecordDict, RecordSet
from .capture import ToyGraph, launch
from .errors import CaptureError, InvalidArgumentError
from .memory import Buffer, ToyDevice, default_device

__all__ = ["ToyGenerator", "rand", "random_values"]


def random_values(seed: int, offset: int, n: int) -> list[float]:
    """The n numbers of the stream `seed` from position `offset` on (the same numbers whoever asks)."""
    return [random.Random(f"{seed}:{offset + i}").random() for i in range(n)]


class ToyGenerator(Guarded):
    """A seed, an offset into its stream, and the device memory a captured random kernel reads them from."""

    def __init__(self, device: ToyDevice | None = None, seed: int = 0, *, default: bool = True) -> None:
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise InvalidArgumentError(f"seed must be a whole number, got {seed!r}.")
        self.device = device or default_device()
        self.seed = seed
        self.offset = 0
        """How many numbers of the stream have been handed out (advanced eagerly per call, per replay by graphs)."""
        self.state = self.device.tensor([seed, 0])
        """[seed, base offset] in device memory: what captured random kernels read at each replay."""
        self._increments: dict[int, list[int]] = RecordDict()  # per graph: its whole-graph increment
        self.default = bool(default)
        """The device's default generator, which every capture registers by itself (True), or another one."""
        self._registered: set[int] = RecordSet()

    def register(self, graph: ToyGraph) -> None:
        """``graph.register_generator_state(gen)`` before capture: the graph will move this generator on at replay."""
        if not isinstance(graph, ToyGraph):
            raise InvalidArgumentError(f"register takes a ToyGraph, got {graph!r}.")
        if graph.state == "capturing":
            raise CaptureError("register the generator before capture begins (PyTorch refuses it during capture).")
        self._registered.add(id(graph))

    def manual_seed(self, seed: int) -> None:
        """Restart the stream of `seed` from its beginning."""
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise InvalidArgumentError(f"seed must be a whole number, got {seed!r}.")
        self.seed, self.offset = seed, 0

    def _register(self, graph: ToyGraph) -> list[int]:
        if id(graph) not in self._increments:
            increment = Record([0])
            self._increments[id(graph)] = increment

            def replay_prologue() -> None:  # this replay's seed and offset into device memory, then move on
                self.state.copy_([self.seed, self.offset])
                self.offset += increment[0]

            graph._before_replay.append(replay_prologue)
        return self._increments[id(graph)]

    def whole_graph_increment(self, graph: ToyGraph) -> int:
        """How far one replay of `graph` moves this generator's offset (0 if the graph draws nothing)."""
        return self._increments.get(id(graph), [0])[0]

    def __repr__(self) -> str:
        return f"ToyGenerator(seed={self.seed}, offset={self.offset})"


def rand(generator: ToyGenerator, n: int, *, name: str = "rand") -> Buffer:
    """A buffer of n random numbers in [0, 1) drawn on the device: eagerly now, or at every replay once captured."""
    if not isinstance(generator, ToyGenerator):
        raise InvalidArgumentError(f"rand() takes a ToyGenerator, got {generator!r}.")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InvalidArgumentError(f"n must be a whole number >= 1, got {n!r}.")
    graph = generator.device.capturing
    if graph is None:  # eager: the kernel gets this call's seed and offset as arguments
        seed, offset = generator.seed, generator.offset
        generator.offset += n
        return launch(lambda state: random_values(seed, offset, n), generator.state, name=name)
    if not generator.default and id(graph) not in generator._registered:
        raise CaptureError(
            "this generator is not registered with the graph being captured (CUDA: 'Attempt to increase offset "
            "for a CUDA generator not in capture mode.'): call gen.register(graph) before capture, as "
            "graph.register_generator_state(gen) in PyTorch."
        )
    increment = generator._register(graph)
    intra = increment[0]  # this kernel's place inside the graph: baked, as Philox's intragraph offset is
    increment[0] += n
    return launch(lambda state: random_values(state[0], state[1] + intra, n), generator.state, name=name)
