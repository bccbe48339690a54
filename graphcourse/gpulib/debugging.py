"""Lesson 11's real-GPU side: graphs that go wrong, each in its own process, and the tools that find why.

Every scenario is a short Python program run in a fresh child interpreter: an illegal memory access
leaves the CUDA context of its process unusable (a "sticky" error: CUDA's runtime API documentation of
``cudaErrorIllegalAddress``); a failed capture does not, but a fresh process per scenario lets each
one start clean. The lesson runs them live on a
GPU; ``python -m graphcourse.gpulib.bench_debugging`` records what they printed for CPU learners.

The helpers that are not GPU-specific (:func:`bisect_first_failure`, :func:`first_divergence`) take
plain callables and numbers, so the lesson uses them on the toy and on the GPU alike.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

__all__ = [
    "Bisection", "bisect_first_failure", "first_divergence", "CAPTURE_FAILURES", "capture_failure",
    "FREED_INPUT", "freed_input", "sanitizer_report", "FORTY_OPS_GUILTY", "forty_ops_prefix",
    "bisect_forty_ops", "layer_by_layer", "liveness_check_available",
]


# --------------------------------------------------------------------------- method: bisect a capture


@dataclass
class Bisection:
    """What a bisection found: the first failing step (or None), how many tries it took, and each try."""

    n_steps: int
    first_bad: int | None
    tries: list[tuple[int, bool, str]] = field(default_factory=list)  # (prefix length, failed, error)

    @property
    def error(self) -> str:
        """The error of the shortest failing prefix ('' when nothing failed)."""
        failing = [t for t in self.tries if t[1]]
        return min(failing)[2] if failing else ""

    def lines(self, names: Sequence[str] | None = None) -> list[str]:
        """One line per try, then the verdict, naming ops by `names` when given."""
        out = [f"try {k}: the first {n:>2} ops (0..{n - 1}) -> {'FAILS' if bad else 'captures'}"
               for k, (n, bad, _) in enumerate(self.tries, 1)]
        if self.first_bad is None:
            out.append(f"all {self.n_steps} ops capture: the capture is not what fails")
        else:
            label = f" ({names[self.first_bad]})" if names else ""
            out.append(f"the first op that fails: op {self.first_bad}{label}, found in {len(self.tries)} "
                       f"captures of {self.n_steps} ops")
        return out


def bisect_first_failure(n_steps: int, fails: Callable[[int], str | None]) -> Bisection:
    """Find the first step whose inclusion makes a capture fail, by capturing prefixes.

    ``fails(k)`` captures steps ``0..k-1`` (a fresh graph each time) and returns the error text, or None
    when the capture succeeded. Assumes that once a prefix fails, every longer prefix fails too: true
    when every try runs its steps exactly as the full region does (cut only where all streams have
    joined; beware of allocations made only on a cache miss, one-time set-up, other threads).
    At most 1 + ceil(log2 n) captures instead of n.
    """
    if n_steps < 1:
        raise ValueError(f"nothing to bisect: {n_steps} steps (give the number of steps in the captured region)")
    result = Bisection(n_steps, None)

    def attempt(k: int) -> bool:
        err = fails(k)
        result.tries.append((k, err is not None, err or ""))
        return err is not None

    if not attempt(n_steps):
        return result
    lo, hi = 0, n_steps  # prefix lo captures (the empty prefix always does), prefix hi fails
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if attempt(mid):
            hi = mid
        else:
            lo = mid
    result.first_bad = hi - 1
    return result


# --------------------------------------------------------------------------- method: compare layer by layer


def first_divergence(eager: Mapping[str, Sequence[float]], graphed: Mapping[str, Sequence[float]],
                     atol: float = 1e-5, rtol: float = 1e-4) -> tuple[str | None, dict[str, float]]:
    """The first layer (in `eager`'s order) whose graphed output differs from eager's, and every layer's largest gap.

    A layer differs when some element has ``|g - e| > atol + rtol * |e|`` (``torch.allclose``'s rule). The
    first such layer is where to look: every layer after it reads a wrong input, so differs too.
    """
    gaps: dict[str, float] = {}
    first = None
    for name, e_vals in eager.items():
        if name not in graphed:
            raise KeyError(f"layer {name!r} was recorded eagerly but not in the graph: record the same layers")
        g_vals = graphed[name]
        if len(g_vals) != len(e_vals):
            raise ValueError(f"layer {name!r}: {len(e_vals)} values eagerly, {len(g_vals)} in the graph")
        gaps[name] = max((abs(g - e) for e, g in zip(e_vals, g_vals)), default=0.0)
        if first is None and any(abs(g - e) > atol + rtol * abs(e) for e, g in zip(e_vals, g_vals)):
            first = name
    return first, gaps


# --------------------------------------------------------------------------- scenarios, one process each


_CAPTURE_PRELUDE = """
import torch
x = torch.randn(1024, device="cuda")
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    y = (x * 2).relu()            # warm-up
torch.cuda.current_stream().wait_stream(s)
g = torch.cuda.CUDAGraph()
"""

# Three ways a capture fails, each the body of `with torch.cuda.graph(g):`.
CAPTURE_FAILURES = {
    "a sync: .item() in the step": "y = (x * 2).relu()\n    if y.sum().item() > 0:\n        y = y + 1",
    "a constant made from a Python list": "y = (x * 2).relu() + torch.tensor([1.0] * 1024, device='cuda')",
    "an allocation on a stream outside the capture":
        "y = (x * 2).relu()\n    with torch.cuda.stream(s):   # s never waited on the capture\n"
        "        big = torch.ones(64 * 2**20, device='cuda')   # 256 MiB: a fresh cudaMalloc",
}


def _capture_program(body: str) -> str:
    return _CAPTURE_PRELUDE + "with torch.cuda.graph(g):\n    " + body + "\nprint('captured')\n"


def capture_failure(name: str, timeout_s: float = 120.0) -> dict[str, Any]:
    """Run one of :data:`CAPTURE_FAILURES` in a child: did it capture, and the chain of errors it raised."""
    from ..core.child import run_snippet

    done = run_snippet(_capture_program(CAPTURE_FAILURES[name]), timeout_s=timeout_s)
    return {"code": CAPTURE_FAILURES[name], "captured": done.ok, "errors": done.errors}


# A graph that reads an input, then the input is freed: the trackers' "illegal memory access".
FREED_INPUT = """
import os, torch
x = torch.full((16 * 2**20,), 1.0, device="cuda")   # 64 MiB: a segment of its own
g = torch.cuda.CUDAGraph()
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    y = x * 2 + 1                                     # warm-up
torch.cuda.current_stream().wait_stream(s)
with torch.cuda.graph(g):
    y = x * 2 + 1
g.replay(); torch.cuda.synchronize()
print("replay with x alive:", y[:3].tolist())
x_address = x.data_ptr()
del x                                                 # the graph still reads x's address
if os.environ.get("COURSE_EMPTY_CACHE") == "1":
    torch.cuda.empty_cache()                          # its segment goes back to the driver
else:
    z = torch.full((16 * 2**20,), 5.0, device="cuda")  # the next allocation takes x's block
    print("a new tensor got x's old block:", z.data_ptr() == x_address)
g.replay()
print("replay() returned")
torch.cuda.synchronize()
print("replay with x freed:", y[:3].tolist())
"""


def _child_env(extra: Mapping[str, str]) -> dict[str, str]:
    return dict(os.environ, PYTHONUNBUFFERED="1", **extra)


def freed_input(empty_cache: bool, launch_blocking: bool = False, timeout_s: float = 120.0) -> dict[str, Any]:
    """Run :data:`FREED_INPUT` in a child: what it printed, where it stopped and the errors it raised."""
    from ..core.child import run_snippet

    res = run_snippet(FREED_INPUT, timeout_s=timeout_s,
                      env={"COURSE_EMPTY_CACHE": "1" if empty_cache else "0",
                           "CUDA_LAUNCH_BLOCKING": "1" if launch_blocking else "0"})
    printed = [ln for ln in res.stdout.splitlines() if ln.strip()]
    return {"empty_cache": empty_cache, "launch_blocking": launch_blocking, "returncode": res.returncode,
            "printed": printed, "errors": res.errors,
            "replay_returned": "replay() returned" in printed}


_SANITIZER_KEEP = re.compile(r"^=+ (Invalid|ERROR SUMMARY|Program hit|\s+at |\s+by thread|\s+Address|"
                             r"\s+Saved host backtrace|Error:|Target application)")


def sanitizer_report(reused: bool = False, timeout_s: float = 300.0, max_lines: int = 12) -> dict[str, Any]:
    """Run :data:`FREED_INPUT` under ``compute-sanitizer --tool memcheck``: segment returned, or block `reused`.

    Returns the report's first lines (host backtraces and addresses of this machine's files left out),
    or why it could not run.
    """
    tool = shutil.which("compute-sanitizer") or next(
        (p for p in ("/usr/local/cuda/bin/compute-sanitizer",) if os.path.exists(p)), None)
    if tool is None:
        return {"error": "compute-sanitizer is not installed here (it comes with the CUDA toolkit)"}
    env = _child_env({"COURSE_EMPTY_CACHE": "0" if reused else "1"})
    cmd = [tool, "--tool", "memcheck", "--show-backtrace", "device", sys.executable, "-c",
           textwrap.dedent(FREED_INPUT)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"compute-sanitizer ran past {timeout_s:g} s"}
    lines = (done.stdout + "\n" + done.stderr).splitlines()
    report = [ln.rstrip() for ln in lines if ln.startswith("=")]
    kept = [ln for ln in report if _SANITIZER_KEEP.match(ln)]
    first_kernel = next((ln for ln in report if "Invalid" in ln), "")
    kernel_at = next((ln.strip("= ").strip() for ln in report if ln.strip("= ").startswith("at ")), "")
    summary = next((ln for ln in report if "ERROR SUMMARY" in ln), "")
    version = subprocess.run([tool, "--version"], capture_output=True, text=True).stdout.strip().splitlines()
    command = 'compute-sanitizer --tool memcheck --show-backtrace device python -c "$FREED_INPUT"'
    return {"reused": reused, "command": command,
            "version": version[-1] if version else "", "returncode": done.returncode,
            "first_error": first_kernel.strip("= ").strip(), "kernel": kernel_at,
            "summary": summary.strip("= ").strip(), "lines": kept[:max_lines],
            "printed": [ln for ln in done.stdout.splitlines() if ln and not ln.startswith("=")]}


# --------------------------------------------------------------------------- bisecting forty ops

FORTY_OPS_GUILTY = 27  # the op that builds a constant from a Python list (a host-to-device copy)


def _forty_ops_program(k: int) -> str:
    return _CAPTURE_PRELUDE + textwrap.dedent(f"""
        def op(i, t):
            if i == {FORTY_OPS_GUILTY}:
                return t + torch.tensor([0.5] * t.numel(), device="cuda")
            return (t * 1.01 + 0.1).tanh() if i % 2 else t.relu() - 0.01
        for i in range({k}):                          # warm-up of the same ops
            y = op(i, x if i == 0 else y)
        with torch.cuda.graph(g):
            t = x
            for i in range({k}):
                t = op(i, t)
        print("captured")
        """)


def forty_ops_prefix(k: int, timeout_s: float = 120.0) -> str | None:
    """Capture the first `k` of forty ops in a child; the error text, or None when it captured."""
    from ..core.child import run_snippet

    done = run_snippet(_forty_ops_program(k), timeout_s=timeout_s)
    return None if done.ok else (done.error or f"exit code {done.returncode}")


def bisect_forty_ops(n_ops: int = 40) -> dict[str, Any]:
    """Bisect the forty-op capture on the GPU: each try a fresh child process."""
    import time

    start = time.perf_counter()
    found = bisect_first_failure(n_ops, forty_ops_prefix)
    return {"n_ops": n_ops, "guilty": FORTY_OPS_GUILTY, "first_bad": found.first_bad,
            "tries": [list(t) for t in found.tries], "error": found.error, "lines": found.lines(),
            "seconds": time.perf_counter() - start}


# --------------------------------------------------------------------------- compare layer by layer


def layer_by_layer(seed: int = 0, width: int = 64) -> dict[str, Any]:
    """A four-layer step whose 'scale' layer bakes a Python float: each layer's output, eager against replay.

    Forward hooks copy each layer's output into a buffer made before capture (the copies are captured,
    so every replay refreshes them); after changing the Python float, the eager run and a replay
    differ from the 'scale' layer on.
    """
    import torch

    torch.manual_seed(seed)

    class Scale(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.factor = 1.0  # a Python float: read when the step runs, so baked in at capture

        def forward(self, t: torch.Tensor) -> torch.Tensor:
            return t * self.factor

    model = torch.nn.Sequential()
    model.add_module("fc1", torch.nn.Linear(width, width))
    model.add_module("scale", Scale())
    model.add_module("act", torch.nn.GELU())
    model.add_module("fc2", torch.nn.Linear(width, width))
    model = model.cuda().eval()
    x = torch.randn(4, width, device="cuda")
    taps = {name: torch.empty(4, width, device="cuda") for name, _ in model.named_children()}

    def hook(name: str) -> Callable:
        def record(_m: Any, _inp: Any, out: torch.Tensor) -> None:
            taps[name].copy_(out)
        return record

    handles = [m.register_forward_hook(hook(n)) for n, m in model.named_children()]
    with torch.no_grad():
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                model(x)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            model(x)
        model.scale.factor = 0.5  # e.g. a temperature changed between requests
        g.replay()
        torch.cuda.synchronize()
        graphed = {n: t.flatten().tolist() for n, t in taps.items()}
        model(x)
        torch.cuda.synchronize()
        eager = {n: t.flatten().tolist() for n, t in taps.items()}
    for h in handles:
        h.remove()
    first, gaps = first_divergence(eager, graphed)
    return {"layers": list(eager), "first_divergent": first, "max_abs_gap": gaps,
            "change": "model.scale.factor = 0.5 after capture (captured at 1.0)"}


def liveness_check_available() -> dict[str, Any]:
    """Whether the installed torch's ``torch.cuda.graph`` takes ``check_input_liveness`` (added in torch 2.13)."""
    import inspect

    import torch

    params = inspect.signature(torch.cuda.graph.__init__).parameters
    return {"torch": torch.__version__, "check_input_liveness": "check_input_liveness" in params}
