"""graphcourse.gpulib.real_trace without a GPU: profiler events become the toy's timeline rows."""

from __future__ import annotations

import pytest

from graphcourse.gpulib.real_trace import classify, rows_to_timeline, trace_rows, trace_summary


def _events():
    # name, on_gpu, start_us, end_us: two steps of two launches each, kernels running later on the GPU
    return [
        ("aten::linear", False, 100, 140),
        ("cudaLaunchKernel", False, 105, 110), ("cudaLaunchKernel", False, 120, 126),
        ("gemv_kernel", True, 112, 115), ("gelu_kernel", True, 128, 129),
        ("cudaGraphLaunch", False, 150, 154), ("node0", True, 156, 160), ("node1", True, 160, 163),
        ("cudaStreamSynchronize", False, 170, 180),
    ]


def test_kinds_follow_the_cuda_calls() -> None:
    assert classify("cudaLaunchKernel", False) == "launch"
    assert classify("cudaGraphLaunch", False) == "graph_launch"
    assert classify("cudaStreamSynchronize", False) == "wait"
    assert classify("aten::linear", False) is None
    assert classify("anything", True) == "kernel"


def test_rows_start_at_zero_and_host_time_fills_the_gaps_between_calls() -> None:
    trace = trace_rows(_events(), [(100, 140), (145, 181)])
    rows = trace["rows"]
    assert min(r[1] for r in rows) == 0
    cpu = sorted((r for r in rows if r[0] == "cpu"), key=lambda r: r[1])
    assert [r[4] for r in cpu][:4] == ["host", "launch", "host", "launch"]
    # inside each step the CPU lane is covered without overlap: calls plus host time = the step's length
    for start, end in [(0, 40), (45, 81)]:
        inside = [r for r in cpu if r[1] >= start and r[2] <= end]
        assert sum(r[2] - r[1] for r in inside) == pytest.approx(end - start)
    assert "aten::linear" not in {r[3] for r in rows}, "operator ranges overlap their launches: left out"
    summary = trace_summary(trace)
    assert summary["kernel_launches"] == 2 and summary["graph_launches"] == 1 and summary["kernels"] == 4
    assert summary["kernel_us"] == pytest.approx(3 + 1 + 4 + 3)


def test_a_stored_trace_becomes_a_timeline_the_plots_draw() -> None:
    from graphcourse.lessons.plots import draw_timeline

    timeline = rows_to_timeline(trace_rows(_events(), [(100, 140), (145, 181)]))
    assert timeline.busy_us("gpu") == pytest.approx(11)
    assert len(timeline.step_end_us) == 2
    ax = draw_timeline(timeline, title="synthetic")
    assert ax.get_title(loc="left").startswith("synthetic")


def test_trace_rows_needs_a_step() -> None:
    with pytest.raises(ValueError, match="at least one step"):
        trace_rows(_events(), [])
