"""Lesson 11's GPU facts, on a CUDA GPU (skipped without one): each scenario in its own child process."""

from __future__ import annotations

import shutil

import pytest
import torch

from graphcourse.gpulib import debugging as gpu

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.parametrize("name,first", [
    ("a sync: .item() in the step", "operation not permitted when stream is capturing"),
    ("a constant made from a Python list", "unless the CPU tensor is pinned"),
    ("an allocation on a stream outside the capture", "operation not permitted when stream is capturing"),
])
def test_each_capture_failure_gives_the_first_error_the_lesson_shows(name, first):
    found = gpu.capture_failure(name)
    assert not found["captured"] and found["errors"], found
    assert first in found["errors"][0], found["errors"]


def test_a_freed_input_reused_gives_silent_wrong_numbers():
    found = gpu.freed_input(empty_cache=False)
    assert found["returncode"] == 0, found
    assert "a new tensor got x's old block: True" in found["printed"]
    assert found["printed"][-1] == "replay with x freed: [11.0, 11.0, 11.0]"


def test_a_freed_input_returned_faults_at_synchronize_and_at_replay_with_launch_blocking():
    late = gpu.freed_input(empty_cache=True)
    now = gpu.freed_input(empty_cache=True, launch_blocking=True)
    for found in (late, now):
        assert found["returncode"] != 0 and "illegal memory access" in found["errors"][0], found
    assert late["replay_returned"] and not now["replay_returned"]


@pytest.mark.skipif(shutil.which("compute-sanitizer") is None and not
                    __import__("os").path.exists("/usr/local/cuda/bin/compute-sanitizer"),
                    reason="needs compute-sanitizer (CUDA toolkit)")
def test_compute_sanitizer_sees_the_returned_segment_and_not_the_reused_block():
    returned = gpu.sanitizer_report()
    assert returned["first_error"].startswith("Invalid __global__ read"), returned
    assert "MulFunctor" in returned["kernel"]
    reused = gpu.sanitizer_report(reused=True)
    assert reused["summary"] == "ERROR SUMMARY: 0 errors" and reused["returncode"] == 0, reused
    assert reused["printed"][-1] == "replay with x freed: [11.0, 11.0, 11.0]"


def test_bisecting_forty_real_ops_finds_the_guilty_one():
    found = gpu.bisect_forty_ops()
    assert found["first_bad"] == gpu.FORTY_OPS_GUILTY
    assert len(found["tries"]) <= 7 and "pinned" in found["error"]


def test_layer_by_layer_names_the_layer_with_the_baked_python_float():
    found = gpu.layer_by_layer()
    assert found["first_divergent"] == "scale" and found["max_abs_gap"]["fc1"] == 0.0


def test_the_liveness_check_gate_matches_the_installed_torch():
    found = gpu.liveness_check_available()
    major, minor = (int(v) for v in torch.__version__.split(".")[:2])
    assert found["check_input_liveness"] == ((major, minor) >= (2, 13))
