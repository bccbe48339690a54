"""How a serving engine picks a captured graph: a padded-size table built once, padding waste, a toy capture cost.

Standard library only. The table is the one vLLM builds once at start-up
(``CudagraphDispatcher._compute_bs_to_padded_graph_size`` in ``vllm/v1/cudagraph_dispatcher.py``):
a list indexed by batch size whose entry is the smallest captured size that holds it, so that
choosing a graph on every decode step is one list index, not a search. A batch above the largest
captured size gets no graph: vLLM's ``dispatch`` returns ``CUDAGraphMode.NONE`` and the step runs
eagerly; SGLang's ``CudaGraphRunner.can_run`` returns False for it. :meth:`PaddedSizeTable.dispatch`
says the same ("eager"); :meth:`PaddedSizeTable.padded_size` raises instead, for callers that
must never fall back.

The capture cost model (:class:`ToyCaptureCost`) is a toy, and says where it simplifies: capture
time grows with the number of graphs (each replays its warm-up runs and records its kernels), a
private pool per graph holds every graph's activations at once, and one shared pool filled largest
first holds about the largest graph's activations plus each graph's own outputs. Real figures come
from ``python -m graphcourse.gpulib.bench_serving`` on a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from .buckets import check_buckets
from .errors import InvalidArgumentError

__all__ = [
    "AboveLargestSizeError",
    "Dispatch",
    "PaddedSizeTable",
    "ToyCaptureCost",
    "WasteSummary",
    "expected_waste",
    "padded_size_table",
]


class AboveLargestSizeError(InvalidArgumentError):
    """A batch is larger than every captured size: there is no graph for it, it must run eagerly."""


def padded_size_table(sizes: Iterable[int]) -> list[int]:
    """Entry b is the smallest captured size >= b (entry 0 is 0), for b up to the largest size.

    The same loop as vLLM's ``_compute_bs_to_padded_graph_size``: for each gap between two
    consecutive captured sizes, the start maps to itself and every batch after it to the end.
    """
    capture = list(check_buckets(sizes))
    largest = capture[-1]
    table = [0] * (largest + 1)
    for end, start in zip(capture + [largest + 1], [0] + capture):
        for bs in range(start, end):
            table[bs] = start if bs == start else end
    return table


@dataclass(frozen=True)
class Dispatch:
    """Where one step goes: ``mode`` "graph" (replay the graph of ``size`` rows) or "eager" (no graph holds it)."""

    mode: str
    size: int
    batch: int

    @property
    def padded_rows(self) -> int:
        """Rows of padding this step runs (0 when eager: it runs exactly its own rows)."""
        return self.size - self.batch


class PaddedSizeTable:
    """A capture-size list and its padded-size table, built once; a lookup per step is one list index."""

    def __init__(self, sizes: Iterable[int]) -> None:
        self.sizes = check_buckets(sizes)
        self.table = padded_size_table(self.sizes)

    @property
    def largest(self) -> int:
        """The largest captured size: batches above it have no graph."""
        return self.sizes[-1]

    def _check_batch(self, batch: int) -> int:
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise InvalidArgumentError(f"a batch size is a whole number of at least 1, got {batch!r}.")
        return batch

    def padded_size(self, batch: int) -> int:
        """The captured size this batch is padded to; AboveLargestSizeError above the largest size."""
        self._check_batch(batch)
        if batch > self.largest:
            raise AboveLargestSizeError(
                f"a batch of {batch} is above the largest captured size ({self.largest}): no graph holds it. "
                f"Serving engines run such a step eagerly (vLLM's dispatch returns CUDAGraphMode.NONE); "
                f"use dispatch() to get that fallback, or capture a size of at least {batch}."
            )
        return self.table[batch]

    def dispatch(self, batch: int) -> Dispatch:
        """Graph of the padded size, or eager above the largest size (as vLLM and SGLang do)."""
        self._check_batch(batch)
        if batch > self.largest:
            return Dispatch("eager", batch, batch)
        return Dispatch("graph", self.table[batch], batch)

    def __repr__(self) -> str:
        return f"PaddedSizeTable({len(self.sizes)} sizes, largest {self.largest})"


@dataclass(frozen=True)
class WasteSummary:
    """What a capture-size list costs on a distribution of batch sizes (expected values per step)."""

    sizes: tuple[int, ...]
    useful_rows: float  # mean rows of real requests per step
    padded_rows: float  # mean rows of padding per step
    eager_share: float  # share of steps with no graph (above the largest size)
    useful_rows_graphed: float = 0.0  # mean real rows per step that went through a graph

    @property
    def waste_fraction(self) -> float:
        """Padding rows over all rows the graphs run (0.0 when nothing is graphed)."""
        graphed = self.useful_rows_graphed + self.padded_rows
        return self.padded_rows / graphed if graphed else 0.0

    @property
    def n_sizes(self) -> int:
        """How many graphs the list captures."""
        return len(self.sizes)


def _check_distribution(distribution: Mapping[int, float]) -> dict[int, float]:
    if not isinstance(distribution, Mapping) or not distribution:
        raise InvalidArgumentError(
            "give the batch sizes as a mapping {batch size: weight}, e.g. {1: 0.5, 8: 0.3, 64: 0.2}."
        )
    total = 0.0
    clean: dict[int, float] = {}
    for b, w in distribution.items():
        if isinstance(b, bool) or not isinstance(b, int) or b < 1:
            raise InvalidArgumentError(f"batch sizes are whole numbers of at least 1, got {b!r}.")
        if not isinstance(w, (int, float)) or w < 0:
            raise InvalidArgumentError(f"weights are numbers >= 0, got {w!r} for batch {b}.")
        clean[b] = float(w)
        total += float(w)
    if total <= 0:
        raise InvalidArgumentError("every weight is 0: give some batch sizes a positive weight.")
    return {b: w / total for b, w in clean.items()}


def expected_waste(sizes: Iterable[int], distribution: Mapping[int, float]) -> WasteSummary:
    """Expected padding per step when batches follow `distribution` ({size: weight}) and each is padded to its graph."""
    table = PaddedSizeTable(sizes)
    probs = _check_distribution(distribution)
    useful = padded = eager = graphed = 0.0
    for b, p in probs.items():
        d = table.dispatch(b)
        useful += p * b
        if d.mode == "eager":
            eager += p
        else:
            padded += p * d.padded_rows
            graphed += p * b
    return WasteSummary(table.sizes, useful, padded, eager, graphed)


@dataclass(frozen=True)
class ToyCaptureCost:
    """A toy model of what capturing a list of sizes costs (assumed linear prices, not measured ones).

    ``capture_ms``: fixed cost of one capture (warm-up runs and recording); ``capture_ms_per_row``:
    what each row of the batch adds. ``pool_bytes_per_row``: activation memory one row of one
    graph holds while it is captured; ``output_bytes_per_row``: what each graph keeps for its
    static outputs. Simplifications: no allocator rounding, no fragmentation, no one-time costs.
    """

    capture_ms: float = 20.0
    capture_ms_per_row: float = 0.02
    pool_bytes_per_row: int = 64 * 1024
    output_bytes_per_row: int = 4 * 1024

    def capture_s(self, sizes: Iterable[int]) -> float:
        """Seconds to capture every size once."""
        return sum(self.capture_ms + self.capture_ms_per_row * b for b in check_buckets(sizes)) / 1000.0

    def private_pools_bytes(self, sizes: Iterable[int]) -> int:
        """A pool per graph: every graph keeps its own activations and outputs."""
        return sum((self.pool_bytes_per_row + self.output_bytes_per_row) * b for b in check_buckets(sizes))

    def shared_pool_bytes(self, sizes: Iterable[int]) -> int:
        """One pool filled largest first: the largest graph's activations, reused by the smaller ones, plus all outputs."""
        s = check_buckets(sizes)
        return self.pool_bytes_per_row * s[-1] + sum(self.output_bytes_per_row * b for b in s)
