"""Lesson 09's GPU facts, checked on a CUDA GPU (skipped without one)."""

from __future__ import annotations

import gc

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.fixture(scope="module")
def model():
    from graphcourse.gpulib.graphs import GPTConfig, TinyGPT

    return TinyGPT(GPTConfig(), seed=0).cuda()


def _fresh():
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def test_largest_first_into_one_pool_takes_less_memory_than_a_pool_per_graph(model):
    from graphcourse.gpulib.graphs import as_device_position
    from graphcourse.gpulib.serving import capture_list

    sizes = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128)
    cache = model.new_cache(128)
    pos = as_device_position(16, "cuda")
    capture_list(model, cache, pos, sizes, measure_memory=False).release()  # one-time costs first
    _fresh()
    shared = capture_list(model, cache, pos, sizes, shared_pool=True)
    shared_bytes = shared.memory.pool_reserved_bytes
    assert len({tuple(g.pool()) for g in shared.graphs.values()}) == 1
    shared.release()
    _fresh()
    private = capture_list(model, cache, pos, sizes, shared_pool=False)
    private_bytes = private.memory.pool_reserved_bytes
    assert len({tuple(g.pool()) for g in private.graphs.values()}) == len(sizes)
    private.release()
    assert shared_bytes < private_bytes, (shared_bytes, private_bytes)


def test_every_captured_size_replays_the_eager_tokens(model):
    from graphcourse.gpulib.graphs import as_device_position
    from graphcourse.gpulib.serving import capture_list

    cache = model.new_cache(16)
    pos = as_device_position(5, "cuda")
    got = capture_list(model, cache, pos, (1, 4, 16), measure_memory=False)
    for b in (16, 4, 1):  # capture order: graphs of one pool that do not feed each other may replay in any order
        tokens = torch.randint(0, model.config.vocab_size, (b,), device="cuda")
        slots = torch.arange(b, device="cuda")
        got.static_inputs[b][0].copy_(tokens)
        got.static_inputs[b][1].copy_(slots)
        got.graphs[b].replay()
        replayed = got.static_outputs[b].clone()
        assert torch.equal(replayed, model.decode_step(tokens, pos, cache, slots=slots))
    got.release()


def test_padded_replay_gives_the_eager_tokens_and_writes_only_the_scratch_slot(model):
    from graphcourse.gpulib.serving import ServingDecoder, clone_cache, kv_rows_touched

    server = ServingDecoder(model, (1, 2, 4, 8), max_batch=8, position=16)
    server.cache.k.normal_()
    server.cache.v.normal_()
    tokens = torch.tensor([5, 17, 99, 3, 42], device="cuda")
    slots = torch.arange(5, device="cuda")
    reference = clone_cache(server.cache)
    # eager on the padded batch of 8 (the graph's own shapes, so the same kernels): the real rows must agree exactly
    padded_tokens = torch.cat([tokens, torch.zeros(3, dtype=torch.long, device="cuda")])
    padded_slots = torch.cat([slots, torch.full((3,), server.cache.pad_slot, device="cuda")])
    expected = model.decode_step(padded_tokens, server.pos, reference, slots=padded_slots)[:5]
    before = clone_cache(server.cache)
    got = server(tokens, slots)
    assert server.dispatched[-1] == ("graph", 5, 8)
    assert torch.equal(got, expected)
    assert kv_rows_touched(before, server.cache) == [0, 1, 2, 3, 4, server.cache.pad_slot]
    torch.testing.assert_close(server.cache.k[:, :5], reference.k[:, :5], rtol=1e-5, atol=1e-5)


def test_above_the_largest_size_runs_eagerly(model):
    from toygraph.buckets import EagerFallbackWarning

    from graphcourse.gpulib.serving import ServingDecoder

    server = ServingDecoder(model, (1, 2), max_batch=4, position=3)
    with pytest.warns(EagerFallbackWarning):
        out = server(torch.tensor([1, 2, 3], device="cuda"), torch.arange(3, device="cuda"))
    assert out.shape == (3,) and server.dispatched[-1][0] == "eager"


@pytest.mark.parametrize("batch", [1, 8])
def test_piecewise_graphs_give_the_full_graphs_tokens(model, batch):
    from graphcourse.gpulib.graphs import as_device_position
    from graphcourse.gpulib.serving import PiecewiseDecoder, full_graph_step

    pos = as_device_position(7, "cuda")
    cache = model.new_cache(batch)
    tokens = torch.randint(0, model.config.vocab_size, (batch,), device="cuda")
    slots = torch.arange(batch, device="cuda")
    full = full_graph_step(model, cache, pos, batch)
    pw = PiecewiseDecoder(model, cache, pos, batch)
    assert pw.graph_count == model.config.n_layers + 1
    eager = model.decode_step(tokens, pos, cache, slots=slots).clone()
    assert torch.equal(full.replay(tokens, slots).clone(), eager)
    for _ in range(3):  # replays again and again, reading the fresh attention output each time
        assert torch.equal(pw(tokens, slots), eager)
    other = torch.randint(0, model.config.vocab_size, (batch,), device="cuda")
    assert torch.equal(pw(other, slots), model.decode_step(other, pos, cache, slots=slots))
