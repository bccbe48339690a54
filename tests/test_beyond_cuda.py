"""Lesson 10's one-GPU facts, on a CUDA GPU (skipped without one): streams, random numbers, capture modes, training."""

from __future__ import annotations

import pytest
import torch

from graphcourse.core.child import run_snippet
from graphcourse.gpulib import beyond, fork_join

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _has_keep_graph():
    try:
        torch.cuda.CUDAGraph(keep_graph=True)
    except TypeError:
        return False
    return True


def test_two_streams_captured_with_fork_and_join_give_a_graph_with_parallel_branches():
    two = beyond.fork_join(two_streams=True)
    one = beyond.fork_join(two_streams=False)
    assert two["matches_eager"] and one["matches_eager"]
    if "error" in two["shape"] and not _has_keep_graph():
        pytest.skip(f"this torch has no CUDAGraph(keep_graph=...), so no dump: {two['shape']['error']}")
    # with keep_graph=True the cudaGraph_t survives capture_end and debug_dump must print it
    assert "error" not in two["shape"] and "error" not in one["shape"], (two["shape"], one["shape"])
    assert two["shape"]["keep_graph"] is True
    assert two["shape"]["widest_level"] >= 2            # the branches have no path between them
    assert one["shape"]["widest_level"] == 1            # one stream: a chain
    assert two["shape"]["kernels"] == one["shape"]["kernels"] >= 18
    assert two["shape"]["longest_path"] < one["shape"]["longest_path"]
    assert two["shape"]["edges"] > two["shape"]["nodes"] - 1   # the diamond: fork and join add edges


def test_a_fork_join_graph_replays_right_after_other_allocations_and_empty_cache():
    # the graph reads x, w1, w2 at their captured addresses: fork_join hands them back, and while they are
    # held, new allocations, another capture and empty_cache() cannot take or unmap their memory
    kept = beyond.fork_join(two_streams=True, debug=False)
    x, w1, w2 = kept["inputs"]
    expected = kept["output"].clone()
    other = beyond.fork_join(two_streams=False, debug=False)        # another capture (empty_cache on entry)
    junk = [torch.randn(256, 256, device="cuda") for _ in range(64)]
    del junk
    torch.cuda.empty_cache()
    for _ in range(3):
        kept["graph"].replay()
    torch.cuda.synchronize()
    assert torch.equal(kept["output"], expected)
    h = torch.tanh(x)
    eager = fork_join._branch(h, w1, 4) + fork_join._branch(h, w2, 4)
    assert torch.allclose(kept["output"], eager, atol=1e-5)
    assert other["matches_eager"]


def test_a_join_to_a_stream_that_was_never_forked_fails_the_capture():
    # CUDA programming guide: waiting on a non-captured event from a capturing stream is invalid
    # (cudaErrorStreamCaptureIsolation); the recorded message is in data/gpu_reference.json beyond.unforked_join
    done = run_snippet(beyond.unforked_join_snippet(), timeout_s=120)
    assert not done.ok, done.summary()
    assert beyond.result_line(done.stdout) is None, done.summary()      # the capture did not complete
    assert done.errors, done.summary()
    # the first error is the cause, cudaErrorStreamCaptureIsolation; every later call returns Invalidated
    cudart = pytest.importorskip("cuda.bindings.runtime")
    isolation = cudart.cudaGetErrorString(cudart.cudaError_t.cudaErrorStreamCaptureIsolation)[1].decode()
    invalidated = cudart.cudaGetErrorString(cudart.cudaError_t.cudaErrorStreamCaptureInvalidated)[1].decode()
    assert done.errors[0].endswith(isolation), (done.errors, isolation)
    assert done.errors[-1].endswith(invalidated), (done.errors, invalidated)
    print("CUDA's messages:", isolation, "|", invalidated)


def test_a_fork_that_never_joins_fails_the_capture():
    done = run_snippet(beyond.unjoined_fork_snippet(), timeout_s=120)
    assert not done.ok, done.summary()
    assert any("joined" in e or "Unjoined" in e or "unjoined" in e for e in done.errors), done.summary()


