"""Lesson 13's GPU facts, on a CUDA GPU (skipped without one): the fused MLP's kernels and the floors' inputs."""

from __future__ import annotations

import pytest
import torch

from graphcourse.gpulib import bench_floors, fused_attention, fused_mlp
from graphcourse.gpulib.device_loop import MultiStepDecoder
from graphcourse.gpulib.graphs import TinyGPT

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.parametrize("batch", [1, 3, 8])
@pytest.mark.parametrize("pdl", [False, True])
def test_the_two_triton_kernels_compute_the_mlp_block(batch, pdl):
    if pdl and not fused_mlp.pdl_support()["gdc"]:
        pytest.skip("this Triton has no gdc_wait")
    blk = TinyGPT().cuda().blocks[1]
    x = torch.randn(batch, 256, device="cuda")
    got = fused_mlp.fused_mlp_residual(blk, x, pdl=pdl)
    torch.testing.assert_close(got, x + blk.mlp(x), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("path", ["compiled_graph_k1", "fused_mlp_graph_k1", "fused_mlp_pdl_graph_k1",
                                  "fused_attention_graph_k1", "fused_both_graph_k1", "fused_both_pdl_graph_k1"])
def test_each_graphed_lever_gives_the_tokens_of_the_plain_graph(path):
    model = TinyGPT().cuda()
    step = bench_floors.graphed_steps(model)[path]
    if step is None:
        pytest.skip(f"{path} is not available with this Triton")
    plain, lever = MultiStepDecoder(model, 4, 1), MultiStepDecoder(model, 4, 1, step=step)
    for dec in (plain, lever):
        dec.reset()
    assert torch.equal(plain.generate(48), lever.generate(48))


@pytest.mark.parametrize("batch", [1, 8])
def test_the_attention_kernel_writes_the_cache_and_attends_as_pytorch_does(batch):
    model = TinyGPT().cuda()
    mine, ref = model.new_cache(batch), model.new_cache(batch)
    for cache in (mine, ref):
        cache.k.normal_(generator=torch.Generator("cuda").manual_seed(1))
        cache.v.normal_(generator=torch.Generator("cuda").manual_seed(2))
    qkv = torch.randn(batch, 3 * 256, device="cuda")
    for pos in (0, 5, 127):
        index = torch.tensor([pos], device="cuda")
        got = fused_attention.decode_attention(2, qkv, index, mine)
        want = fused_attention.decode_attention_reference(2, qkv, index, ref)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
        assert torch.equal(mine.k, ref.k) and torch.equal(mine.v, ref.v)


def test_one_replay_is_all_kernels_and_the_fused_graph_has_fewer():
    found = bench_floors.bench_anatomy(1, steps=2)
    plain, fused = found["paths"]["graph_k1"], found["paths"]["fused_mlp_graph_k1"]
    assert "error" not in plain and "error" not in fused, found
    # five kernels of the MLP block become two, in each of the four layers
    assert plain["kernels_per_replay"] - fused["kernels_per_replay"] == 4 * 3
    assert plain["span_us"]["median"] >= plain["kernel_us"]["median"] > 0


def test_the_device_floors_are_in_the_range_of_an_h200_class_gpu():
    dev = bench_floors.bench_device(repeats=2)
    assert dev["l2_gbps"]["median"] > dev["hbm_gbps"]["median"] > 100
    assert dev["fp32_tflops"]["median"] > 1
