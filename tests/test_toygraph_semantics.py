"""What a toy graph bakes and what stays live (issue 8, point 5), as a CUDA graph does.

* Capture freezes the Python values a kernel reads (closures, globals, default arguments,
  bound objects); a Python number rebound after capture changes nothing a replay computes.
* The contents of device buffers stay live: new data arrives by copying into them.
* Host code that needs a Python value from a device buffer is a sync (counted, on the timeline,
  a CaptureError during capture): item, tolist, cpu, float/int/bool, print, `in`. Indexing,
  iterating and list() give views, and arithmetic and compares are kernels: no sync, as in torch.
  Kernels reading buffers are not syncs either.
* A slice of a buffer is a view sharing its storage.

Examples first, then Hypothesis properties.
"""

from __future__ import annotations

import functools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import toygraph as tg
from toygraph import CaptureError, InvalidArgumentError, ToyDevice, ToyGraph, graph, launch

SCALE = 2  # a module global a kernel reads


def scaled(x):
    return [v * SCALE for v in x]


def uses_helper(x):
    return [helper(v) for v in x]


def helper(v):
    return v + SCALE


# --- capture freezes Python values -----------------------------------------------------------

def test_a_global_rebound_after_capture_does_not_change_replay():
    global SCALE
    SCALE = 2
    try:
        g = ToyGraph(ToyDevice())
        g.record(scaled)
        assert g.replay([1, 2, 3]).tolist() == [2, 4, 6]
        SCALE = 10
        assert g.replay([1, 2, 3]).tolist() == [2, 4, 6], "the graph baked SCALE = 2 at capture"
        assert scaled([1, 2, 3]) == [10, 20, 30], "eager Python sees the new value"
        assert g.nodes[0].frozen == {"SCALE": 2}
    finally:
        SCALE = 2


def test_a_helper_function_defined_beside_the_kernel_is_frozen_too():
    global SCALE
    try:
        g = ToyGraph(ToyDevice())
        g.record(uses_helper)
        assert g.replay([1, 2]).tolist() == [3, 4]
        SCALE = 100
        assert g.replay([1, 2]).tolist() == [3, 4]
    finally:
        SCALE = 2


def test_closure_default_argument_bound_object_and_partial_are_frozen():
    scale = 3
    closure = lambda x: [v * scale for v in x]  # noqa: E731
    default = lambda x, s=scale: [v * s for v in x]  # noqa: E731

    class Layer:
        def __init__(self):
            self.bias = 1

        def forward(self, x):
            return [v + self.bias for v in x]

    layer = Layer()
    params = {"shift": 5}
    shifted = functools.partial(lambda x, p: [v + p["shift"] for v in x], p=params)
    dev = ToyDevice()
    x = dev.tensor([1, 2])
    g = ToyGraph(dev)
    with graph(g):
        outs = [launch(k, x) for k in (closure, default, layer.forward, shifted)]
    scale, layer.bias, params["shift"] = 100, 100, 100  # rebind and mutate every Python value
    g.replay()
    assert [o.tolist() for o in outs] == [[3, 6], [3, 6], [2, 3], [6, 7]]
    assert g.nodes[0].frozen == {"scale": 3} and g.nodes[1].frozen == {"s": 3}
    assert closure([1, 2]) == [100, 200], "the learner's own function is untouched"


def test_a_mutated_host_list_is_frozen_but_a_device_buffer_stays_live():
    dev = ToyDevice()
    host_weights = [1, 1]
    device_weights = dev.tensor([1, 1])
    x = dev.tensor([10, 20])
    g = ToyGraph(dev)
    with graph(g):
        a = launch(lambda v: [p * w for p, w in zip(v, host_weights)], x, name="host")
        b = launch(lambda v: [p * w for p, w in zip(v, device_weights)], x, name="device")
    host_weights[0] = 7
    device_weights.copy_([7, 7])  # new data arrives by copying into the buffer
    g.replay()
    assert a.tolist() == [10, 20], "host memory was read once, at capture"
    assert b.tolist() == [70, 140], "device memory is read at every replay"
    assert g.nodes[1].live == {"device_weights": device_weights}


def test_rebinding_a_name_to_a_new_buffer_does_not_reach_the_graph():
    dev = ToyDevice()
    x = dev.tensor([1])
    g = ToyGraph(dev)
    with graph(g):
        out = launch(lambda v: [a * 10 for a in v], x)
    x = dev.tensor([5])  # a new buffer at a new address: the graph still reads the old one
    g.replay()
    assert out.tolist() == [10]


