"""A toy generator a graph can replay: its offset advances at each replay, as PyTorch's does."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toygraph import CaptureError, InvalidArgumentError, ToyDevice, ToyGraph, graph, launch
from toygraph.rng import ToyGenerator, rand, random_values


def dropout_step(gen, x, sizes):
    """A step drawing random numbers twice (sizes), combined with x: the shape of dropout or sampling."""
    outs = [rand(gen, n, name=f"rand{i}") for i, n in enumerate(sizes)]
    return launch(lambda v, *rs: [a + sum(r[0] for r in rs) for a in v], x, *outs, name="combine")


def eager_run(seed, sizes, k):
    dev = ToyDevice()
    gen, x = ToyGenerator(dev, seed), dev.tensor([0.0, 1.0])
    return [dropout_step(gen, x, sizes).tolist() for _ in range(k)], gen


def test_each_replay_draws_what_the_next_eager_run_would_have_drawn():
    eager, _ = eager_run(seed=7, sizes=[2, 3], k=4)
    dev = ToyDevice()
    gen, x = ToyGenerator(dev, 7), dev.tensor([0.0, 1.0])
    g = ToyGraph(dev)
    with graph(g):
        out = dropout_step(gen, x, [2, 3])
    assert gen.offset == 0, "capture hands out no numbers"
    replays = []
    for _ in range(4):
        g.replay()
        replays.append(out.tolist())
    assert replays == eager
    assert len({tuple(r) for r in replays}) == 4, "fresh numbers at every replay, not the captured ones"
    assert gen.whole_graph_increment(g) == 5 and gen.offset == 20


def test_eager_calls_after_replays_continue_the_same_stream():
    dev = ToyDevice()
    gen = ToyGenerator(dev, 3)
    g = ToyGraph(dev)
    with graph(g):
        r = rand(gen, 2)
    g.replay()
    g.replay()
    assert r.tolist() == random_values(3, 2, 2)
    assert rand(gen, 2).tolist() == random_values(3, 4, 2)
    gen.manual_seed(3)
    assert rand(gen, 2).tolist() == random_values(3, 0, 2)


def test_two_graphs_sharing_a_generator_take_turns_along_its_stream():
    dev = ToyDevice()
    gen = ToyGenerator(dev, 1)
    ga, gb = ToyGraph(dev, name="a"), ToyGraph(dev, name="b")
    with graph(ga):
        ra = rand(gen, 1)
    with graph(gb):
        rb = rand(gen, 2)
    ga.replay()
    gb.replay()
    ga.replay()
    assert rb.tolist() == random_values(1, 1, 2) and ra.tolist() == random_values(1, 3, 1)


def test_bad_arguments_say_what_to_pass():
    with pytest.raises(InvalidArgumentError, match="ToyGenerator"):
        rand(object(), 2)
    with pytest.raises(InvalidArgumentError, match="n must be"):
        rand(ToyGenerator(ToyDevice()), 0)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10**6), st.lists(st.integers(1, 4), min_size=1, max_size=3), st.integers(1, 5))
def test_replays_equal_eager_runs_for_any_seed_and_draws(seed, sizes, k):
    eager, eager_gen = eager_run(seed, sizes, k)
    dev = ToyDevice()
    gen, x = ToyGenerator(dev, seed), dev.tensor([0.0, 1.0])
    g = ToyGraph(dev)
    with graph(g):
        out = dropout_step(gen, x, sizes)
    got = []
    for _ in range(k):
        g.replay()
        got.append(out.tolist())
    assert got == eager and gen.offset == eager_gen.offset == k * sum(sizes)


def test_another_generator_must_be_registered_before_capture():
    dev = ToyDevice()
    other, x = ToyGenerator(dev, 5, default=False), dev.tensor([0.0, 1.0])
    g = ToyGraph(dev)
    with pytest.raises(CaptureError, match="register"):
        with graph(g):
            dropout_step(other, x, [2])
    g2 = ToyGraph(dev)
    other.register(g2)
    with graph(g2):
        out = dropout_step(other, x, [2])
    first = (g2.replay(), out.tolist())[1]
    second = (g2.replay(), out.tolist())[1]
    assert first != second and other.offset == 4


def test_register_refuses_during_capture_and_non_graphs():
    dev = ToyDevice()
    other = ToyGenerator(dev, 5, default=False)
    with pytest.raises(InvalidArgumentError):
        other.register("graph")
    g = ToyGraph(dev)
    with pytest.raises(CaptureError, match="before capture"):
        with graph(g):
            other.register(g)
