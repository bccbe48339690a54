"""Lesson 03's helpers: side-by-side comparison and reading a failed capture's error lines."""

from __future__ import annotations

import sys

import pytest

import toygraph as tg
from graphcourse import compare


def test_side_by_side_agrees_for_a_toy_buffer_and_a_tensor() -> None:
    torch = pytest.importorskip("torch")
    toy = tg.ToyGraph(tg.ToyDevice())
    toy.record(lambda x: [v * 2 for v in x])
    toy.record(lambda x: [v + 1 for v in x])
    text = compare.side_by_side(toy.replay([1, 2, 3]), torch.tensor([1.0, 2.0, 3.0]) * 2 + 1, "eager torch")
    assert text.splitlines() == ["toygraph    : [3, 5, 7]", "eager torch : [3, 5, 7]", "same        : True"]


def test_same_values_rejects_other_values_and_lengths() -> None:
    assert compare.same_values([1, 2], [1.0, 2.0 + 1e-9])
    assert not compare.same_values([1, 2], [1, 3])
    assert not compare.same_values([1, 2], [1, 2, 3])


def test_error_lines_keeps_each_exception_line_once_and_no_paths() -> None:
    stderr = (
        "Traceback (most recent call last):\n  File \"/some/path.py\", line 5, in <module>\n"
        "torch.AcceleratorError: CUDA error: operation failed due to a previous error during capture\n"
        "Search for `cudaErrorStreamCaptureInvalidated' for more.\n\nDuring handling of the above exception, another exception occurred:\n"
        "RuntimeError: CUDA error: operation not permitted when stream is capturing\n"
        "RuntimeError: CUDA error: operation not permitted when stream is capturing\n"
    )
    lines = compare.error_lines(stderr)
    assert lines == ["torch.AcceleratorError: CUDA error: operation failed due to a previous error during capture",
                     "RuntimeError: CUDA error: operation not permitted when stream is capturing"]
    assert compare.ChildResult(1, "", stderr).capture_refused
    assert not compare.ChildResult(0, "", stderr).capture_refused
    assert not compare.ChildResult(1, "", "ValueError: something else\n").capture_refused


def test_run_failing_capture_reports_a_child_error_without_touching_this_process() -> None:
    result = compare.run_failing_capture("raise ValueError('captured for batch 1, replayed with batch 17')")
    assert result.returncode == 1
    assert result.errors == ["ValueError: captured for batch 1, replayed with batch 17"]
    assert not result.capture_refused


def test_recorded_error_shows_both_lines_torch_printed() -> None:
    lines = compare.RECORDED_ITEM_IN_CAPTURE.splitlines()
    assert [any(m in line for line in lines) for m in compare.CAPTURE_ERROR_MARKERS] == [True, True]
    assert compare.ChildResult(1, "", compare.RECORDED_ITEM_IN_CAPTURE).capture_refused
    assert ".item()" in compare.ITEM_IN_CAPTURE and sys.executable


def test_lessons_03_and_06_share_one_child_process_helper() -> None:
    from graphcourse import child, mistakes

    assert compare.run_snippet is child.run_snippet is mistakes.run_snippet
    assert compare.ChildResult is mistakes.ChildResult is child.ChildResult


def test_live_or_recorded_text_labels_recorded_text_on_a_machine_without_cuda(capsys, monkeypatch) -> None:
    import graphcourse.teaching as teaching

    monkeypatch.setattr(teaching, "cuda_here", lambda: False)
    compare.live_or_recorded_text(lambda: "never called", compare.RECORDED_SHARED_POOL, "what the two graphs gave")
    out = capsys.readouterr().out
    assert out.startswith("No CUDA GPU here: what the two graphs gave, recorded on the course's NVIDIA H200")
    assert "never called" not in out and "g2 gave 30" in out


def test_two_graph_demo_needs_a_gpu_and_says_so() -> None:
    import pytest as _pytest
    import torch

    if torch.cuda.is_available():
        _pytest.skip("checks the refusal on a machine without CUDA")
    from graphcourse.errors import NoCudaError

    with _pytest.raises(NoCudaError, match="capturing two graphs"):
        compare.two_graphs_one_pool()
