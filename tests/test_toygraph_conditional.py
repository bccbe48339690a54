"""Toy conditional nodes (IF, IF/ELSE, WHILE, SWITCH over a device value) and a multi-step decode graph."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toygraph import CaptureError, GraphStateError, InvalidArgumentError, ToyDevice, ToyGraph, graph, launch
from toygraph.conditional import if_node, switch_node, while_node
from toygraph.multistep import DecodeLoop


def test_if_node_runs_its_body_only_when_the_device_condition_is_set():
    dev = ToyDevice()
    x, flag, out = dev.tensor([1, 2]), dev.tensor([1]), dev.tensor([0, 0])
    g = ToyGraph(dev)
    with graph(g):
        node = if_node(flag, lambda: launch(lambda v: [a * 10 for a in v], x, out=out, name="times ten"))
    out.copy_([0, 0])
    flag.copy_([0])
    g.replay()
    assert out.tolist() == [0, 0], "condition 0: the body did not run"
    flag.copy_([1])
    x.copy_([3, 4])
    g.replay()
    assert out.tolist() == [30, 40]
    assert node.iterations[-2:] == [0, 1]
    assert dev.sync_count == 2, "only the test's own two reads synced: the decision stayed on the device"


def test_if_else_and_switch_pick_a_body_per_replay():
    dev = ToyDevice()
    x, which, out = dev.tensor([5]), dev.tensor([0]), dev.tensor([0])
    g = ToyGraph(dev)
    with graph(g):
        if_node(which, lambda: launch(lambda v: [v[0] + 1], x, out=out),
                lambda: launch(lambda v: [v[0] - 1], x, out=out), name="inc or dec")
    for flag, expected in ((1, 6), (0, 4)):
        which.copy_([flag])
        g.replay()
        assert out.tolist() == [expected]

    index = dev.tensor([0])
    s = ToyGraph(dev, name="switch")
    with graph(s):
        switch_node(index, [lambda k=k: launch(lambda v, k=k: [v[0] * 10 + k], x, out=out) for k in range(3)])
    for i in range(3):
        index.copy_([i])
        s.replay()
        assert out.tolist() == [50 + i]
    out.copy_([-7])
    index.copy_([5])  # out of range: no body runs
    s.replay()
    assert out.tolist() == [-7]


def test_while_node_loops_on_the_device_until_a_kernel_clears_its_condition():
    dev = ToyDevice()
    n, go = dev.tensor([0]), dev.tensor([1])
    g = ToyGraph(dev)
    with graph(g):
        def body():
            launch(lambda v: [v[0] // 2], n, out=n, name="halve")
            launch(lambda v: [int(v[0] > 1)], n, out=go, name="go on?")
        loop = while_node(go, body)
    n.copy_([100])
    go.copy_([1])
    g.replay()
    assert n.tolist() == [1] and loop.iterations[-1] == 6  # 100 50 25 12 6 3 1
    halves = sum(e.label.startswith(g.name) for e in dev.timeline.events if e.kind == "kernel")
    assert halves >= 12, "each trip ran its two kernels on the GPU lane"


def test_a_while_node_whose_body_never_clears_the_condition_is_stopped_with_a_clear_error():
    dev = ToyDevice()
    x, go = dev.tensor([0]), dev.tensor([1])
    g = ToyGraph(dev)
    with pytest.raises(GraphStateError, match="must update the condition"):
        with graph(g):
            while_node(go, lambda: launch(lambda v: [v[0] + 1], x, out=x), max_iterations=50)


def test_conditional_nodes_exist_only_in_graphs_and_their_bodies_follow_capture_rules():
    dev = ToyDevice()
    flag, x = dev.tensor([1]), dev.tensor([1, 2])
    with pytest.raises(GraphStateError, match="only inside a captured graph"):
        if_node(flag, lambda: launch(lambda v: v, x))
    with pytest.raises(InvalidArgumentError, match="one value"):
        with graph(ToyGraph(dev)):
            if_node(x, lambda: launch(lambda v: v, x))
    with pytest.raises(CaptureError):
        with graph(ToyGraph(dev)):
            if_node(flag, lambda: x.tolist())  # a sync inside a body is a sync during capture


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(-100, 100)), min_size=1, max_size=8))
def test_if_else_replays_equal_a_python_if_else_for_any_inputs(cases):
    dev = ToyDevice()
    x, flag, out = dev.tensor([0]), dev.tensor([0]), dev.tensor([0])
    g = ToyGraph(dev)
    with graph(g):
        if_node(flag, lambda: launch(lambda v: [v[0] * 3], x, out=out),
                lambda: launch(lambda v: [-v[0]], x, out=out))
    for take, value in cases:
        flag.copy_([int(take)])
        x.copy_([value])
        g.replay()
        assert out.tolist() == [value * 3 if take else -value]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 10_000), min_size=1, max_size=5))
def test_a_while_replay_equals_the_python_while_loop(starts):
    dev = ToyDevice()
    n, go, steps = dev.tensor([1]), dev.tensor([0]), dev.tensor([0])
    g = ToyGraph(dev)
    with graph(g):
        def body():
            launch(lambda v: [v[0] // 2 if v[0] % 2 == 0 else 3 * v[0] + 1], n, out=n, name="collatz")
            launch(lambda s: [s[0] + 1], steps, out=steps, name="count")
            launch(lambda v: [int(v[0] != 1)], n, out=go, name="go on?")
        while_node(go, body, max_iterations=1000)
    for start in starts:
        n.copy_([start])
        steps.copy_([0])
        go.copy_([int(start != 1)])
        g.replay()
        k, expected = start, 0
        while k != 1:
            k, expected = (k // 2 if k % 2 == 0 else 3 * k + 1), expected + 1
        assert n.tolist() == [1] and steps.tolist() == [expected]


# --- several decode steps in one graph ----------------------------------------------------------

def next_token(t):
    return [(3 * t[0] + 1) % 50]


def eager_tokens(first, steps, eos=None):
    out, t = [], first
    for _ in range(steps):
        t = next_token([t])[0]
        out.append(t)
        if t == eos:
            break
    return out


@pytest.mark.parametrize("eos", [None, 2])
def test_a_multi_step_graph_gives_the_eager_tokens_with_one_launch_and_one_sync(eos):
    dev = ToyDevice()
    loop = DecodeLoop(next_token, steps=8, eos=eos, device=dev)
    dev.reset_timeline()
    for first in (7, 0, 13):
        assert loop.run(first) == eager_tokens(first, 8, eos)
    kinds = [e.kind for e in dev.timeline.events if e.lane == "cpu"]
    assert kinds.count("graph_launch") == 3 and kinds.count("launch") == 0
    assert dev.sync_count == 3, "one read of the token buffer per run, however many tokens"


def test_the_while_loop_stops_at_eos_and_runs_no_kernel_after_it():
    dev = ToyDevice()
    loop = DecodeLoop(next_token, steps=8, eos=2, device=dev)
    dev.reset_timeline()
    assert loop.run(7) == [22, 17, 2]
    assert loop.loop.iterations[-1] == 3
    gpu = [e.label for e in dev.timeline.events if e.lane == "gpu"]
    assert len(gpu) == 3 + 3 * 4, "three copies that reset the loop, then four kernels a trip for three trips"


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 49), st.integers(1, 12), st.integers(0, 49) | st.none())
def test_a_multi_step_graph_equals_eager_decoding_for_any_start_length_and_eos(first, steps, eos):
    loop = DecodeLoop(next_token, steps=steps, eos=eos, device=ToyDevice())
    assert loop.run(first) == eager_tokens(first, steps, eos)
    assert loop.run((first + 1) % 50) == eager_tokens((first + 1) % 50, steps, eos)
