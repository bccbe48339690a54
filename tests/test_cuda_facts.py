"""GPU facts the lessons teach (issue 8, points 1-4 and 6), each checked live on CUDA; skipped on a CPU.

Each test is the live form of a sentence in a lesson; the lesson names the source it comes from
(PyTorch's CUDA semantics notes, torch/cuda/graphs.py, pytorch/pytorch#166975, vLLM's runner).
"""

from __future__ import annotations

import pytest
import torch

from graphcourse.gpulib import graphs as gpu

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (recorded results cover CPU machines)")

N = 4096


def _warm(fn, *args, stream: torch.cuda.Stream | None = None) -> torch.cuda.Stream:
    side = stream or torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn(*args)
    torch.cuda.current_stream().wait_stream(side)
    return side


def _two_graphs_in_one_pool():
    """g1 computes (x1 * 2) + 1 through an intermediate it frees; g2, captured next into the same pool, computes x2 * 3."""
    from graphcourse.lessons.compare import two_graphs_one_pool

    return two_graphs_one_pool(N)


# --------------------------------------------------------------------------- point 1: shared pools


def test_graphs_sharing_a_pool_may_replay_in_any_order() -> None:
    demo = _two_graphs_in_one_pool()
    x1, x2 = torch.randn(N, device="cuda"), torch.randn(N, device="cuda")
    demo.x1.copy_(x1)
    demo.x2.copy_(x2)
    demo.g2.replay()  # the reverse of capture order
    got2 = demo.out2.clone()
    demo.g1.replay()
    got1 = demo.out1.clone()
    torch.testing.assert_close(got2, x2 * 3)
    torch.testing.assert_close(got1, x1 * 2 + 1)


def test_an_output_kept_across_another_graphs_replay_in_the_shared_pool_is_overwritten() -> None:
    demo = _two_graphs_in_one_pool()
    assert demo.out2.data_ptr() == demo.intermediate_ptr, "g2's output reused the block g1's intermediate freed"
    x1, x2 = torch.randn(N, device="cuda"), torch.randn(N, device="cuda")
    demo.x1.copy_(x1)
    demo.x2.copy_(x2)
    demo.g2.replay()
    kept = demo.out2  # not cloned
    demo.g1.replay()  # writes its intermediate x1 * 2 into the same block
    torch.cuda.synchronize()
    torch.testing.assert_close(kept, x1 * 2)
    assert not torch.allclose(kept, x2 * 3)


def test_with_private_pools_the_same_output_survives() -> None:
    from graphcourse.lessons.compare import two_graphs_one_pool

    demo = two_graphs_one_pool(N, share_pool=False)
    x1, x2 = torch.randn(N, device="cuda"), torch.randn(N, device="cuda")
    demo.x1.copy_(x1)
    demo.x2.copy_(x2)
    demo.g2.replay()
    demo.g1.replay()
    torch.testing.assert_close(demo.out2, x2 * 3)


# --------------------------------------------------------------------------- point 2: make_graphed_callables


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).cuda()


def test_make_graphed_callables_returns_aliases_of_its_static_output() -> None:
    eager = _mlp()
    graphed = torch.cuda.make_graphed_callables(_mlp(), (torch.randn(8, 16, device="cuda"),))
    x1, x2 = torch.randn(8, 16, device="cuda"), torch.randn(8, 16, device="cuda")
    y1 = graphed(x1)
    first = y1.clone()
    y2 = graphed(x2)
    assert y1.data_ptr() == y2.data_ptr(), "both calls return the same static output buffer"
    torch.testing.assert_close(first, eager(x1))
    torch.testing.assert_close(y1, eager(x2)), "the first result was overwritten by the second call"
    assert not y1.requires_grad or y1.grad_fn is not None


def test_make_graphed_callables_runs_eagerly_when_the_training_flag_differs() -> None:
    graphed = torch.cuda.make_graphed_callables(_mlp(), (torch.randn(8, 16, device="cuda"),))  # captured in train mode
    x = torch.randn(8, 16, device="cuda")
    in_graph = graphed(x).data_ptr()
    assert graphed(x).data_ptr() == in_graph
    graphed.eval()
    a, b = graphed(x), graphed(x)
    assert a.data_ptr() != in_graph and a.data_ptr() != b.data_ptr(), "eval() runs the original forward, new tensors"


def test_make_graphed_callables_refuses_modules_with_hooks_and_autocast_caching() -> None:
    hooked = _mlp()
    hooked.register_forward_hook(lambda *a: None)
    with pytest.raises(AssertionError, match="hooks"):
        torch.cuda.make_graphed_callables(hooked, (torch.randn(8, 16, device="cuda"),))
    with torch.autocast("cuda"), pytest.raises(RuntimeError, match="cache_enabled=False"):
        torch.cuda.make_graphed_callables(_mlp(), (torch.randn(8, 16, device="cuda"),))
    with torch.autocast("cuda", cache_enabled=False):
        graphed = torch.cuda.make_graphed_callables(_mlp(), (torch.randn(8, 16, device="cuda"),))
        assert graphed(torch.randn(8, 16, device="cuda")).dtype == torch.float16


# --------------------------------------------------------------------------- point 3: warm up on the capture stream


def test_warming_up_on_the_capture_stream_keeps_lazy_workspaces_out_of_the_graph_pool() -> None:
    from graphcourse.lessons.compare import warmup_stream_demo

    result = warmup_stream_demo()
    assert result["same_stream_pool_allocated_bytes"] < result["other_stream_pool_allocated_bytes"], result


