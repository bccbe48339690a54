"""Lesson 08's GPU facts: K decode steps in one graph, IF nodes, a real profiler trace (skipped without CUDA)."""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

from graphcourse.gpulib.device_loop import MultiStepDecoder, conditional_nodes_supported  # noqa: E402
from graphcourse.gpulib.graphs import GPTConfig, TinyGPT, greedy_tokens_cached  # noqa: E402

needs_if = pytest.mark.skipif(not conditional_nodes_supported(), reason="this torch/CUDA has no IF nodes")


@pytest.fixture(scope="module")
def model() -> TinyGPT:
    return TinyGPT(GPTConfig(n_layers=2), seed=1).cuda()


@pytest.mark.parametrize("k", [1, 8])
def test_k_steps_in_one_graph_give_the_one_step_loops_tokens(model: TinyGPT, k: int) -> None:
    prompt = torch.randint(0, model.config.vocab_size, (4, 3), device="cuda",
                           generator=torch.Generator("cuda").manual_seed(0))
    reference = greedy_tokens_cached(model, prompt, 16)
    decoder = MultiStepDecoder(model, 4, k)
    assert decoder.graph is not None
    decoder.start(prompt)
    assert torch.equal(decoder.generate(16), reference)
    assert decoder.memory["reserved_bytes"] > 0, "the graph's own pool holds its intermediates"


def test_one_replay_is_one_graph_launch_for_k_tokens(model: TinyGPT) -> None:
    from graphcourse.gpulib.real_trace import profile_steps, trace_summary

    decoder = MultiStepDecoder(model, 1, 8)

    def launch() -> None:
        decoder.state.pos.zero_()
        decoder.host_pos = 0
        decoder.launch()

    summary = trace_summary(profile_steps(launch, steps=2))
    assert summary["graph_launches"] == 2
    assert summary["kernels"] > 8 * 2 * 10, "eight decode steps' kernels per launch ran on the GPU"


@needs_if
def test_an_if_node_runs_its_body_only_when_the_device_value_says_so() -> None:
    pred = torch.ones((), dtype=torch.bool, device="cuda")
    x = torch.full((4,), 3.0, device="cuda")
    y = torch.zeros(4, device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=stream):
        g.begin_capture_to_if_node(pred)
        y.copy_(x * 2)
        g.end_capture_to_conditional_node()
        x.add_(1)
    for flag, expected_y in ((False, 0.0), (True, 8.0)):
        pred.fill_(flag)
        y.zero_()
        g.replay()
        torch.cuda.synchronize()
        assert y.tolist() == [expected_y] * 4
    assert x.tolist() == [5.0] * 4, "the node after the IF ran on both replays"


@needs_if
def test_guarded_steps_are_skipped_on_the_device_once_every_sequence_is_done(model: TinyGPT) -> None:
    eos = model.config.vocab_size - 1
    plain = MultiStepDecoder(model, 2, 4, eos_id=eos)
    guarded = MultiStepDecoder(model, 2, 4, eos_id=eos, skip_done_steps=True)
    prompt = torch.tensor([[5, 6], [7, 8]], device="cuda")
    for dec in (plain, guarded):
        dec.start(prompt)
    assert torch.equal(plain.generate(8), guarded.generate(8)), "running sequences: the same tokens"
    guarded.state.done.fill_(True)
    pos = int(guarded.state.pos)
    out = guarded.launch()
    torch.cuda.synchronize()
    assert int(guarded.state.pos) == pos, "every step skipped: the position did not move"
    assert bool((out == eos).all())


def test_a_profiler_trace_of_an_eager_step_shows_launches_and_kernels(model: TinyGPT) -> None:
    from graphcourse.gpulib.compiled import eager_loop_step
    from graphcourse.gpulib.graphs import as_device_position
    from graphcourse.gpulib.real_trace import profile_steps, trace_summary

    cache = model.new_cache(1)
    tokens, pos = torch.zeros(1, dtype=torch.long, device="cuda"), as_device_position(0, "cuda")
    step = eager_loop_step(model, cache, tokens, pos)

    def one() -> None:
        pos.fill_(4)
        step()

    summary = trace_summary(profile_steps(one, steps=2))
    assert summary["graph_launches"] == 0
    assert summary["kernel_launches"] >= summary["kernels"] * 0.9 > 20
    assert summary["host_us"] > summary["kernel_us"] * 0.1


HAND_GRAPH_THEN_REDUCE_OVERHEAD = r'''
import torch
from graphcourse.gpulib.device_loop import MultiStepDecoder
from graphcourse.gpulib.graphs import TinyGPT, greedy_tokens_cached

model = TinyGPT(seed=1).cuda()
prompt = torch.randint(0, model.config.vocab_size, (8, 3), device="cuda",
                       generator=torch.Generator("cuda").manual_seed(0))
reference = greedy_tokens_cached(model, prompt, 32)
decoder = MultiStepDecoder(model, 8, 4)          # captured by hand first

@torch.compile(mode="reduce-overhead")
def matmuls(a, b):
    return (a @ b).relu() @ b

a, b = torch.randn(64, 64, device="cuda"), torch.randn(64, 64, device="cuda")
for _ in range(3):                               # warm-up, record, replay: cuBLAS workspaces cleared
    matmuls(a, b)
torch.cuda.empty_cache()
junk = [torch.full((1 << 20,), 7.0, device="cuda") for _ in range(8)]   # reuse whatever was freed
decoder.start(prompt)
same = torch.equal(decoder.generate(32), reference)
torch.cuda.synchronize()
print("SAME", same)
'''


def test_a_hand_captured_decode_graph_survives_reduce_overhead_recording_in_the_same_process() -> None:
    """The benchmark's crash (graph_k4 at batch 8 replayed after reduce-overhead recorded, illegal memory access),
    reproduced in a child so a crash cannot poison this process; MultiStepDecoder clears the cuBLAS workspaces
    before capturing so that its graph owns its workspace."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", HAND_GRAPH_THEN_REDUCE_OVERHEAD], capture_output=True,
                          text=True, timeout=600, env=env, cwd=root)
    assert done.returncode == 0 and "SAME True" in done.stdout, done.stderr[-2000:]
