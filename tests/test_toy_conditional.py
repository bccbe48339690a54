"""Lesson 08's toy twins: K steps per launch on the toy timeline, and the toy's conditional nodes as the lesson uses them."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

import toygraph as tg
from graphcourse.lessons.decode_paths import k_step_costs, simulate_k_steps


def test_k_steps_per_graph_cut_cpu_time_per_token_not_gpu_time() -> None:
    rows = k_step_costs([3.0] * 50, [1, 4, 16], tokens=64, host_us_per_launch=30.0)
    cpu = [r["cpu_us_per_token"] for r in rows]
    gpu = [r["gpu_us_per_token"] for r in rows]
    assert cpu[0] / cpu[1] == pytest.approx(4, rel=0.05) and cpu[1] / cpu[2] == pytest.approx(4, rel=0.05)
    assert max(gpu) == pytest.approx(min(gpu)), "the same kernels run per token whatever K"
    timeline = simulate_k_steps(50, 16, 64)
    assert sum(e.kind == "graph_launch" for e in timeline.events) == 4


@settings(max_examples=25, deadline=None)
@given(k=st.integers(1, 40), tokens=st.integers(1, 100))
def test_every_token_is_launched_once_whatever_k(k: int, tokens: int) -> None:
    timeline = simulate_k_steps([2.0, 1.0], k, tokens)
    assert sum(e.kind == "kernel" for e in timeline.events) == 2 * tokens
    assert sum(e.kind == "graph_launch" for e in timeline.events) == -(-tokens // k)


@pytest.mark.parametrize("kwargs", [{"k": 0}, {"k": 1.5}, {"tokens": 0}, {"host_us_per_launch": -1}])
def test_simulate_k_steps_refuses_bad_numbers(kwargs: dict) -> None:
    args = {"k": 2, "tokens": 8, **kwargs}
    with pytest.raises(tg.InvalidArgumentError):
        simulate_k_steps(10, args.pop("k"), args.pop("tokens"), **args)


def test_the_lessons_if_node_decides_each_replay_on_the_device_without_a_sync() -> None:
    conditional = pytest.importorskip("toygraph.conditional", reason="the toy's conditional nodes (branch toy)")
    dev = tg.ToyDevice()
    x, flag = dev.tensor([1, 2, 3]), dev.tensor([1])
    g = tg.ToyGraph(dev, name="IF node")
    with tg.graph(g):
        node = conditional.if_node(flag, lambda: tg.launch(lambda v: [a * 2 for a in v], x, out=x))
    ran = []
    for value in (0, 1, 1, 0):
        x.copy_([1, 2, 3])
        flag.copy_([value])
        before = dev.sync_count
        g.replay()
        assert dev.sync_count == before
        ran.append(node.iterations[-1])
    assert ran == [0, 1, 1, 0]
