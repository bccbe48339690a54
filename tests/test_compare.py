"""Lesson 03's helpers: side-by-side comparison and reading a failed capture's error lines."""

from __future__ import annotations

import sys

import pytest

import toygraph as tg
from graphcourse.lessons import compare


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


FACTS = {"provenance": {"gpu_name": "Fake GPU", "date_utc": "2026-11-30T09:00:00Z", "torch": "9.9"},
         "facts": {"shared_pool": "g2 gave 30", "warmup_stream": {"other_stream_pool_allocated_bytes": 2**25,
                                                                  "same_stream_pool_allocated_bytes": 2**17},
                   "item_in_capture_errors": [
                       "torch.AcceleratorError: CUDA error: operation not permitted when stream is capturing",
                       "torch.AcceleratorError: CUDA error: operation failed due to a previous error during capture"],
                   "mistakes": {"cold_cublas": {"returncode": 1, "errors": ["RuntimeError: x"],
                                                "summary": "  exit code 1\n  error: RuntimeError: x"}}}}


def _recorded_here(monkeypatch, tmp_path, data=FACTS):
    import json

    import graphcourse.lessons.reference as reference
    import graphcourse.lessons.teaching as teaching

    path = tmp_path / "gpu_reference.json"
    path.write_text(json.dumps(data))
    monkeypatch.setattr(reference, "default_reference_path", lambda: path)
    monkeypatch.setattr(teaching, "cuda_here", lambda: False)


def test_recorded_sync_in_capture_errors_come_from_the_benchmark_run() -> None:
    text = compare.recorded_item_in_capture(FACTS)
    assert [any(m in line for line in text.splitlines()) for m in compare.CAPTURE_ERROR_MARKERS] == [True, True]
    assert compare.ChildResult(1, "", text).capture_refused
    assert ".item()" in compare.ITEM_IN_CAPTURE and sys.executable

def test_lessons_03_and_06_share_one_child_process_helper() -> None:
    from graphcourse.core import child
    from graphcourse.lessons import mistakes

    assert compare.run_snippet is child.run_snippet is mistakes.run_snippet
    assert compare.ChildResult is mistakes.ChildResult is child.ChildResult


def test_live_or_recorded_text_shows_the_recorded_fact_with_its_run(capsys, monkeypatch, tmp_path) -> None:
    _recorded_here(monkeypatch, tmp_path)
    compare.live_or_recorded_text(lambda: "never called", "shared_pool", "what the two graphs gave")
    out = capsys.readouterr().out
    assert out.startswith("No CUDA GPU here: what the two graphs gave, recorded on Fake GPU, 2026-11-30, torch 9.9")
    assert "never called" not in out and "g2 gave 30" in out
    compare.live_or_recorded_text(lambda: "", "warmup_stream", "sizes", compare.warmup_lines)
    assert "32.00 MiB allocated" in capsys.readouterr().out
    compare.live_or_recorded_text(lambda: "", "not_there", "x")
    assert "no recorded result" in capsys.readouterr().out


def test_lesson_06_shows_a_recorded_child_run_or_says_none_was_recorded(capsys, monkeypatch, tmp_path) -> None:
    from graphcourse.lessons import mistakes

    _recorded_here(monkeypatch, tmp_path)
    assert mistakes.live_or_expected(mistakes.SNIPPETS["cold_cublas"], "cold_cublas") is None
    out = capsys.readouterr().out
    assert "recorded on Fake GPU" in out and "error: RuntimeError: x" in out
    mistakes.live_or_expected("", "default_stream")
    assert "Expected, not measured" in capsys.readouterr().out

def test_two_graph_demo_needs_a_gpu_and_says_so() -> None:
    import pytest as _pytest
    import torch

    if torch.cuda.is_available():
        _pytest.skip("checks the refusal on a machine without CUDA")
    from graphcourse.errors import NoCudaError

    with _pytest.raises(NoCudaError, match="capturing two graphs"):
        compare.two_graphs_one_pool()


def test_pool_table_shows_allocated_beside_reserved_and_copes_with_old_recordings() -> None:
    rows = [{"bucket": 2, "private_pool_reserved_bytes": 2**21, "shared_pool_reserved_bytes": 0,
             "private_pool_allocated_bytes": 2**10, "shared_pool_allocated_bytes": 2**10},
            {"bucket": 1, "private_pool_reserved_bytes": 2**21, "shared_pool_reserved_bytes": 2**21,
             "private_pool_allocated_bytes": 512, "shared_pool_allocated_bytes": 512}]
    text = compare.pool_table_lines(rows)
    assert text.splitlines()[1].startswith("bucket  1: own private pool  0.000 /  2.0")
    assert "all 2 graphs, one shared pool: 0.001 MiB allocated, 2.0 MiB reserved" in text
    old = [{k: v for k, v in r.items() if "allocated" not in k} for r in rows]
    assert "no allocated bytes" in compare.pool_table_lines(old)
