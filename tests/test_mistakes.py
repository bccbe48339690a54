"""Lesson 06's helpers: a failing snippet in a child process gives its exit code and error lines, never raising."""

from __future__ import annotations

import re

import pytest

from graphcourse.lessons.teaching import cuda_here
from graphcourse.lessons.mistakes import (EXPECTED, ChildResult, error_lines, live_or_expected,
                                          run_snippet, tp_step_kernels)


def test_a_snippet_that_succeeds_reports_exit_0_and_its_output():
    result = run_snippet("print('hello from the child')")
    assert result.ok and result.returncode == 0
    assert result.stdout.strip() == "hello from the child"
    assert result.errors == [] and result.error == ""
    assert "exit code 0" in result.summary()


def test_a_snippet_that_raises_reports_the_exception_line_without_paths():
    result = run_snippet("""
        def capture():
            raise RuntimeError('operation not permitted when stream is capturing')
        capture()
    """)
    assert result.returncode == 1 and not result.ok
    assert result.error == "RuntimeError: operation not permitted when stream is capturing"
    assert "File" not in result.summary() and "/" not in result.error


def test_a_chained_error_gives_every_exception_first_raised_first():
    result = run_snippet("""
        try:
            raise ValueError('CUBLAS_STATUS_NOT_INITIALIZED')
        finally:
            raise RuntimeError('operation failed due to a previous error during capture')
    """)
    assert result.errors == ["ValueError: CUBLAS_STATUS_NOT_INITIALIZED",
                             "RuntimeError: operation failed due to a previous error during capture"]
    assert result.error.startswith("RuntimeError")
    assert "then:" in result.summary()


def test_the_toy_capture_error_comes_back_from_the_child():
    result = run_snippet("""
        from toygraph import ToyDevice, ToyGraph, graph, launch
        dev = ToyDevice(); x = dev.tensor([1.0, 2.0]); g = ToyGraph(dev)
        with graph(g):
            launch(lambda v: [max(v)], x).item()
    """)
    assert result.returncode == 1
    assert result.error.startswith("toygraph.errors.CaptureError: operation not permitted when stream is capturing")


def test_a_hanging_snippet_times_out_instead_of_hanging():
    result = run_snippet("import time; print('started', flush=True); time.sleep(30)", timeout_s=1.5)
    assert result.timed_out and result.returncode is None and not result.ok
    assert "TimeoutError" in result.error and "timed out after 1.5 s" in result.summary()


def test_a_process_that_exits_without_a_traceback_reports_its_last_line():
    result = run_snippet("import sys; sys.stderr.write('fatal: context lost\\n'); sys.exit(3)")
    assert result.returncode == 3 and result.error == "fatal: context lost"


def test_error_lines_keep_only_the_first_line_of_a_multiline_message_and_shorten_paths():
    stderr = ("Traceback (most recent call last):\n  File \"/home/someone/x.py\", line 1, in <module>\n"
              "torch.AcceleratorError: CUDA error: operation failed due to a previous error during capture\n"
              "CUDA kernel errors might be asynchronously reported at some other API call\n")
    assert error_lines(stderr) == ["torch.AcceleratorError: CUDA error: operation failed due to a previous error during capture"]
    assert error_lines("OSError: cannot open /home/someone/data/file.bin\n") == ["OSError: cannot open file.bin"]
    assert error_lines("") == []


def test_live_or_expected_labels_the_expected_text_when_no_gpu(capsys):
    if cuda_here():
        pytest.skip("a CUDA GPU is here: the helper runs the snippet live")
    assert live_or_expected("raise SystemExit(5)", EXPECTED["default_stream"]) is None
    shown = capsys.readouterr().out
    assert "not run here" in shown and "Expected, not measured" in shown
    assert "CUDA graphs must be captured on a non-default stream" in shown and "CUDAGraph.cpp" in shown


def test_every_expected_text_names_an_exception_and_a_source():
    for key, exp in EXPECTED.items():
        assert re.match(r"[\w.]+(Error|Exception): \S", exp.text), f"{key}: {exp.text!r} should read 'SomeError: message'"
        assert exp.source, f"{key}: an expected text must say where it comes from"


def test_tp_step_kernels_repeats_one_layer():
    step = tp_step_kernels(layers=3, compute_kernels=2, compute_us=3.0, allreduces=1, allreduce_us=40.0)
    assert step == [3.0, 3.0, 40.0] * 3
    with pytest.raises(ValueError):
        tp_step_kernels(0, 2, 3.0, 1, 40.0)
    with pytest.raises(ValueError):
        tp_step_kernels(2, 2, -1.0, 1, 40.0)


def test_child_result_of_a_signal_says_so():
    assert "killed by signal 9" in ChildResult(-9, "", "").summary()