WORKSPACE_CLEARING_SNIPPET = """
import torch
from graphcourse.gpulib.graphs import pool_memory
w = torch.randn(1024, 1024, device="cuda")
x = torch.randn(64, 1024, device="cuda")
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    for _ in range(3):
        x @ w
torch.cuda.current_stream().wait_stream(s)
torch.cuda.synchronize()
graphs = []
def capture():
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        x @ w
    graphs.append(g)
    return pool_memory(g.pool()).allocated_bytes
warmed = capture()
compiled = torch.compile(lambda a: a @ w, mode="reduce-overhead")
for _ in range(3):
    compiled(x)
after_compile = capture()
torch._C._cuda_clearCublasWorkspaces()
after_clearing = capture()
print("RESULT", warmed, after_compile, after_clearing)
"""


def test_cleared_cublas_workspaces_land_in_the_next_capture_pool_and_cudagraph_trees_clear_them() -> None:
    """Lesson 03, "The other side of that choice": a capture on the warmed-up stream keeps the workspace out of its
    pool; after torch._C._cuda_clearCublasWorkspaces(), or after torch.compile's CUDAGraph Trees warmed up and
    recorded (clear_cublass_cache), the next capture on that stream makes its workspace inside its own pool."""
    from graphcourse.core.child import run_snippet

    result = run_snippet(WORKSPACE_CLEARING_SNIPPET, 600)
    line = next((ln for ln in result.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line is not None, result.summary()
    warmed, after_compile, after_clearing = (int(v) for v in line.split()[1:])
    output = 64 * 1024 * 4
    assert warmed < output + 2**20, (warmed, "no workspace in the pool of a capture on the warmed-up stream")
    assert after_compile > warmed + 2**20, (after_compile, warmed, "CUDAGraph Trees freed the stream's workspace")
    assert after_clearing > warmed + 2**20, (after_clearing, warmed, "clearing made the capture allocate its own")


def test_capture_helper_warms_up_and_captures_on_one_stream() -> None:
    w = torch.randn(256, 256, device="cuda")
    graph = gpu.capture(lambda x: x @ w, torch.randn(8, 256, device="cuda"))
    x = torch.randn(8, 256, device="cuda")
    torch.testing.assert_close(graph.replay(x), x @ w)
    assert graph.memory.allocated_bytes >= 8 * 256 * 4, "the output lives in the graph's pool"
    assert graph.memory.allocated_bytes < 4 * 2**20, "no cuBLAS workspace was allocated inside the capture"


# --------------------------------------------------------------------------- point 4: padded rows and the KV cache


def test_padded_rows_replayed_on_the_gpu_write_only_the_scratch_slot() -> None:
    model = gpu.TinyGPT(gpu.GPTConfig(max_len=16)).cuda()
    cache = model.new_cache(4)
    pos = gpu.as_device_position(2, "cuda")
    runner = gpu.decode_runner(model, cache, pos, (1, 2, 4), progress=False)
    tokens = torch.tensor([5, 6, 7, 8], device="cuda")
    slots = torch.arange(4, device="cuda")
    runner(tokens, slots)
    live = cache.k[:, 3].clone()
    pos.fill_(3)
    runner(tokens[:3], slots[:3])
    torch.cuda.synchronize()
    assert torch.equal(cache.k[:, 3], live), "the padded row wrote into a live sequence's slot"
    assert cache.k[:, cache.pad_slot, :, 3].abs().sum() > 0
    eager = model.decode_step(tokens[:3], pos, model.new_cache(4), slots=slots[:3])
    assert eager.shape == (3,)


# --------------------------------------------------------------------------- point 6: conditional nodes


def test_torch_cond_is_captured_into_a_conditional_node_when_this_torch_supports_it() -> None:
    from graphcourse.lessons.compare import cond_capture_demo

    result = cond_capture_demo()
    if not result["supported"]:
        pytest.skip(f"this torch cannot capture torch.cond into a conditional node: {result['reason']}")
    assert result["when_true"] == pytest.approx(2.0) and result["when_false"] == pytest.approx(-1.0), result


def test_without_conditional_node_support_a_plain_torch_cond_in_capture_is_a_refused_sync() -> None:
    from graphcourse.lessons.compare import PLAIN_COND_IN_CAPTURE, cond_capture_demo, run_snippet

    if cond_capture_demo()["supported"]:
        pytest.skip("this torch captures torch.cond into conditional nodes (tested above)")
    result = run_snippet(PLAIN_COND_IN_CAPTURE, timeout_s=300)
    assert result.capture_refused, result.summary()


def test_graphs_captured_on_one_stream_into_a_shared_pool_reuse_its_memory() -> None:
    """The caching allocator reuses a freed block only on its stream: gpu.capture uses one stream for every capture."""
    d = 1024
    w1 = torch.randn(d, 4 * d, device="cuda")
    w2 = torch.randn(4 * d, d, device="cuda")

    def step(x):
        return torch.relu(x @ w1) @ w2

    gpu.capture(step, torch.zeros(2, d, device="cuda"))  # one-time costs out of the way
    pool = torch.cuda.graph_pool_handle()
    big = gpu.capture(step, torch.zeros(256, d, device="cuda"), pool=pool)
    small_shared = gpu.capture(step, torch.zeros(128, d, device="cuda"), pool=pool)
    small_private = gpu.capture(step, torch.zeros(128, d, device="cuda"))
    assert big.memory.reserved_bytes > 0
    assert small_shared.memory.reserved_bytes < small_private.memory.reserved_bytes, (
        small_shared.memory, small_private.memory)