def test_an_uncopyable_value_stays_live_and_is_named():
    import threading
    lock = threading.Lock()
    frozen = tg.freeze(lambda x: [v for v in x if lock])
    assert frozen.live == ("lock",)


def test_freezing_leaves_the_original_kernel_and_its_namespace_alone():
    count = {"calls": 0}

    def kernel(x):
        count["calls"] += 1
        return x

    frozen = tg.freeze(kernel)
    frozen.fn([1])
    assert count == {"calls": 0}, "the frozen kernel counts into its own copy"
    assert kernel.__globals__ is globals()


# --- host reads are syncs ----------------------------------------------------------------------

# A sync is host code that needs a Python value (torch: item, tolist, cpu, float/int/bool, print, `in`).
READS = {
    "item": lambda b: b[0].item(),
    "tolist": lambda b: b.tolist(),
    "cpu": lambda b: b.cpu(),
    "float": lambda b: float(b[0]),
    "int": lambda b: int(b[0:1]),
    "index()": lambda b: list(range(64))[b[1]],  # b[1] grows by one per replay: at most 3 + 25 here
    "bool": lambda b: bool(b[0:1]),
    "if": lambda b: 1 if b[0] else 0,
    "if x[0] > 0": lambda b: 1 if b[0] > 0 else 0,
    "if sum(x) > 0": lambda b: 1 if sum(b) > 0 else 0,
    "all((x == v).tolist())": lambda b: all((b == 3).tolist()),
    "in": lambda b: 3 in b,
    "str": lambda b: str(b),
    "repr": lambda b: repr(b),
    "f-string": lambda b: f"{b}",
    "format spec": lambda b: f"{b[0]:.2f}",
    "print": lambda b: print(b[0]),
}
# Not syncs: shape, views (indexing, iterating, list(), slicing), device copies, device arithmetic.
FREE = {
    "len": lambda b: len(b),
    "shape": lambda b: b.shape,
    "slice": lambda b: b[1:],
    "index": lambda b: b[0],
    "negative index": lambda b: b[-1],
    "iterate": lambda b: [v for v in b],
    "list": lambda b: list(b),
    "unpack": lambda b: tuple(b),
    "sum": lambda b: sum(b),
    "==": lambda b: b == 3,
    "== list": lambda b: b == [3, 1, 4],
    "x[0] > 0": lambda b: b[0] > 0,
    "arithmetic": lambda b: -(b * 2 + 1) / 3 - b[0],
    "address": lambda b: b.address,
    "copy_": lambda b: b.copy_([0] * len(b)),
    "clone": lambda b: b.clone(),
}


@pytest.mark.parametrize("name", sorted(READS))
def test_each_host_read_is_one_sync_on_the_timeline(name):
    dev = ToyDevice()
    buf = dev.tensor([3, 1, 4])
    READS[name](buf)
    assert dev.sync_count == 1
    assert [e.kind for e in dev.timeline.events if e.lane == "cpu"][-1] == "sync"


@pytest.mark.parametrize("name", sorted(READS))
def test_each_host_read_during_capture_is_a_capture_error(name):
    dev = ToyDevice()
    buf = dev.tensor([3, 1, 4])
    g = ToyGraph(dev)
    with pytest.raises(CaptureError, match="operation not permitted when stream is capturing"):
        with graph(g):
            READS[name](launch(lambda v: v, buf))
    assert g.state == "invalidated"


@pytest.mark.parametrize("name", sorted(FREE))
def test_views_shape_copies_and_device_arithmetic_are_not_syncs(name):
    dev = ToyDevice()
    FREE[name](dev.tensor([3, 1, 4]))
    assert dev.sync_count == 0
    assert not [e for e in dev.timeline.events if e.kind == "sync"]


@pytest.mark.parametrize("name", sorted(FREE))
def test_views_shape_copies_and_device_arithmetic_are_legal_during_capture(name):
    dev = ToyDevice()
    x = dev.tensor([3, 1, 4])
    g = ToyGraph(dev)
    with graph(g):
        FREE[name](launch(lambda v: v, x))
    assert g.state == "captured" and dev.sync_count == 0


def test_device_arithmetic_and_compares_are_kernels_that_replay():
    """`if x[0] > 0` in torch: `>` launches a compare kernel, the `if` (bool) is the sync."""
    dev = ToyDevice()
    x = dev.tensor([5, -6])
    g = ToyGraph(dev)
    with graph(g):
        h = launch(lambda v: [a * 2 for a in v], x, name="double")
        positive = h[0] > 0  # a compare kernel, recorded: no sync
        total = sum(h)  # 0 + h[0] + h[1]: add kernels, recorded
        shifted = h - h[1] + [1, 2]  # broadcast a one-element buffer; a host list is baked
    assert [n.name for n in g.nodes] == ["double", ">", "r+", "+", "-", "+"]
    x.copy_([-1, 3])
    g.replay()
    assert (positive.item(), total.item(), shifted.tolist()) == (False, 4, [-7, 2])
    assert dev.sync_count == 3
    eq = dev.tensor([1, 2, 3]) == [1, 0, 3]
    assert eq.tolist() == [True, False, True] and (dev.tensor([2]) != 2).item() is False
    assert ((dev.tensor([7, 8]) >= dev.tensor([8])) == [False, True]).tolist() == [True, True]


