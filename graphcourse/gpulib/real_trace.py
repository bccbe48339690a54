"""A torch.profiler trace of real decode steps, turned into the toy's timeline (a CPU lane and a GPU lane).

On a GPU, :func:`profile_steps` records a few steps of a decode loop; :func:`trace_rows` keeps
what the drawing needs as plain rows ``[lane, start_us, end_us, label, kind]`` (the benchmark
stores them, so learners without a GPU see the same picture); :func:`rows_to_timeline` builds
a :class:`toygraph.timeline.Timeline` from rows, which ``graphcourse.lessons.plots.draw_timeline``
draws exactly as it draws the toy's. On the CPU lane, CUDA runtime calls are bars of their
own kind (a kernel launch, a graph launch, a wait for the GPU); the rest of each step's CPU
time, Python and PyTorch's dispatcher around the launches, is drawn as host work.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

from toygraph.timeline import Event, Timeline

__all__ = ["LAUNCH_CALLS", "GRAPH_LAUNCH_CALLS", "WAIT_CALLS", "classify", "profile_steps", "rows_to_timeline",
           "trace_rows", "trace_summary"]

LAUNCH_CALLS = frozenset({"cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx",
                          "cudaMemcpyAsync", "cudaMemsetAsync"})
"""CUDA runtime and driver calls that queue one piece of GPU work."""
GRAPH_LAUNCH_CALLS = frozenset({"cudaGraphLaunch", "cuGraphLaunch"})
"""Calls that queue a whole graph."""
WAIT_CALLS = frozenset({"cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize"})
"""Calls in which the CPU waits for the GPU."""
STEP_LABEL = "decode step"

Row = list  # [lane, start_us, end_us, label, kind]


def classify(name: str, on_gpu: bool) -> str | None:
    """The timeline kind of one profiler event ('kernel', 'launch', 'graph_launch', 'wait'), or None to leave it out."""
    if on_gpu:
        return "kernel"
    if name in LAUNCH_CALLS:
        return "launch"
    if name in GRAPH_LAUNCH_CALLS:
        return "graph_launch"
    if name in WAIT_CALLS:
        return "wait"
    return None


def trace_rows(events: Iterable[tuple[str, bool, float, float]], steps: Sequence[tuple[float, float]],
               label_chars: int = 48) -> dict[str, Any]:
    """Rows of the timeline from raw events ``(name, on_gpu, start_us, end_us)`` and the steps' CPU intervals.

    Times are shifted so the first step starts at 0. CPU time inside a step not covered by a
    runtime call becomes 'host' bars; events outside every step are left out.
    """
    if not steps:
        raise ValueError("trace_rows needs the interval of at least one step (from record_function).")
    t0 = min(s for s, _ in steps)
    t_end = max(e for _, e in steps)
    rows: list[Row] = []
    cpu_calls: list[tuple[float, float]] = []
    for name, on_gpu, start, end in events:
        kind = classify(name, on_gpu)
        if kind is None or end < t0 or (not on_gpu and start > t_end):
            continue
        rows.append(["gpu" if on_gpu else "cpu", start - t0, end - t0, name[:label_chars], kind])
        if not on_gpu:
            cpu_calls.append((start, end))
    cpu_calls.sort()
    for start, end in steps:
        cursor = start
        for c_start, c_end in cpu_calls:
            if c_end <= cursor or c_start >= end:
                continue
            if c_start > cursor:
                rows.append(["cpu", cursor - t0, c_start - t0, "host work", "host"])
            cursor = max(cursor, c_end)
        if cursor < end:
            rows.append(["cpu", cursor - t0, end - t0, "host work", "host"])
    rows.sort(key=lambda r: (r[0], r[1]))
    last_gpu = max((r[2] for r in rows if r[0] == "gpu"), default=0.0)
    step_ends = [end - t0 for _, end in sorted(steps)]
    step_ends[-1] = max(step_ends[-1], last_gpu)
    return {"rows": rows, "step_end_us": step_ends}


def rows_to_timeline(trace: dict[str, Any]) -> Timeline:
    """A toygraph Timeline from stored rows, ready for ``graphcourse.lessons.plots.draw_timeline``."""
    events = [Event(lane, float(start), float(end), label, kind) for lane, start, end, label, kind in trace["rows"]]
    return Timeline(events, [float(t) for t in trace.get("step_end_us", [])])


def trace_summary(trace: dict[str, Any]) -> dict[str, float]:
    """Counts and totals of a stored trace: launches, graph launches, kernels, µs of CPU calls and of kernels."""
    rows = trace["rows"]

    def total(kind: str) -> float:
        return sum(r[2] - r[1] for r in rows if r[4] == kind)

    return {
        "kernel_launches": sum(r[4] == "launch" for r in rows),
        "graph_launches": sum(r[4] == "graph_launch" for r in rows),
        "kernels": sum(r[4] == "kernel" for r in rows),
        "kernel_us": total("kernel"),
        "launch_us": total("launch") + total("graph_launch"),
        "host_us": total("host"),
        "span_us": max((r[2] for r in rows), default=0.0),
    }


def profile_steps(step: Callable[[], Any], steps: int = 2, warmup: int = 3) -> dict[str, Any]:
    """Profile `steps` calls of `step` on a GPU (each inside record_function) and return :func:`trace_rows`."""
    import warnings

    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile, record_function

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*Profiler clears events")
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(steps):
                with record_function(STEP_LABEL):
                    step()
            torch.cuda.synchronize()
    raw, intervals = [], []
    for ev in prof.events():
        start, end = ev.time_range.start, ev.time_range.end
        if ev.name == STEP_LABEL:  # the CPU range, and its mirror on the GPU lane (a user annotation)
            if ev.device_type == DeviceType.CPU:
                intervals.append((start, end))
            continue
        raw.append((ev.name, ev.device_type == DeviceType.CUDA, start, end))
    return trace_rows(raw, sorted(intervals))
