"""The stand-in for torch.cuda that ex15 grades against keeps PyTorch's rules (tests/test_standin_cuda_cuda.py checks
the same rules on a real GPU, and on two)."""

from __future__ import annotations

import re

import pytest

from graphcourse.lessons.standin_cuda import (CAPTURE_ERROR, DEFAULT_STREAM_ERROR, EMPTY_GRAPH_WARNING,
                                              AcceleratorError, StandInCuda, block_bytes, calling_with,
                                              segment_bytes)

EMPTY = re.escape(EMPTY_GRAPH_WARNING)


def two_kernels(m):
    def step(x):
        h = m.op("scale", lambda v: [2 * a for a in v], x)
        return m.op("shift", lambda v: [a + 1 for a in v], h)
    return step


def test_a_stream_is_made_on_the_current_device_unless_told():
    m = StandInCuda(2)
    cuda = m.torch.cuda
    assert cuda.Stream().device_index == 0
    assert cuda.Stream(device=1).device_index == 1
    assert cuda.Stream(device="cuda:1").device_index == 1
    assert cuda.Stream(device=m.torch.device("cuda:1")).device_index == 1
    with cuda.device(1):
        assert cuda.Stream().device_index == 1
    assert cuda.current_device() == 0
    with pytest.raises(AcceleratorError, match="invalid device ordinal"):
        cuda.Stream(device=2)


def test_a_stream_context_makes_its_device_current_and_restores_both():
    m = StandInCuda(2)
    cuda = m.torch.cuda
    s = cuda.Stream(device=1)
    before = m.state()
    with cuda.stream(s):
        assert cuda.current_device() == 1 and cuda.current_stream() is s and cuda.current_stream(1) is s
        assert cuda.current_stream(0).is_default
    assert m.state() == before


def test_an_op_runs_on_the_current_stream_of_its_tensors_device():
    m = StandInCuda(2)
    cuda, step = m.torch.cuda, two_kernels(m)
    s0 = cuda.Stream()  # on cuda:0
    with cuda.stream(s0):
        y = step(m.tensor([1.0, 2.0], device=1))
    assert y.values == [3.0, 5.0]
    assert [e[2:] for e in m.log if e[0] == "op"] == [("default stream of cuda:1", 1)] * 2


def test_capture_on_the_right_device_replays_the_step_on_new_data():
    m = StandInCuda(2)
    cuda, step = m.torch.cuda, two_kernels(m)
    x = m.tensor([0.0, 0.0], device=1)
    s = cuda.Stream(device=1)
    g = cuda.CUDAGraph()
    with cuda.graph(g, stream=s):
        y = step(x)
    assert y.values == [0.0, 0.0] or y.values == [1.0, 1.0]  # a real capture only records
    x.copy_(m.tensor([1.0, 4.0], device=1))
    g.replay()
    assert y.values == [3.0, 9.0]
    assert [e[0] for e in m.log].count("captured") == 2


def test_the_graphs_own_stream_is_made_once_on_the_device_current_then():
    m = StandInCuda(2)
    cuda, step = m.torch.cuda, two_kernels(m)
    g0 = cuda.CUDAGraph()
    with cuda.graph(g0):
        step(m.tensor([1.0], device=0))
    first = cuda.graph.default_capture_stream
    assert first.device_index == 0
    with cuda.device(1):
        g1 = cuda.CUDAGraph()
        with pytest.raises(AcceleratorError) as err:
            with cuda.graph(g1):  # the class attribute is still on cuda:0
                step(m.tensor([1.0], device=1))  # cuda:1 holds no memory yet: its first cudaMalloc is refused
    assert cuda.graph.default_capture_stream is first
    assert str(err.value) == CAPTURE_ERROR
    assert str(err.value).startswith("CUDA error: operation not permitted when stream is capturing")
    assert "cudaErrorStreamCaptureUnsupported" in str(err.value)
    with pytest.raises(RuntimeError, match="Called CUDAGraph::replay without a preceding successful capture"):
        g1.replay()
    assert m.state() == {"device": 0, "streams": ["default stream of cuda:0", "default stream of cuda:1"]}


def test_a_fresh_process_makes_the_graphs_own_stream_where_the_device_context_says():
    m = StandInCuda(2)
    cuda, step = m.torch.cuda, two_kernels(m)
    with cuda.device(1):
        g = cuda.CUDAGraph()
        with cuda.graph(g):
            step(m.tensor([1.0], device=1))
    assert cuda.graph.default_capture_stream.device_index == 1
    assert StandInCuda(2).torch.cuda.graph.default_capture_stream is None  # one process, one class attribute