def test_a_view_from_indexing_or_iterating_aliases_the_static_output():
    """list(out) is a list of views: the next replay overwrites every element (torch: unbind)."""
    dev = ToyDevice()
    g = ToyGraph(dev)
    g.record(lambda t: [(3 * t[0] + 1) % 50])
    out = g.replay([7])
    views = []
    for _ in range(4):
        views.append(out[0])  # a view of the static output: no sync, no copy
        out = g.replay(out)
    assert dev.sync_count == 0
    assert {v.item() for v in views} == {out.item()}, "every entry reads what the last replay left"
    (first,) = out
    assert first.is_view and first.address == out.address


def test_kernels_reading_buffers_are_not_syncs():
    dev = ToyDevice()
    w = dev.tensor([1, 2, 3])
    x = dev.tensor([1, 1, 1])
    g = ToyGraph(dev)
    with graph(g):
        y = launch(lambda v: [a + b + w[0] + sum(w) for a, b in zip(v, w)], x)  # reads w inside the kernel
    for _ in range(3):
        g.replay([2, 2, 2])
    launch(lambda v: [sum(w) for _ in v], x)
    y2 = y.clone()
    assert dev.sync_count == 0
    assert y2.tolist() == [10, 11, 12] and dev.sync_count == 1


def test_reading_a_token_every_step_with_item_or_int_is_one_sync_a_token():
    dev = ToyDevice()
    g = ToyGraph(dev)
    g.record(lambda t: [(3 * t[0] + 1) % 50])
    out = g.replay([7])
    tokens = []
    for _ in range(5):
        tokens.append(out.item())  # a Python value from device memory: a sync every token
        tokens.append(int(out[0]))  # int() too
        out = g.replay(out)  # device to device: no sync
    assert dev.sync_count == 10
    assert tokens[::2] == tokens[1::2] and len(set(tokens)) > 1


def test_arithmetic_inside_a_kernel_and_buffers_of_values_are_refused_with_advice():
    dev = ToyDevice()
    w = dev.tensor([1, 2])
    with pytest.raises(InvalidArgumentError, match="inside a kernel"):
        launch(lambda v: [a + 1 for a in (w + 1)], dev.tensor([0, 0]))
    with pytest.raises(InvalidArgumentError, match="Pass the buffer itself.*tolist"):
        dev.tensor(list(w))
    with pytest.raises(InvalidArgumentError, match="no gather or mask indexing"):
        w[w > 1]
    with pytest.raises(tg.ShapeMismatchError):
        w + dev.tensor([1, 2, 3])


def test_truth_value_of_several_values_is_ambiguous_as_for_a_tensor():
    with pytest.raises(InvalidArgumentError, match="ambiguous"):
        bool(ToyDevice().tensor([1, 2]))


# --- slices are views ----------------------------------------------------------------------------

def test_a_slice_shares_storage_both_ways_and_sits_inside_its_parent():
    dev = ToyDevice()
    parent = dev.tensor([0, 1, 2, 3, 4, 5])
    view = parent[2:5]
    view[0] = 20
    parent[4] = 40
    assert parent.tolist() == [0, 1, 20, 3, 40, 5]
    assert view.tolist() == [20, 3, 40]
    assert view.is_view and view.base is parent and not parent.is_view
    assert view.address == parent.address + 2 * tg.WORD_BYTES
    assert parent[::2][1:].tolist() == [20, 40]
    with pytest.raises(InvalidArgumentError, match="positive step"):
        parent[::-1]


def test_a_kernel_writing_into_a_slice_writes_into_the_parent():
    dev = ToyDevice()
    cache = dev.tensor([0] * 4)
    token = dev.tensor([9])
    g = ToyGraph(dev)
    with graph(g):
        launch(lambda t: t, token, out=cache[1:2], name="write slot 1")
    cache.copy_([0, 0, 0, 0])
    token.copy_([5])
    g.replay()
    assert cache.tolist() == [0, 5, 0, 0]


