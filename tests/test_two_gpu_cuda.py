"""Lesson 10's two-GPU facts (skipped with fewer than two GPUs): an NCCL all-reduce in a graph, the side-stream trap."""

from __future__ import annotations

import os

import pytest
import torch

from graphcourse.core.child import run_snippet
from graphcourse.gpulib import multigpu
from graphcourse.gpulib.beyond import result_line

pytestmark = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2,
                                reason="needs two CUDA GPUs")
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")


def test_an_all_reduce_replayed_from_a_graph_gives_the_sum_on_both_ranks():
    out = multigpu.run_allreduce("nccl", world=2, sizes=(256, 65536), repeats=1, ops_per_graph=4, replays=5)
    assert len(out["ranks"]) == 2
    for r in out["ranks"]:
        assert "error" not in r, r
        assert r["eager_sum_ok"] and r["graph_sum_ok"], r
        assert r["graph_sums"] == [3.0, 3.0]
        assert all(row["graph_us"] > 0 and row["eager_us"] > 0 for row in r["rows"])


def _run(name):
    done = run_snippet(multigpu.trap_snippet(name), timeout_s=120)
    return done, result_line(done.stdout)


def test_the_side_stream_on_the_wrong_gpu_is_refused_during_capture():
    done, _ = _run("trap")
    assert done.capture_refused, done.summary()


@pytest.mark.parametrize("fix", ["fix_stream", "fix_device"])
def test_each_fix_captures_and_replays(fix):
    done, found = _run(fix)
    assert done.ok, done.summary()
    assert found["replay_value"] == 2.0


def test_a_default_capture_stream_made_on_cuda0_is_kept_for_later_captures():
    done, found = _run("stale_default_stream")
    assert found["default_capture_stream_device"] == "cuda:0"
    assert done.capture_refused, done.summary()


def test_without_an_allocation_the_wrong_gpu_capture_is_silent_and_the_graph_empty():
    done, found = _run("silent_empty_graph")
    assert done.ok, done.summary()
    assert found["replay_value"] == 2.0 != found["expected_value"]     # replay recomputed nothing
