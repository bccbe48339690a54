"""Helpers for lesson 06, the common mistakes: run a capture that is meant to fail in a child process, show real or expected error text.

A failed CUDA capture can leave the process's CUDA context unusable, so the lesson never
fails a capture in its own kernel: :func:`graphcourse.core.child.run_snippet` (shared with lesson 03)
runs the code in a child Python and hands back the exit code and the error lines. Where no
CUDA GPU is here, :func:`live_or_expected` prints the text torch gives instead, labelled as
expected and with where that text comes from. torch is imported only by the GPU helpers.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

from ..core.child import ChildResult, error_lines, run_snippet
from ..gpulib.demos import SNIPPETS  # noqa: F401  (lesson 06 reads SNIPPETS here)
from .teaching import cuda_here

__all__ = [
    "EXPECTED",
    "ChildResult",
    "Expected",
    "error_lines",
    "live_or_expected",
    "print_expected",
    "reserved_per_bucket_live",
    "run_snippet",
    "sync_debug",
    "tp_step_kernels",
]


# --------------------------------------------------------------------------- real or expected text


@dataclass(frozen=True)
class Expected:
    """The error text torch gives for a mistake, and where that text comes from (shown when no GPU can run it)."""

    text: str
    source: str


def _recorded(what: str) -> tuple[str, str]:
    """The sync-in-capture error lines the course's benchmark run recorded, and where they come from."""
    from .compare import recorded_item_in_capture
    from ..errors import GraphCourseError
    from .reference import load_reference, recorded_label

    try:
        data = load_reference()
        return recorded_item_in_capture(data), f"the course's benchmark run, {recorded_label(data)}: {what}"
    except GraphCourseError as exc:
        return f"(not recorded: {exc})", "nowhere yet: run `python -m graphcourse.gpulib.bench` on a GPU"


_ITEM_TEXT, _ITEM_SOURCE = _recorded("first the refused sync, then the error that ending the invalidated capture raises")

EXPECTED: dict[str, Expected] = {
    "item_in_capture": Expected(_ITEM_TEXT, _ITEM_SOURCE),
    "sync_debug": Expected(
        "RuntimeError: called a synchronizing CUDA operation",
        "torch's c10/cuda/CUDAFunctions.cpp, warn_or_error_on_sync()",
    ),
    "default_stream": Expected(
        "RuntimeError: CUDA graphs must be captured on a non-default stream. "
        "(However, after capture, it's ok to replay them on the default stream.)",
        "torch's aten/src/ATen/cuda/CUDAGraph.cpp, CUDAGraph::capture_begin()",
    ),
    "cold_cublas": Expected(
        "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_INITIALIZED when calling `cublasCreate(handle)`",
        "pytorch/pytorch issue #99397 (torch 2.0), so warm up before capturing",
    ),
    "batch_copy": Expected(
        "RuntimeError: output with shape [1, 8] doesn't match the broadcast shape [17, 8]",
        "torch 2.13.0 running the same copy_ on CPU tensors; the shape check is the same on a GPU",
    ),
    "lazy_init_sync": Expected(
        _ITEM_TEXT,
        "the same sync-in-capture errors as .item(), as the course's benchmark run recorded them: "
        "the lazy .item() runs inside capture",
    ),
    "branch_on_data": Expected(
        _ITEM_TEXT,
        "the same sync-in-capture errors as .item(), as the course's benchmark run recorded them: `if tensor` "
        "reads the value on the CPU, a sync, so capture refuses it as it refuses .item()",
    ),
}


def print_expected(expected: Expected) -> None:
    """Print an error text that was not produced here, labelled as expected and with its source."""
    print("not run here (no CUDA GPU). Expected, not measured:")
    for line in expected.text.splitlines():
        print(f"  {line}")
    print(f"  (text from {expected.source})")


