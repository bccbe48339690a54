"""toygraph.conditional and toygraph.multistep: IF and WHILE nodes decided on the device, K steps per graph."""

from __future__ import annotations

import inspect

import pytest
from hypothesis import given, settings, strategies as st

import toygraph as tg
from toygraph.conditional import NeverEndingLoopError, if_node, while_node
from toygraph.multistep import capture_steps, k_step_costs, simulate_k_steps

if "out" not in inspect.signature(tg.launch).parameters:  # pragma: no cover - before the toy's launch(out=) lands
    pytest.skip("these twins need toygraph.launch(..., out=buf) (issue 8's toy branch)", allow_module_level=True)


def double(v):
    return [a * 2 for a in v]


def add_one(v):
    return [a + 1 for a in v]


def countdown(v):
    return [v[0] - 1]


def _graph_with_nodes(dev):
    x, flag, left = dev.tensor([1, 2, 3]), dev.tensor([1]), dev.tensor([0])
    g = tg.ToyGraph(dev, name="conditional")
    with tg.graph(g):
        ran = if_node(flag, lambda: tg.launch(double, x, out=x))
        loops = while_node(left, lambda: (tg.launch(add_one, x, out=x), tg.launch(countdown, left, out=left)))
    return g, x, flag, left, ran, loops


@settings(max_examples=30, deadline=None)
@given(flag=st.booleans(), left=st.integers(0, 6), values=st.lists(st.integers(-50, 50), min_size=3, max_size=3))
def test_replay_decides_on_the_device_values_of_that_replay(flag: bool, left: int, values: list) -> None:
    dev = tg.ToyDevice()
    g, x, flag_buf, left_buf, ran, loops = _graph_with_nodes(dev)
    x.copy_(values)
    flag_buf.copy_([int(flag)])
    left_buf.copy_([left])
    syncs = dev.sync_count
    g.replay()
    assert dev.sync_count == syncs, "a conditional node reads its condition on the device: no sync"
    expected = [(v * 2 if flag else v) + left for v in values]
    assert x.tolist() == expected
    assert ran.tolist() == [int(flag)] and loops.tolist() == [left] and left_buf.tolist() == [0]


def test_the_node_is_one_graph_node_and_its_time_follows_what_ran() -> None:
    dev = tg.ToyDevice()
    g, x, flag, left, ran, loops = _graph_with_nodes(dev)
    assert [n.name for n in g.nodes] == ["IF node", "WHILE node"], "the bodies' kernels live inside the nodes"
    flag.copy_([0])
    left.copy_([0])
    g.replay()
    idle = [n.kernel_us for n in g.nodes]
    flag.copy_([1])
    left.copy_([4])
    g.replay()
    busy = [n.kernel_us for n in g.nodes]
    assert busy[0] > idle[0] and busy[1] > idle[1]


def test_outside_a_capture_the_same_calls_are_host_control_flow_with_a_sync_per_test() -> None:
    dev = tg.ToyDevice()
    left = dev.tensor([3])
    syncs = dev.sync_count
    assert while_node(left, lambda: tg.launch(countdown, left, out=left)) == 3
    assert dev.sync_count - syncs == 4, "three tests that say go on, one that says stop"
    flag = dev.tensor([0])
    assert if_node(flag, lambda: tg.launch(double, left, out=left)) == 0


def test_a_loop_that_never_ends_is_reported_not_spun_forever() -> None:
    dev = tg.ToyDevice()
    x, forever = dev.tensor([0]), dev.tensor([1])
    g = tg.ToyGraph(dev, name="forever")
    with tg.graph(g):
        while_node(forever, lambda: tg.launch(add_one, x, out=x), max_iterations=20)
    with pytest.raises(NeverEndingLoopError, match="never finish"):
        g.replay()


@pytest.mark.parametrize("bad, match", [(True, "one-value device buffer"), (3, "one-value device buffer")])
def test_a_host_value_as_condition_is_refused_with_the_reason(bad: object, match: str) -> None:
    with pytest.raises(tg.InvalidArgumentError, match=match):
        if_node(bad, lambda: None)


def test_a_condition_of_several_values_and_an_empty_body_are_refused() -> None:
    dev = tg.ToyDevice()
    with pytest.raises(tg.InvalidArgumentError, match="exactly one value"):
        if_node(dev.tensor([1, 0]), lambda: None)
    g = tg.ToyGraph(dev, name="empty")
    with pytest.raises(tg.CaptureError, match="no kernel"):
        with tg.graph(g):
            if_node(dev.tensor([1]), lambda: None)


@settings(max_examples=20, deadline=None)
@given(k=st.integers(1, 8), start=st.integers(0, 96))
def test_k_steps_in_one_graph_equal_k_eager_steps(k: int, start: int) -> None:
    dev = tg.ToyDevice()
    tok, pos = dev.tensor([start]), dev.tensor([0])

    def step() -> None:
        tg.launch(lambda t, p: [(t[0] * 7 + p[0]) % 97], tok, pos, out=tok)
        tg.launch(add_one, pos, out=pos)

    g = capture_steps(step, k, dev)
    tok.copy_([start])
    pos.copy_([0])
    g.replay()
    expected, p = start, 0
    for _ in range(k):
        expected, p = (expected * 7 + p) % 97, p + 1
    assert tok.tolist() == [expected] and pos.tolist() == [k]
    assert g.replays == 1


def test_k_steps_per_graph_cut_cpu_time_per_token_not_gpu_time() -> None:
    rows = k_step_costs([3.0] * 50, [1, 4, 16], tokens=64, host_us_per_launch=30.0)
    cpu = [r["cpu_us_per_token"] for r in rows]
    gpu = [r["gpu_us_per_token"] for r in rows]
    assert cpu[0] > 3 * cpu[1] > 3 * cpu[2] / 4, cpu
    assert max(gpu) == pytest.approx(min(gpu)), "the same kernels run per token whatever K"
    timeline = simulate_k_steps(50, 16, 64)
    assert sum(e.kind == "graph_launch" for e in timeline.events) == 4


@pytest.mark.parametrize("kwargs", [{"k": 0}, {"k": 1.5}, {"tokens": 0}, {"host_us_per_launch": -1}])
def test_simulate_k_steps_refuses_bad_numbers(kwargs: dict) -> None:
    args = {"kernels": 10, "k": 2, "tokens": 8, **kwargs}
    with pytest.raises(tg.InvalidArgumentError):
        simulate_k_steps(args.pop("kernels"), args.pop("k"), args.pop("tokens"), **args)
