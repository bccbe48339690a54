"""Timing on the GPU (CUDA events, torch.utils.benchmark, the profiler's kernel counts) and small helpers for it.

Part of :mod:`graphcourse.gpulib.graphs`."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

from .capture import require_cuda

# --------------------------------------------------------------------------- measurement


def cuda_time_us(fn: Callable[[], Any], *, iters: int = 100, warmup: int = 10) -> float:
    """Mean µs per call of `iters` back-to-back calls, between two CUDA events (CPU launch cost included)."""
    require_cuda("timing with CUDA events")
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    return events_us(fn, iters)


def events_us(fn: Callable[[], Any], iters: int) -> float:
    """Mean µs per call of `iters` back-to-back calls, between two CUDA events on the current stream: no warm-up and
    no synchronisation first (:func:`cuda_time_us` adds both). The benchmarks' one way to read CUDA events."""
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000.0 / iters


def benchmark_us(fn: Callable[[], Any], *, min_run_time_s: float = 0.2) -> float:
    """Median µs per call from torch.utils.benchmark (it synchronises CUDA around its timings; works on a CPU too)."""
    from torch.utils import benchmark

    timer = benchmark.Timer(stmt="fn()", globals={"fn": fn})
    return timer.blocked_autorange(min_run_time=min_run_time_s).median * 1e6


@dataclass(frozen=True)
class KernelProfile:
    """GPU kernels of one call as torch.profiler saw them: how many, and their summed GPU time."""

    kernels_per_call: float
    kernel_time_us: float
    top_kernels: tuple[tuple[str, float], ...] = ()


def _is_kernel(name: str) -> bool:
    return not name.startswith(("Memcpy", "Memset", "cudaMem"))


def kernel_profile(fn: Callable[[], Any], *, iters: int = 5, warmup: int = 3) -> KernelProfile:
    """Profile `iters` calls of `fn` and return kernels per call and their summed GPU time per call in µs."""
    require_cuda("profiling GPU kernels")
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    count = 0
    total_us = 0.0
    by_name: dict[str, float] = {}
    with warnings.catch_warnings():
        # torch warns that each profiling cycle clears its events: one cycle is all this needs
        warnings.filterwarnings("ignore", message=".*Profiler clears events")
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(iters):
                fn()
            torch.cuda.synchronize()
        for event in prof.events():
            if event.device_type != DeviceType.CUDA or not _is_kernel(event.name):
                continue
            duration_us = event.time_range.elapsed_us()
            count += 1
            total_us += duration_us
            by_name[event.name] = by_name.get(event.name, 0.0) + duration_us / iters
    top = tuple(sorted(by_name.items(), key=lambda kv: -kv[1])[:5])
    return KernelProfile(count / iters, total_us / iters, top)



def batch_sizes_stream(n_batches: int, max_batch: int, seed: int = 0) -> list[int]:
    """A seeded random stream of batch sizes, uniform in 1..max_batch (what a server sees)."""
    import random

    rng = random.Random(seed)
    return [rng.randint(1, max_batch) for _ in range(n_batches)]


def mean(values: Sequence[float]) -> float:
    """Arithmetic mean (0.0 for no values)."""
    return sum(values) / len(values) if values else 0.0