def test_a_view_keeps_eager_memory_alive_until_it_dies():
    import gc
    dev = ToyDevice()
    view = dev.tensor([1, 2, 3, 4])[1:3]
    gc.collect()
    assert dev.memory_report()["eager"] == 16, "the parent died but its view still holds the storage"
    del view
    gc.collect()
    assert dev.memory_report()["eager"] == 0


# --- copies and clones during capture --------------------------------------------------------------

def test_copy_during_capture_is_recorded_live_from_a_buffer_baked_from_host_values():
    dev = ToyDevice()
    src, a, b = dev.tensor([1, 2]), dev.empty(2), dev.empty(2)
    g = ToyGraph(dev)
    with graph(g):
        a.copy_(src)
        b.copy_([7, 8])
    src.copy_([3, 4])
    b.copy_([0, 0])
    g.replay()
    assert a.tolist() == [3, 4] and b.tolist() == [7, 8]
    assert [n.name for n in g.nodes] == ["copy_", "copy_"]


# --- addresses: 512-byte blocks, like PyTorch's caching allocator -----------------------------------

def test_buffers_start_on_512_byte_boundaries_and_are_counted_in_blocks():
    dev = ToyDevice()
    bufs = [dev.tensor([0] * n) for n in (1, 128, 129, 3)]
    starts = [b.address for b in bufs]
    assert all(a % 512 == 0 for a in starts)
    assert [b - a for a, b in zip(starts, starts[1:])] == [512, 512, 1024]
    assert dev.eager_pool.used_bytes == (1 + 128 + 129 + 3) * 4
    assert dev.eager_pool.allocated_bytes == 512 * 5


# --- Hypothesis properties -------------------------------------------------------------------------

numbers = st.integers(min_value=-50, max_value=50)
values_lists = st.lists(numbers, min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(numbers, numbers), min_size=1, max_size=5), st.data())
def test_replay_computes_with_the_python_values_of_capture_time(params, data):
    """Kernels a*x + b over Python numbers held three ways; rebinding them all after capture changes nothing."""
    holder = {"params": [list(p) for p in params]}
    kernels = []
    for i, (a, b) in enumerate(params):
        kernels.append([
            lambda x, i=i: [v * holder["params"][i][0] + holder["params"][i][1] for v in x],  # a mutable dict
            (lambda a, b: lambda x: [v * a + b for v in x])(a, b),  # a closure
            lambda x, a=a, b=b: [v * a + b for v in x],  # default arguments
        ][data.draw(st.integers(0, 2))])
    x = data.draw(values_lists)
    g = ToyGraph(ToyDevice())
    for k in kernels:
        g.record(k)
    g.replay(x)
    holder["params"] = [[data.draw(numbers), data.draw(numbers)] for _ in params]  # rebind after capture
    expected = x
    for a, b in params:
        expected = [v * a + b for v in expected]
    for _ in range(2):
        assert g.replay(x).tolist() == expected


@settings(max_examples=60, deadline=None)
@given(values_lists.flatmap(lambda w: st.tuples(st.just(w), st.lists(
    st.lists(numbers, min_size=len(w), max_size=len(w)), min_size=1, max_size=4))), st.data())
def test_buffer_contents_stay_live_across_replays(weights_and_updates, data):
    """New data copied into the static input or into a weight buffer is what the next replay reads."""
    weights, updates = weights_and_updates
    dev = ToyDevice()
    w = dev.tensor(weights)
    g = ToyGraph(dev)
    g.record(lambda x: [a * b for a, b in zip(x, w)])
    g.replay([0] * len(weights))
    for new in updates:
        x = data.draw(st.lists(numbers, min_size=len(weights), max_size=len(weights)))
        w.copy_(new)
        assert g.replay(x).tolist() == [a * b for a, b in zip(x, new)]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.sampled_from(sorted(READS) + sorted(FREE) + ["replay", "launch"]), max_size=25))
def test_sync_count_is_the_number_of_host_reads(ops):
    """Whatever host code does, the device counts exactly one sync per Python value read, none for views,
    device arithmetic, kernels or replays."""
    dev = ToyDevice()
    g = ToyGraph(dev)
    g.record(lambda v: [a + 1 for a in v])
    out = g.replay([1, 2, 3])
    reads = 0
    for op in ops:
        if op == "replay":
            out = g.replay(out)
        elif op == "launch":
            launch(lambda v: v, out)
        elif op in READS:
            READS[op](out)
            reads += 1
        else:
            FREE[op](out)
    assert dev.sync_count == reads
    assert sum(e.kind == "sync" for e in dev.timeline.events) == reads


