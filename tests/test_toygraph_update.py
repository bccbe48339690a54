"""Updating a captured toy graph in place from a new capture of the same step (cudaGraphExecUpdate's twin)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import toygraph as tg
from toygraph import GraphUpdateError, ToyDevice, ToyGraph, graph, launch
from toygraph.conditional import if_node, while_node
from toygraph.update import (
    FUNCTION_CHANGED,
    NODE_TYPE_CHANGED,
    NOT_SUPPORTED,
    PARAMETERS_CHANGED,
    SUCCESS,
    TOPOLOGY_CHANGED,
    UNSUPPORTED_FUNCTION_CHANGE,
)

ROOT = Path(__file__).resolve().parents[1]


def step(dev: ToyDevice, x, scale, *, name: str = "step", extra: bool = False) -> ToyGraph:
    """One captured step: y = x * scale, then y + 1 (and, with extra, a third kernel)."""
    g = ToyGraph(dev, name=name)
    with graph(g):
        y = launch(lambda v: [a * scale for a in v], x, name="scale")
        z = launch(lambda v: [a + 1 for a in v], y, name="add")
        if extra:
            launch(lambda v: [-a for a in v], z, name="negate")
    return g


def snapshot(g: ToyGraph) -> list:
    """Everything an update may change, by identity (never comparing buffers with ==: that launches a kernel)."""
    from toygraph.capture import kernel_nodes
    nodes = [(n.name, id(n.fn), tuple(map(id, n.inputs)), id(n.output), repr(n.frozen), tuple(map(id, n.live.values())),
              n.kernel_us) for n in kernel_nodes(g.nodes)]
    conditionals = [(n.kind, id(n.condition), len(n.bodies)) for n in g.nodes if not isinstance(n, tg.Node)]
    return nodes + conditionals + [id(g.static_input), id(g.static_output), g.updates, g.addresses]


# --- same topology: the parameters move, the next replay computes what the new capture recorded ------------

def test_a_new_scalar_and_a_new_input_buffer_are_updated_in_place_and_replayed():
    dev = ToyDevice()
    x1, x2 = dev.tensor([1, 2, 3], name="x1"), dev.tensor([10, 20, 30], name="x2")
    g = step(dev, x1, 2, name="g")
    assert g.replay().tolist() == [3, 5, 7]
    nodes_before = list(g.nodes)
    new = step(dev, x2, 5, name="new")
    result = tg.update(g, new)
    assert result.result == SUCCESS == "cudaGraphExecUpdateSuccess"
    assert result.nodes_updated == 2 and result.updates == 1 and g.updates == 1
    assert result.values_changed == ("nodes[0] 'scale'",), "only the scale kernel baked another value"
    assert result.buffers_changed == ("nodes[0] 'scale'", "nodes[1] 'add'")
    assert result.functions_changed == ()
    assert all(a is b for a, b in zip(g.nodes, nodes_before)), "the same exec graph, its nodes' parameters updated"
    assert g.nodes[0].frozen["scale"] == 5 and g.nodes[0].inputs[0] is x2
    assert g.static_input is x2 and g.static_output is new.static_output
    assert g.replay().tolist() == [51, 101, 151], "the next replay computes what the new capture recorded"
    x2.copy_([1, 1, 1])
    assert g.replay().tolist() == [6, 6, 6], "and reads the new input buffer live at every replay"
    assert g.state == "captured" and g.replays == 3


def test_rebinding_a_scalar_alone_changes_nothing_an_update_does():
    dev = ToyDevice()
    x = dev.tensor([1, 2], name="x")
    scale = 2
    g = ToyGraph(dev, name="g")
    with graph(g):
        launch(lambda v: [a * scale for a in v], x, name="scale")
    scale = 7
    assert g.replay().tolist() == [2, 4], "baked at capture: rebinding does nothing"
    new = ToyGraph(dev, name="new")
    with graph(new):
        launch(lambda v: [a * scale for a in v], x, name="scale")
    result = g.update(new)  # the method form
    assert result.values_changed == ("nodes[0] 'scale'",)
    assert result.buffers_changed == ("nodes[0] 'scale'",), "its output is now the new capture's, in that graph's pool"
    assert g.nodes[0].inputs[0] is x and g.nodes[0].output.pool is new.pool
    assert g.replay().tolist() == [7, 14]


def test_the_seed_lessons_record_and_replay_graph_updates_from_a_second_one():
    dev = ToyDevice()
    g, new = ToyGraph(dev, name="g"), ToyGraph(dev, name="new")
    for graph_, k in ((g, 2), (new, 3)):
        graph_.record(lambda x, k=k: [v * k for v in x])
        graph_.record(lambda x: [v + 1 for v in x])
    assert g.replay([1, 2, 3]).tolist() == [3, 5, 7]
    new.capture([0, 0, 0])
    g.update(new)
    assert g.replay([1, 2, 3]).tolist() == [4, 7, 10], "the copy-in goes to the new capture's static input"


def test_another_batch_size_updates_too_as_cuda_lets_pointers_and_grids_change():
    dev = ToyDevice()
    g = step(dev, dev.tensor([1, 2]), 2, name="g")
    g.update(step(dev, dev.tensor([1, 2, 3, 4]), 2, name="new"))
    assert g.replay([1, 1, 1, 1]).tolist() == [3, 3, 3, 3]
    with pytest.raises(tg.ShapeMismatchError):
        g.replay([1, 2])


def test_a_different_kernel_function_updates_on_a_modern_driver_and_is_refused_before_11_2():
    dev = ToyDevice()
    x = dev.tensor([1, 2, 3], name="x")
    g = ToyGraph(dev, name="g")
    with graph(g):
        launch(lambda v: [a * 2 for a in v], x, name="k")
    other = ToyGraph(dev, name="other")
    with graph(other):
        launch(lambda v: [a - 1 for a in v], x, name="k")
    before = snapshot(g)
    with pytest.raises(GraphUpdateError) as caught:
        g.update(other, driver_version=11010)
    assert caught.value.result == FUNCTION_CHANGED
    assert "cudaGraphExecUpdateErrorFunctionChanged" in str(caught.value) and "nodes[0] 'k'" in str(caught.value)
    assert snapshot(g) == before and g.replay().tolist() == [2, 4, 6], "a failed update leaves the graph as it was"
    result = g.update(other)  # CUDA driver >= 11.2: a kernel node may be updated to another function
    assert result.functions_changed == ("nodes[0] 'k'",)
    assert g.replay().tolist() == [0, 1, 2]


def test_the_operator_a_kernel_binds_is_part_of_its_function_not_a_parameter():
    dev = ToyDevice()
    x = dev.tensor([2, 3], name="x")
    g, new = ToyGraph(dev, name="g"), ToyGraph(dev, name="new")
    with graph(g):
        x * 3  # an element-wise kernel: operator.mul bound, 3 baked
    with graph(new):
        x + 3
    assert g.nodes[0].fn.__code__ is new.nodes[0].fn.__code__, "the same Python code..."
    with pytest.raises(GraphUpdateError, match=FUNCTION_CHANGED):
        g.update(new, driver_version=11000)  # ...but another kernel: mul, then add
    assert g.update(new).functions_changed == ("nodes[0] '+'",), "named as the new capture names it"
    assert g.replay().tolist() == [5, 6]


# --- a different topology: refused with CUDA's code, the first node that differs and the fix -------------

def test_an_extra_node_is_a_topology_change_and_leaves_the_graph_unchanged():
    dev = ToyDevice()
    x = dev.tensor([1, 2, 3], name="x")
    g = step(dev, x, 2, name="g")
    g.replay()
    before = snapshot(g)
    with pytest.raises(GraphUpdateError) as caught:
        tg.update(g, step(dev, x, 5, name="longer", extra=True))
    error = caught.value
    assert isinstance(error, tg.ToyGraphError) and isinstance(error, RuntimeError)
    assert error.result == TOPOLOGY_CHANGED and error.error_node == "nodes[2] 'negate'"
    text = str(error)
    for part in ("cudaGraphExecUpdateErrorTopologyChanged", "cudaErrorGraphExecUpdateFailure", "nodes[2] 'negate'",
                 "2 in the graph, 3 in the new one", "The graph is unchanged", "capture again and instantiate",
                 "pad each batch to a bucket"):
        assert part in text, part
    assert snapshot(g) == before and g.updates == 0
    assert g.replay().tolist() == [3, 5, 7], "the exec graph still runs what it ran before"


def test_a_copy_where_a_kernel_was_is_a_node_type_change():
    dev = ToyDevice()
    x, buf = dev.tensor([1, 2], name="x"), dev.tensor([0, 0], name="buf")
    g, new = ToyGraph(dev, name="g"), ToyGraph(dev, name="new")
    with graph(g):
        launch(lambda v: [a * 2 for a in v], x, out=buf, name="double")
    with graph(new):
        buf.copy_(x)
    with pytest.raises(GraphUpdateError) as caught:
        g.update(new)
    assert caught.value.result == NODE_TYPE_CHANGED
    assert "a memcpy node where the graph has a kernel node" in str(caught.value)


def test_a_copy_from_host_values_where_a_copy_from_a_buffer_was_is_a_parameters_change():
    dev = ToyDevice()
    x, buf = dev.tensor([1, 2], name="x"), dev.tensor([0, 0], name="buf")
    g, same, host = ToyGraph(dev, name="g"), ToyGraph(dev, name="same"), ToyGraph(dev, name="host")
    y = dev.tensor([5, 6], name="y")
    for graph_, source in ((g, x), (same, y), (host, [7, 8])):
        with graph(graph_):
            buf.copy_(source)
            launch(lambda v: [a + 1 for a in v], buf, name="inc")
    with pytest.raises(GraphUpdateError) as caught:
        g.update(host)
    assert caught.value.result == PARAMETERS_CHANGED and "from a device buffer to host values" in str(caught.value)
    assert "nodes[0] 'copy_'" in g.update(same).buffers_changed, "a copy from another buffer: a new pointer"
    assert g.replay().tolist() == [6, 7]


def test_a_kernel_on_another_device_is_an_unsupported_function_change():
    dev, other = ToyDevice(), ToyDevice(name="other-gpu")
    g = step(dev, dev.tensor([1]), 2, name="g")
    with pytest.raises(GraphUpdateError) as caught:
        g.update(step(other, other.tensor([1]), 2, name="new"))
    assert caught.value.result == UNSUPPORTED_FUNCTION_CHANGE
    assert "The owning context of the function cannot change" in str(caught.value)


def conditional_step(dev, x, flag, out, scale, *, kind="if", body_kernels=1, name="g") -> ToyGraph:
    g = ToyGraph(dev, name=name)

    def body():
        for _ in range(body_kernels):
            launch(lambda v: [a * scale for a in v], x, out=out, name="times")
            if kind == "while":
                launch(lambda f: [0], flag, out=flag, name="stop")
    with graph(g):
        (if_node if kind == "if" else while_node)(flag, body, name="cond")
    return g


def test_a_conditional_bodys_kernels_update_but_its_body_cannot_grow():
    dev = ToyDevice()
    x, flag, out = dev.tensor([1, 2], name="x"), dev.tensor([1], name="flag"), dev.tensor([0, 0], name="out")
    g = conditional_step(dev, x, flag, out, 10)
    result = g.update(conditional_step(dev, x, flag, out, 100, name="new"))
    assert result.values_changed == ("nodes[0].bodies[0][0] 'times'",)
    flag.copy_([1])
    g.replay()
    assert out.tolist() == [100, 200], "the kernel inside the IF body now bakes 100"
    before = snapshot(g)
    with pytest.raises(GraphUpdateError) as caught:
        g.update(conditional_step(dev, x, flag, out, 3, body_kernels=2, name="bigger"))
    assert caught.value.result == TOPOLOGY_CHANGED
    assert caught.value.error_node == "nodes[0].bodies[0][1] 'times'"
    assert snapshot(g) == before


def test_a_conditional_nodes_own_parameters_cannot_change():
    dev = ToyDevice()
    x, flag, out = dev.tensor([1, 2], name="x"), dev.tensor([1], name="flag"), dev.tensor([0, 0], name="out")
    other_flag = dev.tensor([1], name="other flag")
    g = conditional_step(dev, x, flag, out, 10)
    for new, what in ((conditional_step(dev, x, flag, out, 10, kind="while", name="w"), "kind changed from IF to WHILE"),
                      (conditional_step(dev, x, other_flag, out, 10, name="f"), "its condition changed")):
        before = snapshot(g)
        with pytest.raises(GraphUpdateError) as caught:
            g.update(new)
        assert caught.value.result == PARAMETERS_CHANGED and what in str(caught.value)
        assert "Changing node parameters is not supported" in str(caught.value)
        assert snapshot(g) == before


def test_a_failure_deep_in_the_graph_copies_nothing_from_the_pairs_before_it():
    dev = ToyDevice()
    x, buf = dev.tensor([1, 2], name="x"), dev.tensor([0, 0], name="buf")
    g, new = ToyGraph(dev, name="g"), ToyGraph(dev, name="new")
    with graph(g):
        y = launch(lambda v: [a * 2 for a in v], x, name="scale")
        buf.copy_(y)
    with graph(new):
        y = launch(lambda v: [a * 9 for a in v], x, name="scale")  # would update...
        buf.copy_([1, 1])  # ...but this pair may not
    before = snapshot(g)
    with pytest.raises(GraphUpdateError):
        g.update(new)
    assert snapshot(g) == before and g.nodes[0].frozen == {}


# --- refusals that are not CUDA result codes ---------------------------------------------------------------

def test_update_needs_two_captured_toy_graphs():
    dev = ToyDevice()
    g = step(dev, dev.tensor([1]), 2)
    with pytest.raises(tg.GraphStateError, match="not captured"):
        g.update(ToyGraph(dev, name="empty"))
    with pytest.raises(tg.GraphStateError, match="not captured"):
        ToyGraph(dev).update(g)
    with pytest.raises(tg.InvalidArgumentError):
        tg.update(g, "not a graph")
    with pytest.raises(tg.InvalidArgumentError):
        g.update(g, driver_version="12.8")


def test_graphs_that_draw_random_numbers_are_refused():
    from toygraph.rng import ToyGenerator, rand
    dev = ToyDevice()
    gen = ToyGenerator(dev, seed=1)
    g, new = ToyGraph(dev, name="g"), ToyGraph(dev, name="new")
    for graph_ in (g, new):
        with graph(graph_):
            rand(gen, 2)
    with pytest.raises(GraphUpdateError) as caught:
        g.update(new)
    assert caught.value.result == NOT_SUPPORTED and "random numbers" in str(caught.value)


def test_the_update_count_is_the_toys_own_record():
    dev = ToyDevice()
    g = step(dev, dev.tensor([1]), 2)
    assert g.updates == 0
    with pytest.raises(AttributeError):
        g.updates = 3
    g.update(step(dev, dev.tensor([1]), 3))
    assert g.updates == 1


def test_toygraph_update_imports_only_the_standard_library():
    code = ("import sys, toygraph, toygraph.update\n"
            "std = set(sys.stdlib_module_names)\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] not in std and m.split('.')[0] != 'toygraph'"
            " and not m.startswith('_') and not m.startswith('__editable__'))\n"
            "print(bad)")
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"


# --- the property: update, then replay, equals a fresh capture's replay ------------------------------------

@settings(max_examples=60, deadline=None)
@given(first=st.integers(-50, 50), second=st.integers(-50, 50), data=st.data())
def test_update_then_replay_equals_a_fresh_capture(first, second, data):
    n = data.draw(st.integers(1, 6))
    x_old = data.draw(st.lists(st.integers(-1000, 1000), min_size=n, max_size=n))
    x_new = data.draw(st.lists(st.integers(-1000, 1000), min_size=n, max_size=n))
    replay_with = data.draw(st.lists(st.integers(-1000, 1000), min_size=n, max_size=n))
    dev = ToyDevice()
    g = step(dev, dev.tensor(x_old), first, name="g")
    g.replay()
    g.update(step(dev, dev.tensor(x_new), second, name="new"))
    fresh = step(dev, dev.tensor(x_new), second, name="fresh")
    assert g.replay().tolist() == fresh.replay().tolist() == [v * second + 1 for v in x_new]
    assert g.replay(replay_with).tolist() == fresh.replay(replay_with).tolist()
