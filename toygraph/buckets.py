"""Buckets and padding: one graph per batch size in a fixed list, each request padded up to the smallest that fits.

Policy above the largest bucket (one documented behaviour): run the step eagerly and warn
with :class:`EagerFallbackWarning`. Serving engines do the same (vLLM runs batches above
its largest captured size eagerly), because refusing a request is worse than serving it a
little slower, and the warning tells the operator to add a bucket.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from ._guard import Guarded, Record, RecordDict
from .capture import ToyGraph, count, launch
from .errors import InvalidArgumentError
from .memory import Buffer, ToyDevice, _check_values, default_device


class EagerFallbackWarning(UserWarning):
    """A batch was larger than the largest captured bucket and ran eagerly, paying full launch cost."""


def _check_size(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentError(f"{name} must be a whole number, got {value!r} ({type(value).__name__}).")
    if value <= 0:
        raise InvalidArgumentError(f"{name} must be at least 1, got {value}: a batch holds one request or more.")
    return value


def check_buckets(buckets: Iterable[int]) -> tuple[int, ...]:
    """Return the bucket sizes sorted and without repeats, or raise a clear error for an unusable list."""
    if isinstance(buckets, (str, bytes)) or not isinstance(buckets, Iterable):
        raise InvalidArgumentError(f"buckets must be a list of batch sizes such as [1, 2, 4, 8], got {buckets!r}.")
    sizes = [_check_size("every bucket", b) for b in buckets]
    if not sizes:
        raise InvalidArgumentError("the bucket list is empty: give at least one batch size, e.g. [1, 2, 4, 8].")
    return tuple(sorted(set(sizes)))


def powers_of_two(max_size: int) -> tuple[int, ...]:
    """Buckets 1, 2, 4, ... up to the first power of two that holds max_size."""
    _check_size("max_size", max_size)
    return tuple(2**i for i in range(math.ceil(math.log2(max_size)) + 1))


def every_n(step: int, max_size: int) -> tuple[int, ...]:
    """Buckets 1, 2, 4, then every `step` up to max_size (vLLM's default shape with step=8)."""
    _check_size("step", step)
    _check_size("max_size", max_size)
    small = [b for b in (1, 2, 4) if b < step]
    return check_buckets(small + list(range(step, max_size + step, step)))


def bucket_for(batch_size: int, buckets: Sequence[int]) -> int | None:
    """The smallest bucket that holds batch_size, or None when it is larger than every bucket."""
    _check_size("batch_size", batch_size)
    for b in check_buckets(buckets):
        if b >= batch_size:
            return b
    return None


def pad_to(batch: Sequence, size: int, pad_value: object = 0) -> list:
    """The batch as a list, padded with pad_value up to size rows (a buffer's values are read on the device)."""
    _check_size("size", size)
    rows = _check_values(batch, "the batch")
    if len(rows) > size:
        raise InvalidArgumentError(f"cannot pad a batch of {len(rows)} down to {size}: pick a bucket of at least {len(rows)}.")
    return rows + [pad_value] * (size - len(rows))


def waste_fraction(batch_size: int, bucket: int) -> float:
    """Share of a padded bucket's rows that are padding: (bucket - batch_size) / bucket."""
    _check_size("batch_size", batch_size)
    _check_size("bucket", bucket)
    if bucket < batch_size:
        raise InvalidArgumentError(f"bucket {bucket} is smaller than the batch ({batch_size}): it does not fit.")
    return (bucket - batch_size) / bucket


@dataclass(frozen=True)
class PaddingReport:
    """What a stream of batches costs in padding under a bucket list."""

    useful_rows: int
    padded_rows: int
    eager_batches: int
    graphed_batches: int
    useful_rows_graphed: int

    @property
    def waste_fraction(self) -> float:
        """Padding rows over all rows run through graphs (0.0 when nothing was graphed)."""
        total = self.useful_rows_graphed + self.padded_rows
        return self.padded_rows / total if total else 0.0


def padding_report(batch_sizes: Iterable[int], buckets: Sequence[int]) -> PaddingReport:
    """Pad every batch of a stream to its bucket and count useful rows, padding rows and eager fallbacks."""
    sizes = check_buckets(buckets)
    useful = padded = useful_graphed = eager = graphed = 0
    for n in batch_sizes:
        b = bucket_for(n, sizes)
        useful += n
        if b is None:
            eager += 1
        else:
            graphed += 1
            useful_graphed += n
            padded += b - n
    return PaddingReport(useful, padded, eager, graphed, useful_graphed)


class BucketedGraphs(Guarded):
    """One ToyGraph per bucket size: run() pads a batch to the smallest bucket that fits, replays it and unpads."""

    def __init__(self, kernels: Sequence[Callable], buckets: Iterable[int] = (1, 2, 4, 8), *,
                 device: ToyDevice | None = None, pad_value: object = 0) -> None:
        if callable(kernels):
            kernels = [kernels]
        if isinstance(kernels, (str, bytes)) or not isinstance(kernels, Iterable):
            raise InvalidArgumentError(f"kernels must be a list of kernel functions, got {kernels!r}.")
        self.kernels = list(kernels)
        if not self.kernels:
            raise InvalidArgumentError("kernels is empty: give the step's kernels, e.g. [lambda x: [v * 2 for v in x]].")
        self.buckets = check_buckets(buckets)
        self.device = device or default_device()
        self.pad_value = pad_value
        self.graphs: dict[int, ToyGraph] = RecordDict()
        for b in self.buckets:
            g = ToyGraph(self.device, name=f"bucket {b}")
            for k in self.kernels:
                g.record(k)
            g.capture([pad_value] * b)
            self.graphs[b] = g
        self.batch_sizes: list[int] = Record()

    def run(self, batch: Sequence) -> Buffer:
        """The step's output for this batch: graphed in its bucket, or eager with a warning above the largest.

        Graphed, it is a *view* of the bucket's static output (its first rows): no copy and no sync,
        as serving engines hand back a slice of their output buffer; the next run of the same bucket
        overwrites it. Keep it with ``.tolist()`` (to the host, a sync) or ``.clone()`` (on the device).
        Eager (above the largest bucket), it is a new buffer.
        """
        values = _check_values(batch, "the batch")
        if not values:
            raise InvalidArgumentError("the batch is empty: a step needs at least one request.")
        self.batch_sizes.append(len(values))
        bucket = bucket_for(len(values), self.buckets)
        if bucket is None:
            warnings.warn(EagerFallbackWarning(
                f"a batch of {len(values)} is larger than the largest bucket ({self.buckets[-1]}): it ran eagerly, "
                f"paying one launch per kernel. Add a bucket of {2 ** math.ceil(math.log2(len(values)))} if such "
                f"batches are common."), stacklevel=2)
            x = self.device.tensor(values)
            for k in self.kernels:
                x = launch(k, x)
            return x
        out = self.graphs[bucket].replay(pad_to(values, bucket, self.pad_value))
        return out[: len(values)]  # a view: the next replay of this bucket overwrites it

    def report(self) -> PaddingReport:
        """Padding and eager fallbacks over every batch run so far."""
        return padding_report(self.batch_sizes, self.buckets)

    @property
    def memory_bytes(self) -> dict[int, int]:
        """Bytes of each bucket's private graph pool."""
        return {b: g.memory_bytes for b, g in self.graphs.items()}

    def __repr__(self) -> str:
        return f"BucketedGraphs(buckets={list(self.buckets)}, {count(len(self.kernels), 'kernel')}, {sum(self.memory_bytes.values())} bytes of graph pools)"
