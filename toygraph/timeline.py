"""A simulated CPU/GPU timeline: who launches, who computes, and who waits on whom.

The CPU lane issues work: one launch per kernel in eager mode, one graph launch per
replay. The GPU lane runs kernels in order, each starting when both its launch has been
issued and the previous kernel has finished. A sync makes the CPU wait until the GPU is
idle. When launches cost more than kernels, the GPU sits idle between kernels: the
launch tax that CUDA graphs remove.

Default costs come from the course's own benchmark (``python -m graphcourse.gpulib.bench`` on a GPU,
recorded in ``data/gpu_reference.json``): ``python -m graphcourse.authoring.toy_prices`` derives them and
writes :mod:`toygraph.prices`, which holds each figure with its provenance (GPU, torch, date,
which measurement, median and spread); :func:`describe_prices` prints them. They are one
machine's prices: launch cost depends on the op, the torch version and the machine, and a
kernel inside a model costs more to launch than a bare one (lesson 02 explains why).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Sequence

from ._guard import Guarded, Record
from .errors import InvalidArgumentError
from .prices import PRICES, SOURCE


@dataclass(frozen=True)
class CostModel:
    """What each action costs in microseconds on the toy machine (defaults: toygraph.prices)."""

    launch_us: float = PRICES["launch_us"]["value"]
    """CPU time to launch one kernel eagerly: a bare launch of a tiny op, measured on a chain of them."""
    kernel_us: float = PRICES["kernel_us"]["value"]
    """GPU time of one tiny kernel: the time per node of a long replayed chain."""
    graph_launch_us: float = PRICES["graph_launch_us"]["value"]
    """CPU time to launch a whole graph: the time per replay of a one-node graph, replayed back to back."""
    graph_node_us: float = PRICES["graph_node_us"]["value"]
    """Extra CPU launch time per graph node (published by NVIDIA, not measured by the course)."""
    sync_us: float = PRICES["sync_us"]["value"]
    """CPU time a sync costs on top of waiting (copy back and wake-up), set so that one `.item()` per token
    costs what the course's decode loop measured."""
    node_gap_us: float = 0.0
    """GPU time between two kernels of one graph replay: the next node's start after the last one ends
    (lesson 13 sets it from a recorded trace; 0, the default, runs a replay's kernels back to back).
    A simplification: on a real GPU the gap differs from kernel to kernel."""

    def __post_init__(self) -> None:
        for name in ("launch_us", "kernel_us", "graph_launch_us", "graph_node_us", "sync_us", "node_gap_us"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise InvalidArgumentError(f"CostModel.{name} must be a number of microseconds >= 0, got {value!r}.")

    def with_(self, **changes: float) -> "CostModel":
        """A copy with some costs changed, e.g. cost.with_(launch_us=5)."""
        return replace(self, **changes)


DEFAULT_COSTS = CostModel()
"""The toy's default prices, from the course's recorded benchmark (toygraph.prices)."""
H200_COSTS = DEFAULT_COSTS  # the name lessons use: the benchmark was recorded on an H200 (SOURCE["gpu"])

_PRICE_NAMES = {"launch_us": "eager launch", "kernel_us": "tiny kernel", "graph_launch_us": "graph launch",
                "graph_node_us": "per graph node", "sync_us": "sync", "launch_in_model_us": "launch in a model"}


def describe_prices(width: int = 90) -> str:
    """The toy's default prices, each with its spread and measurement, under one line of provenance."""
    import textwrap
    lines = [f"toy prices recorded on {SOURCE['gpu']}, {str(SOURCE['date_utc'])[:10]}, torch {SOURCE['torch']} "
             f"({SOURCE['command']})"]
    for name, price in PRICES.items():
        if price["spread"] is not None:
            spread = f"spread {price['spread']:g}"
        elif not price.get("samples"):
            spread = "a published figure, not measured: no spread"
        else:
            spread = "no spread recorded"
        head = f"{_PRICE_NAMES.get(name, name):>17}: {price['value']:g} µs ({spread})"
        lines.append(head)
        lines += textwrap.wrap(price["measurement"], width, initial_indent=" " * 19, subsequent_indent=" " * 19)
    return "\n".join(lines)


@dataclass(frozen=True)
class Event:
    """One bar on the timeline: a lane ("cpu" or "gpu"), when it ran, what it was."""

    lane: str
    start_us: float
    end_us: float
    label: str
    kind: str  # "launch", "graph_launch", "kernel", "wait", "sync", "host"
    step: int = 0

    @property
    def duration_us(self) -> float:
        """How long the bar is."""
        return self.end_us - self.start_us


@dataclass
class Timeline(Guarded):
    """Events of a CPU lane and a GPU lane, and when each step finished."""

    events: list[Event] = field(default_factory=Record)  # only the toy appends (see _guard)
    step_end_us: list[float] = field(default_factory=Record)

    @property
    def total_us(self) -> float:
        """From the first launch to the last thing either lane did."""
        return max((e.end_us for e in self.events), default=0.0)

    @property
    def step_times_us(self) -> list[float]:
        """Time of each step: from the end of the previous step to the end of this one."""
        starts = [0.0] + self.step_end_us[:-1]
        return [end - start for start, end in zip(starts, self.step_end_us)]

    def busy_us(self, lane: str) -> float:
        """Time a lane spent working (waiting does not count)."""
        return sum(e.duration_us for e in self.events if e.lane == lane and e.kind != "wait")

    @property
    def gpu_idle_us(self) -> float:
        """Time the GPU sat idle between the start and the end of the timeline."""
        return self.total_us - self.busy_us("gpu")

    @property
    def gpu_utilization(self) -> float:
        """Share of the timeline the GPU spent computing (0..1)."""
        return self.busy_us("gpu") / self.total_us if self.total_us else 0.0

    def lane(self, lane: str) -> list[Event]:
        """The events of one lane, in time order."""
        return sorted((e for e in self.events if e.lane == lane), key=lambda e: e.start_us)


class Clock(Guarded):
    """Advances the CPU and GPU lanes as work is launched, replayed and synced."""

    def __init__(self, cost: CostModel | None = None) -> None:
        self.cost = cost or H200_COSTS
        self.cpu_us = 0.0
        self.gpu_free_us = 0.0
        self.timeline = Timeline()
        self.step = 0

    # The clock's state and timeline are guarded (only toygraph writes them), and each guarded write costs a look at
    # the caller's frames: launch_all and replay work on local copies and write the clock once per call, with the
    # same arithmetic in the same order as one kernel at a time (a 600-kernel step is simulated ~3x faster).
    def launch(self, label: str, kernel_us: float | None = None) -> None:
        """One eager kernel: the CPU pays a launch, then the GPU runs it when free."""
        self.launch_all([(label, self.cost.kernel_us if kernel_us is None else kernel_us)])

    def launch_all(self, kernels: Sequence[tuple[str, float]]) -> None:
        """Eager kernels one after another, each as launch() would run it: (label, GPU µs) each."""
        cpu, gpu_free, launch_us, step = self.cpu_us, self.gpu_free_us, self.cost.launch_us, self.step
        events = []
        for label, us in kernels:
            start = cpu
            cpu += launch_us
            events.append(Event("cpu", start, cpu, f"launch {label}", "launch", step))
            start = max(cpu, gpu_free)
            gpu_free = start + us
            events.append(Event("gpu", start, gpu_free, label, "kernel", step))
        self.cpu_us, self.gpu_free_us = cpu, gpu_free
        self.timeline.events.extend(events)

    def replay(self, label: str, kernel_us: Sequence[float], n_nodes: int | None = None) -> None:
        """One graph launch: the CPU pays once (plus a little per node), the GPU runs the kernels back to back."""
        start = self.cpu_us
        nodes = len(kernel_us) if n_nodes is None else n_nodes
        cpu = self.cpu_us = self.cpu_us + (self.cost.graph_launch_us + self.cost.graph_node_us * nodes)
        events = [Event("cpu", start, cpu, f"replay {label}", "graph_launch", self.step)]
        gpu_free, gap, step = self.gpu_free_us, self.cost.node_gap_us, self.step
        for i, us in enumerate(kernel_us):
            ready = cpu if i == 0 else max(cpu, gpu_free + gap)
            begin = max(ready, gpu_free)
            gpu_free = begin + us
            events.append(Event("gpu", begin, gpu_free, f"{label}[{i}]", "kernel", step))
        self.gpu_free_us = gpu_free
        self.timeline.events.extend(events)

    def host(self, us: float, label: str = "host work") -> None:
        """CPU work that launches nothing (Python, sampling, scheduling)."""
        start = self.cpu_us
        self.cpu_us += us
        self.timeline.events.append(Event("cpu", start, self.cpu_us, label, "host", self.step))

    def sync(self, label: str = "sync") -> None:
        """The CPU waits until the GPU is idle, then pays the sync's own cost."""
        if self.gpu_free_us > self.cpu_us:
            self.timeline.events.append(Event("cpu", self.cpu_us, self.gpu_free_us, f"wait ({label})", "wait", self.step))
            self.cpu_us = self.gpu_free_us
        start = self.cpu_us
        self.cpu_us += self.cost.sync_us
        self.timeline.events.append(Event("cpu", start, self.cpu_us, label, "sync", self.step))

    def end_step(self) -> None:
        """Mark the end of a step: it is done when both lanes are done with it."""
        self.timeline.step_end_us.append(max(self.cpu_us, self.gpu_free_us))
        self.step += 1


def _kernel_list(kernels: int | Sequence[float], cost: CostModel) -> list[float]:
    if isinstance(kernels, bool):
        raise InvalidArgumentError(f"kernels must be a count or a list of kernel times in µs, got {kernels!r}.")
    if isinstance(kernels, int):
        if kernels <= 0:
            raise InvalidArgumentError(f"a step needs at least one kernel, got {kernels}.")
        return [cost.kernel_us] * kernels
    times = list(kernels)
    if not times or any(isinstance(t, bool) or not isinstance(t, (int, float)) or t < 0 for t in times):
        raise InvalidArgumentError(f"kernels must be a count or a non-empty list of kernel times in µs >= 0, got {kernels!r}.")
    return [float(t) for t in times]


def simulate(kernels: int | Sequence[float], *, mode: str = "eager", steps: int = 1,
             sync_every_step: bool = False, host_us_per_step: float = 0.0,
             cost: CostModel | None = None) -> Timeline:
    """Run `steps` decode steps of the given kernels eagerly or as graph replays, on a fresh clock."""
    if mode not in ("eager", "graph"):
        raise InvalidArgumentError(f"mode must be 'eager' or 'graph', got {mode!r}.")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps <= 0:
        raise InvalidArgumentError(f"steps must be a whole number >= 1, got {steps!r}.")
    clock = Clock(cost)
    times = _kernel_list(kernels, clock.cost)
    for _ in range(steps):
        if host_us_per_step:
            clock.host(host_us_per_step, "python")
        if mode == "eager":
            clock.launch_all([(f"k{i}", us) for i, us in enumerate(times)])
        else:
            clock.replay("step", times)
        if sync_every_step:
            clock.sync(".item()")
        clock.end_step()
    return clock.timeline


def step_time_us(kernels: int | Sequence[float], *, mode: str = "eager", sync_every_step: bool = False,
                 cost: CostModel | None = None, steps: int = 20) -> float:
    """Steady-state time of one step (the mean over the later half of `steps`)."""
    times = simulate(kernels, mode=mode, steps=steps, sync_every_step=sync_every_step, cost=cost).step_times_us
    tail = times[len(times) // 2:]
    return sum(tail) / len(tail)


def predicted_speedup(kernels: int | Sequence[float], cost: CostModel | None = None,
                      sync_every_step: bool = False) -> float:
    """Eager step time over graph step time for the same kernels."""
    return (step_time_us(kernels, mode="eager", cost=cost, sync_every_step=sync_every_step)
            / step_time_us(kernels, mode="graph", cost=cost, sync_every_step=sync_every_step))

