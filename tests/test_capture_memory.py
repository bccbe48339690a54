"""graphcourse.gpulib.graphs.capture_memory: the bookkeeping of memory added per capture, on a CPU with a fake allocator."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest
import torch

from graphcourse.gpulib.graphs import (CaptureMemoryReport, CaptureMemoryRow, MemoryDelta,
                                       capture_memory, show_progress)

MiB = 2**20
ONE_TIME = 34 * MiB  # what the first capture of a process pays on an H200 (cuBLAS workspace, allocator warm-up)


def pool_need(rows: int) -> int:
    return 2 * MiB if rows <= 32 else 4 * MiB


class FakeCuda:
    """A caching allocator in miniature: a one-time cost on the first capture, private pools freed with their graph."""

    def __init__(self) -> None:
        self.reserved = 0
        self.captures = 0
        self.live = 0
        self.max_live = 0

    @dataclass
    class Pool:
        capacity: int = 0

    def new_pool(self) -> "FakeCuda.Pool":
        return FakeCuda.Pool()

    def capture(self, fn, x, pool):
        fake = self
        before = self.reserved
        if self.captures == 0:
            self.reserved += ONE_TIME
        self.captures += 1
        need = pool_need(x.shape[0])
        if pool is None:
            self.reserved += need
            owned = need
        else:
            grow = max(0, need - pool.capacity)
            pool.capacity += grow
            self.reserved += grow
            owned = 0  # a shared pool lives on past its graphs here; only growth counts
        fn(x)

        class Graph:
            memory = MemoryDelta(0, fake.reserved - before)

            def __del__(self) -> None:
                fake.reserved -= owned
                fake.live -= 1

        self.live += 1
        self.max_live = max(self.max_live, self.live)
        return Graph()


def measure(buckets, fake: FakeCuda | None = None) -> CaptureMemoryReport:
    fake = fake or FakeCuda()
    return capture_memory(lambda x: x * 2, torch.zeros(1, 4), buckets, capture_fn=fake.capture,
                          new_pool=fake.new_pool, reserved_bytes=lambda: fake.reserved)


def test_the_one_time_cost_lands_on_no_bucket() -> None:
    report = measure([1, 2, 4, 8, 16, 32, 64])
    assert [r.bucket for r in report.rows] == [1, 2, 4, 8, 16, 32, 64]
    assert [r.private_added_bytes for r in report.rows] == [2 * MiB] * 6 + [4 * MiB]
    assert report.one_time_bytes == ONE_TIME, "the warm-up's cost is reported apart, not inside a bucket"
    assert report.private_total_bytes == 16 * MiB


def test_a_shared_pool_is_reserved_by_the_largest_capture_and_reused_by_the_rest() -> None:
    report = measure([1, 2, 4, 8, 16, 32, 64])
    assert report.capture_order == (64, 32, 16, 8, 4, 2, 1)
    assert {r.bucket: r.shared_added_bytes for r in report.rows} == {64: 4 * MiB, 32: 0, 16: 0, 8: 0, 4: 0, 2: 0, 1: 0}
    assert report.shared_total_bytes == 4 * MiB


@pytest.mark.parametrize("buckets", list(itertools.permutations([1, 2, 4, 64]))[::5])
def test_the_order_the_buckets_are_given_in_does_not_matter(buckets) -> None:
    assert measure(buckets) == measure([1, 2, 4, 64])


def test_graphs_stay_alive_until_every_bucket_is_captured_then_are_freed() -> None:
    fake = FakeCuda()
    measure([1, 2, 4, 8], fake)
    assert fake.max_live == 4 and fake.live == 0


def test_running_totals_follow_capture_order_for_the_shared_pool() -> None:
    report = CaptureMemoryReport((CaptureMemoryRow(1, 2, 0), CaptureMemoryRow(2, 2, 0), CaptureMemoryRow(4, 3, 5)),
                                 (4, 2, 1), 7)
    assert report.running_totals(shared=False) == [(1, 2, 2), (2, 2, 4), (4, 3, 7)]
    assert report.running_totals(shared=True) == [(4, 5, 5), (2, 0, 5), (1, 0, 5)]
    assert report.as_json_rows()[2] == {"bucket": 4, "private_pool_reserved_bytes": 3, "shared_pool_reserved_bytes": 5,
                                        "private_pool_allocated_bytes": 0, "shared_pool_allocated_bytes": 0}


def test_a_fake_capture_needs_the_rest_of_the_fakes() -> None:
    with pytest.raises(ValueError, match="new_pool and reserved_bytes"):
        capture_memory(lambda x: x, torch.zeros(1, 2), [1, 2], capture_fn=lambda f, x, p: None)


def test_without_cuda_capture_memory_says_so() -> None:
    if torch.cuda.is_available():
        pytest.skip("CUDA is here")
    from graphcourse.errors import NoCudaError

    with pytest.raises(NoCudaError):
        capture_memory(lambda x: x, torch.zeros(1, 2), [1, 2])


def test_progress_bars_only_in_a_terminal_unless_asked(monkeypatch) -> None:
    assert show_progress(True) and not show_progress(False)

    class NotATerminal:
        def isatty(self) -> bool:
            return False

    monkeypatch.setattr("sys.stderr", NotATerminal())
    assert not show_progress(None)
