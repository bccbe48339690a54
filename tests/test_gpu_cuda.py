"""On a CUDA GPU: replay equals eager for the capture helper, the bucketed runner and the tiny GPT's decode step."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from graphcourse.gpulib import graphs as gpu
from toygraph.buckets import EagerFallbackWarning, padding_report

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (recorded results cover CPU machines)")
ROOT = Path(__file__).resolve().parent.parent


def small_step(x: torch.Tensor) -> torch.Tensor:
    return torch.relu(x @ x.T).sum(-1) + x[:, 0]


def test_replay_equals_eager_after_copying_new_inputs() -> None:
    graph = gpu.capture(small_step, torch.randn(8, 16, device="cuda"))
    for seed in range(3):
        x = torch.randn(8, 16, device="cuda", generator=torch.Generator("cuda").manual_seed(seed))
        torch.testing.assert_close(graph.replay(x), small_step(x))
    assert graph.static_output.data_ptr() == graph.replay(x).data_ptr(), "replay writes the same static output"


def test_captures_sharing_a_pool_each_stay_correct() -> None:
    pool = torch.cuda.graph_pool_handle()
    big = gpu.capture(small_step, torch.randn(64, 16, device="cuda"), pool=pool)
    small = gpu.capture(small_step, torch.randn(2, 16, device="cuda"), pool=pool)
    xb, xs = torch.randn(64, 16, device="cuda"), torch.randn(2, 16, device="cuda")
    out_b = big.replay(xb).clone()
    out_s = small.replay(xs).clone()
    torch.testing.assert_close(out_b, small_step(xb))
    torch.testing.assert_close(out_s, small_step(xs))
    assert big.memory.reserved_bytes >= 0 and small.memory.reserved_bytes >= 0


def test_bucketed_runner_on_gpu_equals_eager_and_falls_back_above_the_largest() -> None:
    runner = gpu.BucketedRunner(small_step, torch.zeros(1, 16, device="cuda"), [1, 2, 4, 8], progress=False)
    for n in range(1, 9):
        x = torch.randn(n, 16, device="cuda")
        torch.testing.assert_close(runner(x), small_step(x))
    with pytest.warns(EagerFallbackWarning):
        x = torch.randn(9, 16, device="cuda")
        torch.testing.assert_close(runner(x), small_step(x))
    report = runner.report()
    assert report.shared_pool and report.padding == padding_report(range(1, 10), [1, 2, 4, 8])
    assert report.padding.padded_rows == 1 + 3 + 2 + 1  # batches 3, 5, 6, 7 padded to 4, 8, 8, 8
    assert report.reserved_bytes > 0, "capturing graphs must cost some GPU memory"


@pytest.mark.parametrize("batch", [1, 4])
def test_decode_step_graph_equals_eager(batch: int) -> None:
    model = gpu.TinyGPT().cuda()
    cache = model.new_cache(batch)
    pos = gpu.as_device_position(3, "cuda")
    tokens = torch.randint(0, model.config.vocab_size, (batch,), device="cuda")
    graph = gpu.capture(lambda t: model.decode_logits(t, pos, cache), tokens)
    for p in (3, 4, 9):
        pos.fill_(p)
        torch.testing.assert_close(graph.replay(tokens), model.decode_logits(tokens, pos, cache))


def test_graphed_greedy_decoding_equals_full_recompute() -> None:
    model = gpu.TinyGPT(gpu.GPTConfig(max_len=32)).cuda()
    prompt = torch.randint(0, model.config.vocab_size, (2, 5), device="cuda")
    cache = model.new_cache(2)
    pos = gpu.as_device_position(0, "cuda")
    graph = gpu.capture(lambda t, p: model.decode_step(t, p, cache), prompt[:, 0], pos)
    step = lambda t, p: graph.replay(t, p).clone()  # noqa: E731
    got = gpu.greedy_tokens_cached(model, prompt, 10, step=step)
    assert torch.equal(got, gpu.greedy_tokens_eager(model, prompt, 10))


def test_timing_and_profile_helpers_measure_something() -> None:
    x = torch.zeros(1024, device="cuda")
    graph = gpu.capture(lambda: [x.add_(1.0) for _ in range(10)] and None)
    assert gpu.cuda_time_us(graph.replay, iters=20, warmup=2) > 0
    prof = gpu.kernel_profile(graph.replay, iters=4)
    assert prof.kernels_per_call == pytest.approx(10) and prof.kernel_time_us > 0
    assert gpu.benchmark_us(graph.replay, min_run_time_s=0.05) > 0


def test_item_inside_capture_fails_in_a_child_process() -> None:
    code = textwrap.dedent(
        """
        import torch
        x = torch.ones(4, device="cuda")
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = (x * 2).sum().item()
        """
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert ("operation not permitted when stream is capturing" in done.stderr
            or "operation failed due to a previous error during capture" in done.stderr), done.stderr[-2000:]


def test_capture_memory_pays_one_time_costs_before_any_bucket() -> None:
    report = gpu.capture_memory(small_step, torch.zeros(1, 16, device="cuda"), [1, 2, 4, 8])
    private = [r.private_added_bytes for r in report.rows]
    assert all(b >= 0 for b in private) and report.private_total_bytes > 0
    assert max(private) - min(private) < 8 * 2**20, f"one bucket carries a one-time cost: {private}"
    shared = {r.bucket: r.shared_added_bytes for r in report.rows}
    assert shared[8] > 0 and report.shared_total_bytes <= report.private_total_bytes
