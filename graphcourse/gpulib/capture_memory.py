"""What each bucket's capture costs in GPU memory, with its pool shared or private. Part of
:mod:`graphcourse.gpulib.graphs`."""

from __future__ import annotations

import gc
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import torch
from torch import Tensor

from toygraph.buckets import check_buckets

from .bucketed import _pay_one_time_costs, _static_batch
from .capture import CapturedGraph, _memory_now, capture, require_cuda

# --------------------------------------------------------------------------- capture memory


@dataclass(frozen=True)
class CaptureMemoryRow:
    """GPU memory one bucket's capture added: in its own private pool, and into one pool shared by all buckets."""

    bucket: int
    private_added_bytes: int
    shared_added_bytes: int
    private_allocated_bytes: int = 0
    shared_allocated_bytes: int = 0


@dataclass(frozen=True)
class CaptureMemoryReport:
    """Memory added by each capture, per bucket, with a private pool each and with one shared pool."""

    rows: tuple[CaptureMemoryRow, ...]  # ascending bucket
    capture_order: tuple[int, ...]  # largest first, for both kinds of pool
    one_time_bytes: int  # left reserved by the warm-up and throwaway captures, not counted in any row

    @property
    def private_total_bytes(self) -> int:
        """All buckets' private pools together."""
        return sum(r.private_added_bytes for r in self.rows)

    @property
    def shared_total_bytes(self) -> int:
        """The one shared pool: everything its captures added."""
        return sum(r.shared_added_bytes for r in self.rows)

    def running_totals(self, shared: bool) -> list[tuple[int, int, int]]:
        """(bucket, bytes its capture added, bytes added so far), in capture order for the shared pool, ascending for private pools."""
        by_bucket = {r.bucket: r for r in self.rows}
        order = self.capture_order if shared else sorted(by_bucket)
        out, total = [], 0
        for b in order:
            added = by_bucket[b].shared_added_bytes if shared else by_bucket[b].private_added_bytes
            total += added
            out.append((b, added, total))
        return out

    def as_json_rows(self) -> list[dict[str, int]]:
        """The rows as the benchmark writes them to data/gpu_reference.json (bytes added by each capture)."""
        return [{"bucket": r.bucket, "private_pool_reserved_bytes": r.private_added_bytes,
                 "shared_pool_reserved_bytes": r.shared_added_bytes,
                 "private_pool_allocated_bytes": r.private_allocated_bytes,
                 "shared_pool_allocated_bytes": r.shared_allocated_bytes} for r in self.rows]


def capture_memory(
    fn: Callable[[Tensor], Any],
    example: Tensor,
    buckets: Iterable[int],
    *,
    pad_value: float = 0,
    warmup_iters: int = 3,
    capture_fn: Callable[[Callable[..., Any], Tensor, Any], Any] | None = None,
    new_pool: Callable[[], Any] | None = None,
    reserved_bytes: Callable[[], int] | None = None,
) -> CaptureMemoryReport:
    """Memory added by each bucket's capture of `fn`, once with a private pool each and once into one shared pool.

    Fair by construction: one-time costs are paid first (an eager run and a throwaway capture of
    every bucket), then both kinds of pool are measured the same way, largest bucket first, the
    graphs of each kind kept alive until all its buckets are captured (as a server keeps them),
    then freed. Each figure is what that capture added to its own pool, from the pool's own
    allocator statistics (:func:`pool_memory`). `capture_fn(fn, x, pool)`, `new_pool()` and
    `reserved_bytes()` default to real CUDA (:func:`capture`, ``torch.cuda.graph_pool_handle``,
    ``torch.cuda.memory_reserved``, which only measures the one-time costs); tests pass fakes.
    """
    if capture_fn is None:
        require_cuda("measuring the memory each capture adds")

        def capture_fn(f: Callable[..., Any], x: Tensor, pool: Any) -> CapturedGraph:
            return capture(f, x, warmup_iters=warmup_iters, pool=pool)

        new_pool = new_pool or torch.cuda.graph_pool_handle
        reserved_bytes = reserved_bytes or (lambda: _memory_now()[1])
    if new_pool is None or reserved_bytes is None:
        raise ValueError("with a capture_fn, pass new_pool and reserved_bytes too.")
    order = tuple(sorted(check_buckets(buckets), reverse=True))
    statics = {b: _static_batch(example, b, pad_value) for b in order}
    before = reserved_bytes()
    _pay_one_time_costs(fn, statics.values(), lambda f, x: capture_fn(f, x, None))
    one_time = reserved_bytes() - before

    def added_per_bucket(pool: Any) -> dict[int, tuple[int, int]]:
        graphs = {b: capture_fn(fn, statics[b], pool) for b in order}  # kept alive until all are captured
        added = {b: (g.memory.reserved_bytes, g.memory.allocated_bytes) for b, g in graphs.items()}
        del graphs
        gc.collect()
        return added

    private = added_per_bucket(None)
    shared = added_per_bucket(new_pool())
    rows = tuple(CaptureMemoryRow(b, private[b][0], shared[b][0], private[b][1], shared[b][1]) for b in sorted(order))
    return CaptureMemoryReport(rows, order, one_time)
