"""Lesson 03's helpers: a toy result beside the real one, and captures that are meant to fail, run in a child process.

A failed CUDA-graph capture can leave the CUDA context unusable for the rest of the process, so
:func:`run_failing_capture` runs the capture in a fresh Python and hands back only the error lines.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from typing import Any, Sequence

ITEM_IN_CAPTURE = '''import torch
x = torch.ones(4, device="cuda")
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    token = (x * 2).sum().item()   # a sync: the CPU asks for a value the GPU has not computed
'''
"""A capture that reads a value on the CPU: CUDA refuses it."""

CAPTURE_ERROR_MARKERS = (
    "operation not permitted when stream is capturing",
    "operation failed due to a previous error during capture",
)
"""What CUDA says about a sync during capture: the refused call, then the capture it invalidated (cudaErrorStreamCaptureInvalidated)."""

RECORDED_ITEM_IN_CAPTURE = (
    "torch.AcceleratorError: CUDA error: operation not permitted when stream is capturing\n"
    "torch.AcceleratorError: CUDA error: operation failed due to a previous error during capture"
)
"""The error lines the course's H200 machine printed for ITEM_IN_CAPTURE (torch 2.11.0+cu130, 2026-11-30), recorded text.

First the refused sync itself, then the error torch raises when it ends the capture that the refusal invalidated.
"""

_ERROR_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception)): (.+)$")


@dataclass(frozen=True)
class ChildResult:
    """How a child Python ended: its exit status and the first line of each exception it printed."""

    returncode: int
    errors: tuple[str, ...]

    @property
    def capture_refused(self) -> bool:
        """True when the child failed with one of CUDA's capture errors."""
        return self.returncode != 0 and any(m in e for e in self.errors for m in CAPTURE_ERROR_MARKERS)


def error_lines(stderr: str) -> tuple[str, ...]:
    """The `Name: message` line of every exception in a traceback text, in order, without repeats or file paths."""
    found: list[str] = []
    for line in stderr.splitlines():
        match = _ERROR_LINE.match(line.strip())
        if match and line.strip() not in found:
            found.append(line.strip())
    return tuple(found)


def run_failing_capture(code: str = ITEM_IN_CAPTURE, timeout_s: float = 120) -> ChildResult:
    """Run `code` in a child Python (a failed capture can poison this process's CUDA context) and report how it failed."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout_s)
    return ChildResult(done.returncode, error_lines(done.stderr))


def as_values(x: Any) -> list[float]:
    """A plain list of floats from a toy buffer, a list or a tensor (copied to the CPU)."""
    if hasattr(x, "detach"):
        x = x.detach().cpu().reshape(-1).tolist()
    return [float(v) for v in x]


def same_values(a: Any, b: Any, tol: float = 1e-5) -> bool:
    """True when both hold the same number of values, each equal within `tol` (relative to its size)."""
    va, vb = as_values(a), as_values(b)
    return len(va) == len(vb) and all(abs(x - y) <= tol * max(1.0, abs(x), abs(y)) for x, y in zip(va, vb))


def side_by_side(toy: Any, real: Any, real_name: str = "torch.cuda.graph") -> str:
    """Two aligned lines, the toy's values and the real ones, and whether they agree."""
    width = max(len("toygraph"), len(real_name))
    fmt = lambda xs: "[" + ", ".join(f"{v:g}" for v in as_values(xs)) + "]"  # noqa: E731
    return (f"{'toygraph':<{width}} : {fmt(toy)}\n{real_name:<{width}} : {fmt(real)}\n"
            f"{'same':<{width}} : {same_values(toy, real)}")


def memory_per_bucket_live(buckets: Sequence[int] = (1, 2, 4, 8, 16, 32, 64)) -> dict[str, Any]:
    """On a GPU: the tiny GPT's decode step, memory added by each bucket's capture (graphcourse.gpu.capture_memory)."""
    import torch

    from .gpu import TinyGPT, as_device_position, capture_memory

    model = TinyGPT().cuda()
    cache = model.new_cache(max(buckets))
    pos = as_device_position(16, "cuda")

    def step(tok: "torch.Tensor") -> "torch.Tensor":
        return model.decode_step(tok, pos, cache.batch_view(tok.shape[0]))

    memory = capture_memory(step, torch.zeros(max(buckets), dtype=torch.long, device="cuda"), buckets)
    return {"buckets": list(buckets), "memory_per_bucket": memory.as_json_rows(),
            "memory_one_time_bytes": memory.one_time_bytes, "kv_cache_bytes": cache.nbytes}