def test_dropout_in_a_graph_differs_on_every_replay_with_eager_statistics():
    d = beyond.dropout_replays(p=0.5, n=1 << 20, replays=4)
    assert d["replays_differ"]
    assert d["values"] == [0.0, 2.0]                    # kept values scaled by 1 / (1 - p)
    for f in d["dropped_fraction"] + d["eager_dropped_fraction"]:
        assert abs(f - 0.5) < 0.005                     # 1M draws: the binomial spread is 0.0005
    assert 0.45 < d["agreement_between_replays"] < 0.55  # independent masks agree on about half


def test_replay_k_draws_what_eager_call_k_drew_after_the_same_seed():
    s = beyond.replay_matches_eager_sequence(steps=3)
    assert all(s["replay_equals_eager"]), s
    assert s["eager_offsets"] == s["replay_offsets"]
    assert s["eager_offsets"][1] > s["eager_offsets"][0]


def test_a_registered_generator_moves_on_at_each_replay_and_an_unregistered_one_is_refused():
    assert hasattr(torch.cuda.CUDAGraph, "register_generator_state")
    facts = beyond.generator_facts()
    reg = facts["registered"]
    assert reg["returncode"] == 0 and reg["result"]["replays_differ"], reg
    unreg = facts["unregistered"]
    assert unreg["returncode"] != 0, unreg
    assert any("Attempt to increase offset" in e for e in unreg["errors"]), unreg


def test_capture_error_mode_guards_what_its_documentation_says():
    m = beyond.capture_mode_matrix()

    def failed(cell):
        return not cell["unsafe_call"].startswith("ok") or not cell["capture"].startswith("ok")

    assert failed(m["global"]["other thread"]), m["global"]
    assert not failed(m["thread_local"]["other thread"]), m["thread_local"]
    assert not failed(m["relaxed"]["other thread"]), m["relaxed"]
    assert failed(m["thread_local"]["same thread"]), m["thread_local"]
    assert not failed(m["relaxed"]["same thread"]), m["relaxed"]


def _rel(a, b):
    return max(abs(x - y) / max(abs(x), 1e-12) for x, y in zip(a, b))


def test_a_whole_training_step_in_a_graph_follows_the_eager_loss_curve():
    config = beyond.TrainConfig(steps=20)
    eager_capturable = beyond.train_eager(config, "cuda", capturable=True)
    eager = beyond.train_eager(config, "cuda")
    graphed = beyond.WholeStepGraph(config).train()
    assert len(graphed) == 20 and graphed[-1] < graphed[0]
    # the same optimizer arithmetic (AdamW capturable=True, bias corrections computed on the device):
    # the first steps agree to float32 round-off, and the whole curve to well within 1e-3
    assert max(abs(a - b) / abs(a) for a, b in zip(eager_capturable[:2], graphed[:2])) <= 1e-6
    assert _rel(eager_capturable, graphed) < 1e-3
    # against the default AdamW (bias corrections as Python floats) the curves drift apart slowly: on the
    # H200 the largest relative difference over 20 steps was 1.4e-3
    assert _rel(eager, graphed) < 1e-2


def test_make_graphed_callables_follows_the_eager_loss_curve():
    config = beyond.TrainConfig(steps=20)
    assert _rel(beyond.train_eager(config, "cuda"), beyond.train_partial(config)) < 1e-3


def test_a_step_under_bf16_autocast_without_its_cache_captures_and_follows_eager():
    config = beyond.TrainConfig(steps=20)
    eager = beyond.train_eager(config, "cuda", capturable=True, autocast_dtype=torch.bfloat16)
    graphed = beyond.WholeStepGraph(config, autocast_dtype=torch.bfloat16).train()
    assert _rel(eager, graphed) < 5e-2


def test_make_graphed_callables_refuses_autocast_with_its_cache_on():
    assert "cache_enabled=False" in beyond.autocast_cache_refusal()


def test_capturing_a_non_capturable_optimizer_step_is_refused():
    found = beyond.noncapturable_refusal()
    assert found["returncode"] != 0
    assert any("capturable is False" in e for e in found["errors"]), found
