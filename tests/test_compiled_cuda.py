"""Lesson 07's GPU facts about torch.compile(mode="reduce-overhead"), on a CUDA GPU (skipped without one)."""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _skips() -> int:
    return int(torch._dynamo.utils.counters["inductor"]["cudagraph_skips"])


def test_two_calls_in_one_step_are_refused_unless_each_step_is_marked() -> None:
    """The example of torch.compiler.cudagraph_mark_step_begin's documentation, both ways."""
    torch._dynamo.reset()

    @torch.compile(mode="reduce-overhead")
    def rand_foo() -> torch.Tensor:
        return torch.rand([4], device="cuda")

    with pytest.raises(RuntimeError, match="overwritten by a subsequent run"):
        for _ in range(4):
            rand_foo() + rand_foo()
    for _ in range(4):
        torch.compiler.cudagraph_mark_step_begin()
        total = rand_foo() + rand_foo()
    assert total.shape == (4,)


def _double() -> object:
    torch._dynamo.reset()

    @torch.compile(mode="reduce-overhead")
    def double(x: torch.Tensor) -> torch.Tensor:
        return x * 2 + 1

    return double


def test_an_output_of_a_replay_kept_across_the_next_call_is_overwritten_silently() -> None:
    """Call 1 warms up, call 2 records, later calls replay: a replay's output is not guarded
    (dealloc_current_path_weakrefs runs when a warm-up or a recording ends, not a replay),
    so it reads the next call's value with no error, as a hand-captured graph's output does."""
    double = _double()
    x1, x2 = torch.full((4,), 1.0, device="cuda"), torch.full((4,), 10.0, device="cuda")
    for _ in range(3):
        double(x1)
    first = double(x1)
    double(x2)
    assert first.tolist() == [21.0] * 4


@pytest.mark.parametrize("calls_before", [0, 1], ids=["warm-up output", "recording output"])
def test_an_output_of_the_warm_up_or_recording_call_raises_once_the_next_call_ran(calls_before: int) -> None:
    double = _double()
    x1, x2 = torch.full((4,), 1.0, device="cuda"), torch.full((4,), 10.0, device="cuda")
    for _ in range(calls_before):
        double(x1)
    kept = double(x1)
    double(x2)
    with pytest.raises(RuntimeError, match="overwritten by a subsequent run"):
        kept.tolist()


def test_a_cloned_output_survives_the_next_call() -> None:
    torch._dynamo.reset()

    @torch.compile(mode="reduce-overhead")
    def double(x: torch.Tensor) -> torch.Tensor:
        return x * 2 + 1

    x1, x2 = torch.full((4,), 1.0, device="cuda"), torch.full((4,), 10.0, device="cuda")
    for _ in range(3):
        double(x1)
    kept = double(x1).clone()
    double(x2)
    assert kept.tolist() == [3.0] * 4


def test_static_cache_and_state_keep_the_decode_step_in_cudagraphs_and_its_tokens() -> None:
    from graphcourse.gpulib.compiled import compiled_loop_step, eager_loop_step
    from graphcourse.gpulib.graphs import GPTConfig, TinyGPT, as_device_position

    torch._dynamo.reset()
    model = TinyGPT(GPTConfig(n_layers=2)).cuda()
    runs, skips = [], []
    for make in (eager_loop_step, compiled_loop_step):
        cache = model.new_cache(2)
        tokens = torch.tensor([3, 7], device="cuda")
        pos = as_device_position(0, "cuda")
        step = make(model, cache, tokens, pos)
        before = _skips()
        runs.append(torch.stack([step().clone() for _ in range(8)]).cpu())
        skips.append(_skips() - before)
        assert int(pos) == 8
    assert skips[1] == 0, "marked static, the in-place cache writes do not make the compiler skip graphs"
    assert (runs[0] == runs[1]).float().mean() >= 0.9, "fused kernels may break an argmax tie now and then"


def test_unmarked_in_place_writes_make_reduce_overhead_skip_graphs() -> None:
    from graphcourse.gpulib.compiled import compiled_loop_step
    from graphcourse.gpulib.graphs import GPTConfig, TinyGPT, as_device_position

    torch._dynamo.reset()
    model = TinyGPT(GPTConfig(n_layers=1)).cuda()
    cache = model.new_cache(1)
    step = compiled_loop_step(model, cache, torch.zeros(1, dtype=torch.long, device="cuda"),
                              as_device_position(0, "cuda"), static=False)
    before = _skips()
    for _ in range(3):
        step()
    assert _skips() - before >= 1


@pytest.mark.parametrize("partition", [True, False])
def test_torch_cond_under_reduce_overhead_runs_the_whole_graph_without_cuda_graphs(partition) -> None:
    """Lessons 01, 07 and 08: Inductor lowers torch.cond on GPU tensors to a host-side branch and sets
    disable_cudagraphs_reason ("control flow operator: torch.cond."), which CompiledFxGraph reads before it looks at
    graph partitions: the whole compiled graph skips CUDA graphs, partitioned or not (torch/_inductor/lowering.py,
    torch/_inductor/output_code.py). The skip is counted, and with triton.cudagraph_or_error it is raised with its
    reason."""
    import torch._inductor.config as inductor_config

    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.sum() > 0, lambda t: t * 2, lambda t: t - 1, (x,)) + 1

    x = torch.randn(8, device="cuda")
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    with inductor_config.patch(graph_partition=partition, fx_graph_cache=False):
        g = torch.compile(f, mode="reduce-overhead")
        for _ in range(3):
            out = g(x)
    torch.testing.assert_close(out, f(x))
    assert _skips() >= 1
    torch._dynamo.reset()
    with inductor_config.patch({"graph_partition": partition, "fx_graph_cache": False,
                                "triton.cudagraph_or_error": True}):
        with pytest.raises(Exception, match="control flow operator: torch.cond"):
            torch.compile(f, mode="reduce-overhead")(x)


def test_a_call_to_another_compiled_function_invalidates_a_kept_output() -> None:
    """Lesson 07 (issue 21, item 3): "valid until the next call" means the next call of ANY reduce-overhead function
    on the device, not only of the same one: CUDAGraph Trees keep one tree manager and one memory pool per device
    (cudagraph_trees.get_container), and a call to another compiled function starts a new generation. Observed in the
    lesson's own demo child: the kept output either raises torch's overwritten-output error or no longer holds its
    value."""
    from graphcourse.gpulib.compiled import run_demos

    seen = run_demos(parts=[1])["other_function"]
    assert "overwritten" in seen or ("no error" in seen and "reads 3 (3 expected)" not in seen), seen


def test_lesson_07_demo_shows_torch_cond_skipping_cuda_graphs() -> None:
    """Lesson 07's skip-reasons cell (issue 21, item 1): the demo child's torch.cond function under reduce-overhead
    is skipped, and the logged reason names torch.cond."""
    from graphcourse.gpulib.compiled import run_demos

    seen = run_demos(parts=[4])["skip_cond"]
    assert seen["skips"] >= 1 and any("torch.cond" in line for line in seen["logged"]), seen
