"""Unit tests of toygraph: every behaviour the foundation issue lists, and every error path with its message."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import toygraph as tg
from toygraph import (BucketedGraphs, CaptureError, GraphStateError, InvalidArgumentError, OutOfMemoryError,
                      ShapeMismatchError, ToyDevice, ToyGraph, ToyGraphError, graph, launch)

ROOT = Path(__file__).resolve().parents[1]


def double(x):
    return [v * 2 for v in x]


def plus_one(x):
    return [v + 1 for v in x]


# --- the seed example ------------------------------------------------------------------

SEED = """
from toygraph import ToyGraph

g = ToyGraph()
g.record(lambda x: [v * 2 for v in x])
g.record(lambda x: [v + 1 for v in x])
print(g.replay([1, 2, 3]))
"""


def test_seed_example_prints_3_5_7():
    out = subprocess.run([sys.executable, "-c", SEED], capture_output=True, text=True, check=True)
    assert out.stdout == "[3, 5, 7]\n"


def test_seed_text_in_lesson_file_runs_verbatim():
    seed = Path(ROOT.parent / "shared" / "seed" / "cuda-graphs-lesson.txt")
    if not seed.is_file():
        pytest.skip("the seed lesson (../shared/seed) is not beside this checkout")
    text = seed.read_text()
    code = text[text.index("class ToyGraph:"):text.index("Output:")]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[3, 5, 7]"
    # and the same lines with our ToyGraph print the same answer (print reads the buffer: a sync)
    ours = "from toygraph import ToyGraph\n" + code[code.index("g = ToyGraph()"):]
    out = subprocess.run([sys.executable, "-c", ours], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[3, 5, 7]"
    g = ToyGraph(ToyDevice())
    g.record(lambda x: [v * 2 for v in x])
    g.record(lambda x: [v + 1 for v in x])
    assert g.replay([1, 2, 3]).tolist() == [3, 5, 7]


def test_toygraph_imports_only_the_standard_library():
    code = ("import sys, toygraph, toygraph.errors, toygraph.timeline, toygraph.memory, toygraph.capture, toygraph.freeze, toygraph.prices, "
            "toygraph.buckets, toygraph.conditional, toygraph.multistep, toygraph.streams, toygraph.rng\n"
            "std = set(sys.stdlib_module_names)\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] not in std and m.split('.')[0] != 'toygraph'"
            " and not m.startswith('_') and not m.startswith('__editable__'))\n"
            "print(bad)")
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"


# --- baked addresses and static buffers -------------------------------------------------

def test_replay_reuses_the_same_addresses_and_output_object():
    g = ToyGraph(ToyDevice())
    g.record(double)
    first = g.replay([1, 2, 3])
    before = dict(g.addresses)
    second = g.replay([10, 20, 30])
    assert second is first, "replay hands back the same static output buffer"
    assert g.addresses == before
    assert first.tolist() == [20, 40, 60], "the second replay overwrote what the first returned"
    assert g.static_input.tolist() == [10, 20, 30], "new data went in by copying into the static input"


def test_copy_out_keeps_a_result_alive_but_list_of_the_output_does_not():
    dev = ToyDevice()
    g = ToyGraph(dev)
    g.record(plus_one)
    out = g.replay([1, 1])
    on_host, on_device, views = out.tolist(), out.clone(), list(out)
    assert dev.sync_count == 1, "only .tolist() synced: clone() copies on the device, list() makes views"
    g.replay([5, 5])
    assert on_host == [2, 2] and on_device.tolist() == [2, 2]
    assert [v.item() for v in views] == [6, 6], "list(out) aliases the static output: the next replay overwrote it"
    assert all(v.is_view and v.base is out for v in views)


def test_context_manager_capture_like_torch():
    dev = ToyDevice()
    static_x = dev.tensor([1, 2, 3])
    g = ToyGraph(dev)
    with graph(g):
        static_y = launch(plus_one, launch(double, static_x))
    assert g.static_input is static_x and g.static_output is static_y
    static_x.copy_([4, 5, 6])
    g.replay()
    assert static_y.tolist() == [9, 11, 13]
    assert [n.name for n in g.nodes] == ["double", "plus_one"]


def test_wrong_batch_size_names_both_sizes_and_says_bucket_and_pad():
    g = ToyGraph(ToyDevice())
    g.record(double)
    g.replay([1])
    with pytest.raises(ShapeMismatchError) as err:
        g.replay(list(range(17)))
    msg = str(err.value)
    assert "captured for batch size 1" in msg and "batch size 17" in msg
    assert "bucket" in msg and "pad" in msg
    assert err.value.captured == 1 and err.value.given == 17


def test_kernel_output_size_is_baked_in():
    g = ToyGraph(ToyDevice())
    g.record(lambda x: [v for v in x if v > 0], name="filter")
    g.replay([1, 2, 3])
    with pytest.raises(ShapeMismatchError, match="output of kernel 'filter'"):
        g.replay([1, -2, 3])


# --- syncs -----------------------------------------------------------------------------

def test_sync_during_capture_is_a_capture_error_and_invalidates_the_graph():
    dev = ToyDevice()
    x = dev.tensor([1, 2, 3])
    g = ToyGraph(dev)
    with pytest.raises(CaptureError, match="operation not permitted when stream is capturing"):
        with graph(g):
            y = launch(lambda v: [max(v)], x, name="argmax")
            y.item()
    assert g.state == "invalidated"
    with pytest.raises(GraphStateError, match="invalidated by .item()"):
        g.replay()
    assert dev.capturing is None, "the device leaves capture mode even after the error"


@pytest.mark.parametrize("sync", ["item", "tolist", "synchronize"])
def test_every_sync_kind_is_refused_during_capture(sync):
    dev = ToyDevice()
    x = dev.tensor([3])
    g = ToyGraph(dev)
    calls = {"item": lambda: x.item(), "tolist": lambda: x.tolist(), "synchronize": lambda: dev.synchronize()}
    with pytest.raises(CaptureError, match="Keep the value on the device"):
        with graph(g):
            launch(double, x)
            calls[sync]()



def test_sync_advice_replaces_the_last_sentence_of_the_capture_error():
    warmup = "Run the step once eagerly before capture (warm-up) so one-time set-up happens outside it."
    messages = {}
    for advice in (None, warmup):
        dev = ToyDevice()
        x = dev.tensor([3])
        g = ToyGraph(dev)
        with pytest.raises(CaptureError) as info:
            with graph(g):
                launch(double, x)
                dev.synchronize(what="the layer's first-call set-up", advice=advice)
        assert g.state == "invalidated" and dev.capturing is None and dev.sync_count == 0
        messages[advice] = str(info.value)
    head = ("operation not permitted when stream is capturing: the layer's first-call set-up makes the CPU wait for "
            "the GPU, but during capture the GPU runs nothing, it only records. The capture is invalidated. ")
    assert messages[None] == head + ("Keep the value on the device (e.g. pick the next token with an argmax kernel) "
                                     "and read it after replay(), outside the captured step."), "the default is unchanged"
    assert messages[warmup] == head + warmup, "the advice replaces the default's last sentence, nothing else"
    dev = ToyDevice()
    dev.synchronize(what="set-up", advice=warmup)  # outside capture the advice is unused: an ordinary sync
    assert dev.sync_count == 1
    for bad in ("", "   ", 3):
        with pytest.raises(InvalidArgumentError, match="advice"):
            dev.synchronize(advice=bad)
    assert dev.sync_count == 1

def test_sync_outside_capture_works_counts_and_stalls_the_cpu():
    dev = ToyDevice()
    x = dev.tensor([1, 2])
    y = launch(double, x, kernel_us=100.0)
    cpu_before = dev.clock.cpu_us
    assert y.tolist() == [2, 4]
    assert dev.sync_count == 1
    waits = [e for e in dev.timeline.events if e.kind == "wait"]
    assert len(waits) == 1 and waits[0].start_us == cpu_before
    assert waits[0].end_us == pytest.approx(dev.clock.cost.launch_us + 100.0)
    assert launch(lambda v: [sum(v)], y).item() == 6
    assert dev.sync_count == 2


def test_item_needs_one_value():
    dev = ToyDevice()
    with pytest.raises(InvalidArgumentError, match="one value"):
        dev.tensor([1, 2]).item()


# --- frozen control flow ---------------------------------------------------------------

def test_branch_on_a_host_value_is_frozen_at_capture():
    g = ToyGraph(ToyDevice())
    settings = {"greedy": True}

    def step(x):
        if settings["greedy"]:  # host code reads a host value once, at capture
            return launch(double, x)
        return launch(lambda v: [-a for a in v], x, name="negate")

    g.capture([5, 6], program=step)
    settings["greedy"] = False
    assert [n.name for n in g.nodes] == ["double"]
    assert g.replay([-1, -2]).tolist() == [-2, -4], "replay repeats the branch taken at capture"
    eager = step(ToyDevice().tensor([-1, -2]))
    assert eager.tolist() == [1, 2], "eager takes the other branch now"


@pytest.mark.parametrize("peek", [lambda x: bool(x[0] > 0), lambda x: 1 if sum(x) > 0 else 0,
                                  lambda x: bool(x[0:1]), lambda x: float(x[0]) > 0, lambda x: 5 in x,
                                  lambda x: all((x == 5).tolist()), lambda x: print(x), lambda x: f"{x}",
                                  lambda x: x[1].item(), lambda x: int(x[0])])
def test_branch_on_a_device_value_is_a_sync_and_refused_during_capture(peek):
    dev = ToyDevice()
    g = ToyGraph(dev)

    def step(x):
        peek(x)  # host code reads device data: a sync
        return launch(double, x)

    with pytest.raises(CaptureError, match="operation not permitted when stream is capturing.*Keep the value on"):
        g.capture([5, 6], program=step)
    assert g.state == "invalidated" and dev.sync_count == 0


# --- memory pools ----------------------------------------------------------------------

def test_each_graph_has_a_private_pool_that_only_adds_memory():
    dev = ToyDevice()
    x = dev.tensor([0] * 100)
    eager_bytes = dev.memory_used_bytes
    graphs = []
    for b in (1, 2, 4):
        g = ToyGraph(dev, name=f"b{b}")
        g.record(double)
        g.record(plus_one)
        g.capture([0] * b)
        graphs.append(g)
    assert [g.memory_bytes for g in graphs] == [2 * b * tg.WORD_BYTES for b in (1, 2, 4)], (
        "each kernel's output is in the graph's pool; the static input was allocated before capture")
    inputs = sum(len(g.static_input) for g in graphs) * tg.WORD_BYTES
    assert dev.memory_used_bytes == eager_bytes + inputs + sum(g.memory_bytes for g in graphs)
    assert all(g.static_input.pool is dev.eager_pool for g in graphs)
    assert len(x) == 100


def test_graphs_do_not_fix_an_oom():
    dev = ToyDevice(capacity_bytes=1000)
    with pytest.raises(OutOfMemoryError, match="A CUDA graph does not help here"):
        dev.tensor([0] * 300)
    weights = dev.tensor([0] * 200)  # 800 bytes: fits eagerly
    g = ToyGraph(dev)
    g.record(double)
    with pytest.raises(OutOfMemoryError):
        g.capture([0] * 100)  # the graph's pool needs 800 more
    assert len(weights) == 200


def test_eager_memory_is_given_back_when_a_buffer_dies():
    dev = ToyDevice()
    buf = dev.tensor([0] * 10)
    assert dev.memory_used_bytes == 40
    del buf
    assert dev.memory_used_bytes == 0


def test_shared_pool_between_graphs():
    dev = ToyDevice()
    g1, g2 = ToyGraph(dev, name="one"), ToyGraph(dev, name="two")
    x = dev.tensor([1])
    with graph(g1):
        launch(double, x)
    with graph(g2, pool=g1.pool):
        launch(double, x)
    assert g1.pool is g2.pool and g1.pool.used_bytes == 8
    assert len(dev.graph_pools) == 1


# --- timeline --------------------------------------------------------------------------

def test_eager_pays_one_launch_per_kernel_and_replay_one_graph_launch():
    cost = tg.CostModel()
    eager = tg.simulate(10, mode="eager")
    graphed = tg.simulate(10, mode="graph")
    assert [e.kind for e in eager.lane("cpu")] == ["launch"] * 10
    assert [e.kind for e in graphed.lane("cpu")] == ["graph_launch"]
    assert graphed.lane("cpu")[0].duration_us == pytest.approx(cost.graph_launch_us + 10 * cost.graph_node_us)
    assert eager.busy_us("cpu") == pytest.approx(10 * cost.launch_us)
    assert eager.gpu_idle_us > graphed.gpu_idle_us


def test_launch_bound_step_time_matches_the_arithmetic():
    cost = tg.CostModel(launch_us=10, kernel_us=1, graph_launch_us=2, graph_node_us=0)
    assert tg.step_time_us(50, mode="eager", cost=cost) == pytest.approx(500)
    assert tg.step_time_us(50, mode="graph", cost=cost) == pytest.approx(50)
    assert tg.predicted_speedup(50, cost=cost) == pytest.approx(10)


def test_big_kernels_leave_nothing_for_a_graph_to_win():
    cost = tg.CostModel(launch_us=10, kernel_us=1000, graph_launch_us=2, graph_node_us=0)
    assert tg.predicted_speedup(20, cost=cost) == pytest.approx(1.0, abs=0.01)


def test_a_sync_each_step_costs_the_documented_amount_with_default_costs():
    cost = tg.CostModel()
    kernels = [3.0] * 72
    plain = tg.step_time_us(kernels, mode="graph")
    synced = tg.step_time_us(kernels, mode="graph", sync_every_step=True)
    assert synced == pytest.approx(plain + cost.graph_launch_us + 72 * cost.graph_node_us + cost.sync_us)


def test_device_timeline_records_eager_and_replay():
    dev = ToyDevice()
    g = ToyGraph(dev)
    g.record(double)
    g.record(plus_one)
    g.capture([1, 2])
    assert dev.timeline.events == [], "capture launches nothing on the GPU"
    g.replay([3, 4])
    dev.end_step()
    assert [e.kind for e in dev.timeline.events] == ["graph_launch", "kernel", "kernel"]
    assert len(dev.timeline.step_times_us) == 1
    dev.reset_timeline()
    assert dev.timeline.events == [] and dev.sync_count == 0


# --- buckets ---------------------------------------------------------------------------

def test_bucket_helpers():
    assert tg.powers_of_two(17) == (1, 2, 4, 8, 16, 32)
    assert tg.powers_of_two(1) == (1,)
    assert tg.every_n(8, 32) == (1, 2, 4, 8, 16, 24, 32)
    assert tg.bucket_for(17, [1, 2, 4, 8, 16, 32]) == 32
    assert tg.bucket_for(33, [1, 2, 4, 8, 16, 32]) is None
    assert tg.pad_to([1, 2, 3], 4) == [1, 2, 3, 0]
    assert tg.waste_fraction(17, 32) == pytest.approx(15 / 32)
    assert tg.check_buckets([8, 1, 2, 2]) == (1, 2, 8)


def test_bucketed_graphs_pad_replay_unpad_and_report():
    dev = ToyDevice()
    runner = BucketedGraphs([double, plus_one], [1, 2, 4, 8], device=dev)
    assert runner.run([1, 2, 3]).tolist() == [3, 5, 7]
    assert runner.graphs[4].static_input.tolist() == [1, 2, 3, 0], "the batch was padded to bucket 4"
    assert runner.run([5]).item() == 11
    report = runner.report()
    assert (report.useful_rows, report.padded_rows, report.eager_batches) == (4, 1, 0)
    assert report.waste_fraction == pytest.approx(1 / 5)
    assert runner.memory_bytes == {b: 2 * b * tg.WORD_BYTES for b in (1, 2, 4, 8)}


def test_batch_above_the_largest_bucket_runs_eagerly_with_a_warning():
    dev = ToyDevice()
    runner = BucketedGraphs([double], [1, 2, 4], device=dev)
    with pytest.warns(tg.EagerFallbackWarning, match="larger than the largest bucket \\(4\\).*Add a bucket of 8"):
        out = runner.run([1, 2, 3, 4, 5])
    assert out.tolist() == [2, 4, 6, 8, 10]
    assert runner.report().eager_batches == 1
    assert [e.kind for e in dev.timeline.events if e.lane == "cpu"] == ["launch", "wait", "sync"], (
        "one eager launch for the one kernel, then reading the rows back to the host: one sync")


def test_bucketed_output_is_a_view_that_the_next_run_overwrites():
    dev = ToyDevice()
    runner = BucketedGraphs([double], [2, 4], device=dev)
    first = runner.run([1, 2, 3])
    assert first.is_view and first.base is runner.graphs[4].static_output and len(first) == 3
    kept = first.tolist()
    assert dev.sync_count == 1, "running a bucket and taking its rows is sync-free; .tolist() is the one sync"
    runner.run([3, 4, 5])
    assert kept == [2, 4, 6] and first.tolist() == [6, 8, 10]


# --- bad input: one hierarchy, messages that say what to do ------------------------------

BAD_INPUTS = [
    (lambda: ToyGraph(ToyDevice()).record(42), InvalidArgumentError, "takes a function"),
    (lambda: ToyGraph(ToyDevice()).replay([1, 2]), GraphStateError, "replay before any record"),
    (lambda: _recorded().replay(), GraphStateError, "needs an input"),
    (lambda: _recorded().replay("abc"), InvalidArgumentError, "list of values"),
    (lambda: _recorded().replay(5), InvalidArgumentError, "list of values"),
    (lambda: _recorded().capture([]), InvalidArgumentError, "at least one value"),
    (lambda: _recorded().capture([1], program=3), InvalidArgumentError, "program must be a function"),
    (lambda: ToyGraph(ToyDevice()).capture([1]), GraphStateError, "nothing to capture"),
    (lambda: ToyGraph("gpu0"), InvalidArgumentError, "ToyDevice"),
    (lambda: _captured().record(double), GraphStateError, "sealed"),
    (lambda: _recorded().record(double, kernel_us=-1), InvalidArgumentError, "kernel_us"),
    (lambda: ToyDevice(capacity_bytes=0), InvalidArgumentError, "capacity_bytes"),
    (lambda: ToyDevice().empty(0), InvalidArgumentError, "size must be"),
    (lambda: ToyDevice().empty(-3), InvalidArgumentError, "size must be"),
    (lambda: ToyDevice().tensor([1, 2]).copy_([1]), ShapeMismatchError, "batch size 2"),
    (lambda: launch(double, [1, 2]), InvalidArgumentError, "device buffers"),
    (lambda: launch("double", ToyDevice().tensor([1])), InvalidArgumentError, "a kernel must be a function"),
    (lambda: launch(double, ToyDevice().tensor([1]), ToyDevice().tensor([1])), InvalidArgumentError, "same toy device"),
    (lambda: launch(lambda x: "oops", ToyDevice().tensor([1])), InvalidArgumentError, "returned a string"),
    (lambda: tg.bucket_for(0, [1, 2]), InvalidArgumentError, "at least 1"),
    (lambda: tg.bucket_for(-4, [1, 2]), InvalidArgumentError, "at least 1"),
    (lambda: tg.bucket_for(2.5, [1, 2]), InvalidArgumentError, "whole number"),
    (lambda: tg.bucket_for(3, []), InvalidArgumentError, "bucket list is empty"),
    (lambda: tg.bucket_for(3, [1, 0]), InvalidArgumentError, "at least 1"),
    (lambda: tg.bucket_for(3, "1,2"), InvalidArgumentError, "list of batch sizes"),
    (lambda: tg.pad_to([1, 2, 3], 2), InvalidArgumentError, "cannot pad"),
    (lambda: tg.waste_fraction(5, 4), InvalidArgumentError, "does not fit"),
    (lambda: tg.powers_of_two(0), InvalidArgumentError, "at least 1"),
    (lambda: BucketedGraphs([], [1]), InvalidArgumentError, "kernels is empty"),
    (lambda: BucketedGraphs([double], []), InvalidArgumentError, "bucket list is empty"),
    (lambda: BucketedGraphs([double], [2], device=ToyDevice()).run([]), InvalidArgumentError, "batch is empty"),
    (lambda: tg.simulate(0), InvalidArgumentError, "at least one kernel"),
    (lambda: tg.simulate(5, mode="fast"), InvalidArgumentError, "'eager' or 'graph'"),
    (lambda: tg.simulate(5, steps=0), InvalidArgumentError, "steps"),
    (lambda: tg.simulate([1.0, -2.0]), InvalidArgumentError, "kernel times"),
    (lambda: tg.CostModel(launch_us=-1), InvalidArgumentError, "launch_us"),
    (lambda: _nested_capture(), CaptureError, "already capturing"),
    (lambda: _capture_twice(), GraphStateError, "captured once"),
    (lambda: _capture_returning_input(), InvalidArgumentError, "must return the buffer"),
    (lambda: _copy_into_context_graph_without_single_input(), GraphStateError, "copy_"),
]


def _recorded():
    g = ToyGraph(ToyDevice())
    g.record(double)
    return g


def _captured():
    g = _recorded()
    g.capture([1, 2])
    return g


def _nested_capture():
    dev = ToyDevice()
    with graph(ToyGraph(dev)):
        with graph(ToyGraph(dev)):
            pass


def _capture_twice():
    g = _captured()
    with graph(g):
        pass


def _capture_returning_input():
    ToyGraph(ToyDevice()).capture([1], program=lambda x: x)


def _copy_into_context_graph_without_single_input():
    dev = ToyDevice()
    a, b = dev.tensor([1]), dev.tensor([2])
    g = ToyGraph(dev)
    with graph(g):
        launch(lambda x, y: [x[0] + y[0]], a, b)
    g.replay([5])


@pytest.mark.parametrize("call, error, words", BAD_INPUTS, ids=[w for _, _, w in BAD_INPUTS])
def test_bad_input_raises_from_the_hierarchy_with_a_message_that_teaches(call, error, words):
    with pytest.raises(error) as err:
        call()
    assert isinstance(err.value, ToyGraphError)
    assert words in str(err.value)


def test_a_failing_kernel_keeps_its_own_error_and_says_where():
    g = ToyGraph(ToyDevice())
    g.record(lambda x: [v / 0 for v in x], name="divide")
    with pytest.raises(ZeroDivisionError) as err:
        g.replay([1])
    assert "inside kernel 'divide'" in "".join(getattr(err.value, "__notes__", []))


def test_no_eager_fallback_warning_inside_buckets():
    runner = BucketedGraphs([double], [1, 2, 4], device=ToyDevice())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert runner.run([1, 2, 3, 4]).tolist() == [2, 4, 6, 8]


def test_a_node_gap_spaces_a_replays_kernels_and_leaves_eager_and_the_default_alone():
    import pytest

    from toygraph.timeline import CostModel, simulate

    base = CostModel()
    gapped = base.with_(node_gap_us=1.5)
    kernels = [2.0, 3.0, 4.0]
    plain = simulate(kernels, mode="graph", cost=base).lane("gpu")
    spaced = simulate(kernels, mode="graph", cost=gapped).lane("gpu")
    assert [e.start_us - plain[0].start_us for e in plain] == pytest.approx([0.0, 2.0, 5.0])
    assert [e.start_us - spaced[0].start_us for e in spaced] == pytest.approx([0.0, 3.5, 8.0])
    assert (simulate(kernels, mode="graph", cost=gapped).gpu_idle_us
            == pytest.approx(simulate(kernels, mode="graph", cost=base).gpu_idle_us + 3.0))
    assert [e.start_us for e in simulate(kernels, cost=gapped).lane("gpu")] == \
        [e.start_us for e in simulate(kernels, cost=base).lane("gpu")]
    from toygraph.errors import InvalidArgumentError
    with pytest.raises(InvalidArgumentError, match="node_gap_us"):
        CostModel(node_gap_us=-1.0)