def live_or_expected(code: str, expected: "Expected | str", timeout_s: float = 120.0) -> ChildResult | None:
    """On a CUDA GPU run `code` in a child process and print what happened; elsewhere show what the course recorded.

    `expected` names a SNIPPETS entry (its result is read from the benchmark's recorded facts, with
    the run's provenance) or is an Expected text quoted from torch's source, labelled as expected.
    """
    if cuda_here():
        import torch

        print(f"live on {torch.cuda.get_device_name(0)}, torch {torch.__version__}, in a child process:")
        result = run_snippet(code, timeout_s)
        print(result.summary())
        return result
    if isinstance(expected, str):
        from ..errors import GraphCourseError
        from .reference import load_reference, recorded_label

        try:
            data = load_reference()
            recorded = data.get("facts", {}).get("mistakes", {}).get(expected)
        except GraphCourseError:
            data, recorded = None, None
        if recorded is not None:
            print(f"No CUDA GPU here: {recorded_label(data)} by the course's benchmark run, in a child process:")
            print(recorded["summary"])
            return None
        if expected not in EXPECTED:
            print(f"No CUDA GPU here, and no recorded result for {expected!r}: run `python -m graphcourse.gpulib.bench` on a GPU.")
            return None
        expected = EXPECTED[expected]
    print_expected(expected)
    return None


# --------------------------------------------------------------------------- GPU helpers, live in the kernel


@contextmanager
def sync_debug(mode: str = "error") -> Iterator[None]:
    """Within the block, torch.cuda.set_sync_debug_mode(mode): a synchronizing CUDA call warns or raises; restored after."""
    import torch

    previous = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode(mode)
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode(previous)


def reserved_per_bucket_live(buckets: Sequence[int], d_model: int = 1024,
                             share_pool: bool = False) -> list[tuple[int, int, int]]:
    """Capture a two-layer step once per bucket: (bucket, bytes its capture added, bytes all graphs so far added).

    Measured by :func:`graphcourse.gpulib.graphs.capture_memory`: one-time costs are paid first, the graphs
    stay alive until every bucket is captured, as a serving engine keeps them, and are freed
    when the function returns. Private pools come in ascending bucket order; with share_pool,
    every graph draws on one pool, captured largest first so the smaller ones reuse its memory.
    """
    import torch

    from ..gpulib.graphs import capture_memory, require_cuda

    require_cuda("capturing one graph per bucket")
    w1 = torch.randn(d_model, 4 * d_model, device="cuda") / d_model**0.5
    w2 = torch.randn(4 * d_model, d_model, device="cuda") / d_model**0.5

    def step(x: Any) -> Any:
        return torch.relu(x @ w1) @ w2

    return capture_memory(step, torch.zeros(1, d_model, device="cuda"), buckets).running_totals(shared=share_pool)


# --------------------------------------------------------------------------- the tensor-parallel step on the toy timeline


def tp_step_kernels(layers: int, compute_kernels: int, compute_us: float,
                    allreduces: int, allreduce_us: float) -> list[float]:
    """GPU times of one tensor-parallel decode step: per layer, `compute_kernels` kernels then `allreduces` all-reduces."""
    for name, value in (("layers", layers), ("compute_kernels", compute_kernels), ("allreduces", allreduces)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be a whole number >= 0, got {value!r}.")
    if layers == 0 or compute_kernels + allreduces == 0:
        raise ValueError("a step needs at least one layer with at least one kernel.")
    if compute_us < 0 or allreduce_us < 0:
        raise ValueError(f"kernel times must be >= 0 µs, got {compute_us!r} and {allreduce_us!r}.")
    layer = [float(compute_us)] * compute_kernels + [float(allreduce_us)] * allreduces
    return layer * layers


def memory_rows_live(buckets: Sequence[int], d_model: int = 1024) -> list[dict[str, int]]:
    """Capture a two-layer step once per bucket, with a pool each and with one shared pool: bytes each capture added.

    The rows are :meth:`graphcourse.gpulib.graphs.CaptureMemoryReport.as_json_rows` (allocated and reserved
    bytes per kind of pool, from each pool's own allocator statistics).
    """
    import torch

    from ..gpulib.graphs import capture_memory, require_cuda

    require_cuda("capturing one graph per bucket")
    w1 = torch.randn(d_model, 4 * d_model, device="cuda") / d_model**0.5
    w2 = torch.randn(4 * d_model, d_model, device="cuda") / d_model**0.5

    def step(x: Any) -> Any:
        return torch.relu(x @ w1) @ w2

    return capture_memory(step, torch.zeros(1, d_model, device="cuda"), buckets).as_json_rows()
