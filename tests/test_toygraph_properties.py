"""Hypothesis properties: replay equals eager, the chosen bucket is the smallest that fits, waste matches its formula."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import toygraph as tg

KERNELS = {
    "double": lambda x: [v * 2 for v in x],
    "plus_one": lambda x: [v + 1 for v in x],
    "negate": lambda x: [-v for v in x],
    "square": lambda x: [v * v for v in x],
    "cumsum": lambda x: [sum(x[: i + 1]) for i in range(len(x))],
    "reverse": lambda x: list(reversed(x)),
    "clip": lambda x: [min(max(v, -50), 50) for v in x],
}

programs = st.lists(st.sampled_from(sorted(KERNELS)), min_size=1, max_size=8)
ints = st.integers(min_value=-1000, max_value=1000)
bucket_lists = st.lists(st.integers(min_value=1, max_value=256), min_size=1, max_size=10)


def eager(names, x):
    for name in names:
        x = KERNELS[name](x)
    return x


@settings(max_examples=60, deadline=None)
@given(programs, st.integers(min_value=1, max_value=16).flatmap(
    lambda n: st.lists(st.lists(ints, min_size=n, max_size=n), min_size=1, max_size=5)))
def test_replay_equals_eager_at_the_captured_size(names, batches):
    g = tg.ToyGraph(tg.ToyDevice())
    for name in names:
        g.record(KERNELS[name], name=name)
    for batch in batches:
        assert list(g.replay(batch)) == eager(names, batch)


@given(st.integers(min_value=1, max_value=300), bucket_lists)
def test_chosen_bucket_is_the_smallest_that_fits(n, buckets):
    chosen = tg.bucket_for(n, buckets)
    fitting = [b for b in buckets if b >= n]
    if not fitting:
        assert chosen is None
    else:
        assert chosen == min(fitting)


@given(st.lists(st.integers(min_value=1, max_value=300), min_size=1, max_size=40), bucket_lists)
def test_padding_waste_matches_its_formula(sizes, buckets):
    report = tg.padding_report(sizes, buckets)
    graphed = [(n, min(b for b in buckets if b >= n)) for n in sizes if n <= max(buckets)]
    padded = sum(b - n for n, b in graphed)
    assert report.padded_rows == padded
    assert report.eager_batches == len(sizes) - len(graphed)
    total = sum(b for _, b in graphed)
    assert report.waste_fraction == (padded / total if total else 0.0)
    for n, b in graphed:
        assert tg.waste_fraction(n, b) == (b - n) / b


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=20), min_size=1, max_size=6), st.data())
def test_bucketed_graphs_equal_eager_for_any_batch(buckets, data):
    runner = tg.BucketedGraphs([KERNELS["double"], KERNELS["plus_one"]], buckets, device=tg.ToyDevice())
    batch = data.draw(st.lists(ints, min_size=1, max_size=max(buckets)))
    assert runner.run(batch).tolist() == eager(["double", "plus_one"], batch)


@settings(max_examples=50, deadline=None)
@given(st.integers(min_value=1, max_value=500), st.floats(min_value=0.5, max_value=50), st.floats(min_value=0, max_value=50))
def test_graph_is_never_slower_than_eager_when_a_graph_launch_is_cheaper_than_one_eager_launch(n, launch_us, kernel_us):
    cost = tg.CostModel(launch_us=launch_us, kernel_us=kernel_us, graph_launch_us=min(2.5, launch_us), graph_node_us=0.0)
    assert tg.step_time_us(n, mode="graph", cost=cost, steps=6) <= tg.step_time_us(n, mode="eager", cost=cost, steps=6) + 1e-6