def test_relaxed_mode_runs_the_other_devices_work_outside_the_graph_silently():
    m = StandInCuda(2)
    cuda, step = m.torch.cuda, two_kernels(m)
    x = m.tensor([1.0], device=1)
    g = cuda.CUDAGraph()
    with pytest.warns(UserWarning, match=EMPTY):
        with cuda.graph(g, stream=cuda.Stream(), capture_error_mode="relaxed"):
            y = step(x)
    assert y.values == [3.0]  # ran eagerly during the capture
    x.copy_(m.tensor([10.0], device=1))
    g.replay()
    assert y.values == [3.0]  # the graph holds none of it
    assert [e[0] for e in m.log].count("outside capture") == 2
    with pytest.raises(RuntimeError, match="Unknown capture error mode"):
        cuda.graph(cuda.CUDAGraph(), capture_error_mode="lax")


def test_other_device_work_during_capture_fails_only_where_it_needs_new_memory():
    """Lesson 10's two outcomes (data/gpu_reference.json, two_gpu.trap): "silent_empty_graph" and "trap"."""
    m = StandInCuda(2)
    cuda = m.torch.cuda
    x = m.tensor([1.0] * 1024, device=1)  # small: the 2 MiB segment of cuda:1's default stream has room
    g = cuda.CUDAGraph()
    with pytest.warns(UserWarning, match=EMPTY):
        with cuda.graph(g):  # the graph's own stream, made on cuda:0
            y = m.op("double", lambda v: [2 * a for a in v], x)  # runs at once on cuda:1, no cudaMalloc
    assert y.values[0] == 2.0 and ("empty graph", g.id) in m.log
    x.copy_(m.tensor([5.0] * 1024, device=1))
    g.replay()  # an empty graph: nothing runs
    assert y.values[0] == 2.0
    big = m.tensor([1.0] * ((10 << 20) // 4), device=1)  # 10 MiB: a segment of its own
    with pytest.raises(AcceleratorError) as err:
        with cuda.graph(cuda.CUDAGraph()):
            m.op("double", lambda v: [2 * a for a in v], big)  # 10 MiB more on cuda:1: cudaMalloc, refused
    assert str(err.value) == CAPTURE_ERROR and not cuda.is_current_stream_capturing()
    g2 = cuda.CUDAGraph()
    with cuda.graph(g2, stream=cuda.Stream(device=1)):  # on the data's device: the graph's pool, never refused
        out = m.op("double", lambda v: [2 * a for a in v], big)
    big.copy_(m.tensor([3.0] * len(big.values), device=1))
    g2.replay()
    assert out.values[-1] == 6.0


def test_the_caching_allocator_reuses_freed_memory_of_its_own_stream():
    assert block_bytes(1) == 512 and block_bytes(129) == 1024
    assert segment_bytes(512) == 2 << 20 and segment_bytes(3 << 20) == 20 << 20 and segment_bytes(11 << 20) == 12 << 20
    m = StandInCuda(2)
    cuda = m.torch.cuda
    mallocs = lambda: [e for e in m.log if e[0] == "cudaMalloc"]  # noqa: E731
    x = m.tensor([1.0] * (300 << 10), device=1)  # 1.2 MiB: a 20 MiB segment
    for _ in range(3):
        m.op("double", lambda v: [2 * a for a in v], x)  # freed at once, reused by the next
    assert [e[1] for e in mallocs()] == [20 << 20]
    s = cuda.Stream(device=1)
    with cuda.stream(s):
        m.op("double", lambda v: [2 * a for a in v], x)  # another stream: its own segment
    assert len(mallocs()) == 2
    cuda.empty_cache()  # gives back the segments with nothing in use: s's, not the one x is in
    with cuda.stream(s):
        m.op("double", lambda v: [2 * a for a in v], x)
    assert len(mallocs()) == 3


def test_capture_on_a_default_stream_and_a_sync_during_capture_are_refused():
    m = StandInCuda(2)
    cuda = m.torch.cuda
    with pytest.raises(RuntimeError, match="must be captured on a non-default stream"):
        with cuda.graph(cuda.CUDAGraph(), stream=cuda.default_stream(0)):
            pass
    assert DEFAULT_STREAM_ERROR.startswith("CUDA graphs must be captured on a non-default stream")
    assert m.state()["device"] == 0
    x = m.tensor([1.0], device=0)
    with pytest.raises(AcceleratorError):
        with cuda.graph(cuda.CUDAGraph(), stream=cuda.Stream()):
            x.tolist()
    assert not cuda.is_current_stream_capturing()


def test_calling_with_swaps_torch_for_the_call_only():
    import sys

    m = StandInCuda(2)
    saved = sys.modules.get("torch")

    def uses_torch():
        import torch
        return torch.cuda.device_count()

    assert calling_with(m.torch, uses_torch) == 2
    assert sys.modules.get("torch") is saved


def test_what_an_answer_is_handed_leads_to_no_stand_in_without_flagged_names():
    """A tensor or a stream holds no attribute that reaches the stand-in (its log, its state): ex15's checks read them."""
    m = StandInCuda(2)
    t, s = m.tensor([1.0], device=1), m.torch.cuda.Stream(device=1)
    for obj in (t, s, t.device):
        assert not any(isinstance(v, StandInCuda) for v in vars(obj).values()), vars(obj)
    assert not any(isinstance(v, StandInCuda) for v in vars(m.torch.cuda).values())