@settings(max_examples=60, deadline=None)
@given(st.lists(numbers, min_size=1, max_size=6), st.lists(st.lists(numbers, min_size=1, max_size=6), max_size=4))
def test_views_of_the_static_output_read_the_latest_replay_and_copies_keep_theirs(first, later):
    """Views (out[i], list(out)) alias the static output; .tolist() and .clone() keep the values of their time."""
    n = len(first)
    later = [(v * n)[:n] for v in later]
    dev = ToyDevice()
    g = ToyGraph(dev)
    g.record(lambda v: [a * 3 for a in v])
    out = g.replay(first)
    views, on_host, on_device = list(out), out.tolist(), out.clone()
    last = first
    for x in later:
        g.replay(x)
        last = x
    assert [v.item() for v in views] == [a * 3 for a in last]
    assert on_host == [a * 3 for a in first] and on_device.tolist() == on_host


@settings(max_examples=60, deadline=None)
@given(st.lists(numbers, min_size=1, max_size=6), st.data())
def test_device_arithmetic_equals_host_arithmetic_without_a_sync(values, data):
    """Every element-wise op on a buffer computes what the same op on its values computes, on the device."""
    import operator
    ops = {"+": operator.add, "-": operator.sub, "*": operator.mul, "==": operator.eq, "!=": operator.ne,
           "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
    symbol = data.draw(st.sampled_from(sorted(ops)))
    kind = data.draw(st.sampled_from(["scalar", "buffer", "one-element buffer", "list", "reflected"]))
    dev = ToyDevice()
    buf = dev.tensor(values)
    other = data.draw(numbers) if kind in ("scalar", "reflected") else data.draw(
        st.lists(numbers, min_size=1 if kind == "one-element buffer" else len(values),
                 max_size=1 if kind == "one-element buffer" else len(values)))
    op = ops[symbol]
    if kind == "reflected":
        got, want = op(other, buf), [op(other, v) for v in values]
    elif kind == "scalar":
        got, want = op(buf, other), [op(v, other) for v in values]
    elif kind == "list":
        got, want = op(buf, other), [op(v, w) for v, w in zip(values, other)]
    else:
        got, want = op(buf, dev.tensor(other)), [op(v, w) for v, w in zip(values, other * len(values))]
    assert dev.sync_count == 0
    assert got.tolist() == want and dev.sync_count == 1


@settings(max_examples=80, deadline=None)
@given(st.lists(numbers, min_size=1, max_size=12), st.data())
def test_slices_behave_as_views_of_a_plain_list_model(values, data):
    """Any positive-step slice of any slice reads what the same slice of a list reads, and writes go both ways."""
    dev = ToyDevice()
    buf, model = dev.tensor(values), list(values)
    bounds = st.integers(min_value=-14, max_value=14) | st.none()
    key1 = slice(data.draw(bounds), data.draw(bounds), data.draw(st.integers(1, 3) | st.none()))
    key2 = slice(data.draw(bounds), data.draw(bounds), data.draw(st.integers(1, 3) | st.none()))
    view, model_idx = buf[key1][key2], list(range(len(values)))[key1][key2]
    assert len(view) == len(model_idx)
    assert view.tolist() == [model[i] for i in model_idx]
    for _ in range(data.draw(st.integers(0, 4))):
        value = data.draw(numbers)
        if model_idx and data.draw(st.booleans()):
            j = data.draw(st.integers(0, len(model_idx) - 1))
            view[j] = value  # a write through the view
            model[model_idx[j]] = value
        else:
            i = data.draw(st.integers(0, len(values) - 1))
            buf[i] = value  # a write through the parent
            model[i] = value
    assert buf.tolist() == model
    assert view.tolist() == [model[i] for i in model_idx]
    assert dev.sync_count == 3, "slicing and writing read nothing: only the three tolist() calls synced"


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(sorted(READS)), values_lists)
def test_any_host_read_during_capture_invalidates_it(name, values):
    dev = ToyDevice()
    g = ToyGraph(dev)
    x = dev.tensor(values + [0, 0])
    with pytest.raises(CaptureError):
        with graph(g):
            READS[name](launch(lambda v: v, x))
    assert g.state == "invalidated" and dev.sync_count == 0


def test_a_kernel_cannot_smuggle_device_values_into_host_memory():
    """A kernel writes only its output: appending to a host list from inside it reaches a frozen copy, not the list."""
    dev = ToyDevice()
    leaked = []
    x = dev.tensor([4, 5])
    launch(lambda v: leaked.extend(v) or v, x)  # eager
    g = ToyGraph(dev)
    with graph(g):
        launch(lambda v: leaked.extend(v) or v, x)
    g.replay()
    assert leaked == [] and dev.sync_count == 0, "values reach the host only through a read, which is a sync"
