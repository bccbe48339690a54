"""A replay after a captured buffer is freed: silent wrong numbers, a fault, or (checking on) an error naming the node."""

import gc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import toygraph as tg
from toygraph import ToyDevice, ToyGraph, graph, launch
from toygraph.conditional import if_node


def double(v):
    return [a * 2 for a in v]


def captured(check: bool = False, values=(1, 2, 3)):
    """A device, an eager input x and a graph that doubles it into its own pool."""
    dev = ToyDevice()
    x = dev.tensor(list(values), name="x")
    g = ToyGraph(dev, name="g")
    with graph(g, check_input_liveness=check):
        launch(double, x, name="double")
    return dev, x, g


# --- freed and re-used: the silent wrong answer, or the error -----------------------------------------

def test_freed_and_reused_input_gives_a_silent_wrong_answer_with_checking_off():
    dev, x, g = captured()
    assert not g.check_input_liveness, "off by default, as torch's check_input_liveness"
    dev.free(x)
    x2 = dev.tensor([10, 20, 30], name="x2")
    assert x2.address == x.address, "the caching allocator hands the freed block to the next fitting allocation"
    assert g.replay().tolist() == [20, 40, 60], "the replay reads the new owner's values, with no error"
    assert [d.state for d in g.dead_tensors()] == ["re-used"], "the check can still be run by hand"


def test_with_checking_on_the_replay_names_the_node_the_buffer_and_the_new_owner():
    dev, x, g = captured(check=True)
    assert g.replay().tolist() == [2, 4, 6]
    dev.free(x)
    dev.tensor([10, 20, 30], name="x2")
    with pytest.raises(tg.InputLivenessError) as caught:
        g.replay()
    text = str(caught.value)
    assert text.startswith("CUDA graph replay detected 1 dead tensor(s).")
    for part in ("node 'double' (nodes[0], input 0)", "buffer 'x'", "now holds buffer 'x2', allocated at step 0",
                 f"data_ptr={x.address:#x}", "keep a reference to every tensor the graph reads",
                 "hold static inputs for the graph's life"):
        assert part in text, part
    (dead,) = caught.value.dead
    assert (dead.name, dead.address, dead.state) == ("buffer 'x'", x.address, "re-used")
    assert isinstance(caught.value, RuntimeError), "torch raises a RuntimeError"


def test_the_check_runs_before_the_copy_in_so_the_new_owner_is_not_overwritten():
    dev = ToyDevice()
    g = ToyGraph(dev)
    g.record(double, name="double")
    g.capture([1, 2, 3], check_input_liveness=True)
    dev.free(g.static_input)
    other = dev.tensor([7, 8, 9], name="other")
    with pytest.raises(tg.InputLivenessError, match="the graph's static_input, read by node 'double'"):
        g.replay([4, 5, 6])
    assert other.tolist() == [7, 8, 9]


def test_with_checking_off_a_copy_in_writes_into_the_new_owner():
    dev = ToyDevice()
    g = ToyGraph(dev)
    g.record(double)
    g.capture([1, 2, 3])
    dev.free(g.static_input)
    other = dev.tensor([7, 8, 9], name="other")
    assert g.replay([4, 5, 6]).tolist() == [8, 10, 12]
    assert other.tolist() == [4, 5, 6], "the graph wrote at the address it kept: someone else's tensor"


def test_a_write_to_a_freed_buffer_outside_the_pool_is_named_too():
    dev = ToyDevice()
    x, out = dev.tensor([1, 2], name="x"), dev.tensor([0, 0], name="out")
    g = ToyGraph(dev)
    with graph(g, check_input_liveness=True):
        launch(double, x, out=out, name="double")
    dev.free(out)
    dev.tensor([5, 5], name="late")
    with pytest.raises(tg.InputLivenessError, match=r"buffer 'out', written by node 'double' \(nodes\[0\], its output\)"):
        g.replay()


def test_a_buffer_a_kernel_reads_by_name_and_one_inside_a_conditional_body_are_checked():
    dev = ToyDevice()
    x, w, flag = dev.tensor([1, 2], name="x"), dev.tensor([3, 3], name="w"), dev.tensor([1], name="flag")
    g = ToyGraph(dev)
    with graph(g, check_input_liveness=True):
        y = launch(lambda v: [a * b for a, b in zip(v, w)], x, name="scale")
        if_node(flag, lambda: launch(double, x, out=y, name="twice"))
    dev.free(w)
    dev.free(x)
    with pytest.raises(tg.InputLivenessError) as caught:
        g.replay()
    text = str(caught.value)
    assert "2 dead tensor(s)" in text
    assert "read by node 'scale' (nodes[0], by the name 'w')" in text
    assert "read by node 'scale' (nodes[0], input 0) and read by node 'twice' (nodes[1].bodies[0][0], input 0)" in text


# --- freed, not re-used: stale values, then a fault ---------------------------------------------------

def test_freed_not_reused_reads_stale_values_then_faults_once_the_block_goes_to_the_driver():
    dev, x, g = captured()
    dev.free(x)
    assert dev.cached_bytes == 512
    assert g.replay().tolist() == [2, 4, 6], "the block sits in the cache with the old values: right by luck"
    dev.empty_cache()
    assert dev.cached_bytes == 0
    with pytest.raises(tg.IllegalMemoryAccessError) as caught:
        g.replay()
    text = str(caught.value)
    assert text.startswith("CUDA error: an illegal memory access was encountered (the toy's stand-in for a fault)")
    assert "node 'double' reads buffer 'x'" in text and "keep a reference" in text


def test_with_checking_on_a_cached_or_unmapped_block_is_reported_before_any_fault():
    dev, x, g = captured(check=True)
    dev.free(x)
    with pytest.raises(tg.InputLivenessError, match="waits in the allocator's cache, still holding its old values"):
        g.replay()
    dev.empty_cache()
    with pytest.raises(tg.InputLivenessError, match="given back to the driver"):
        g.replay()


def test_entering_a_capture_empties_the_cache_as_torch_cuda_graph_does():
    dev, x, g = captured()
    dev.free(x)
    other = ToyGraph(dev)
    with graph(other):
        launch(double, dev.tensor([1]))
    with pytest.raises(tg.IllegalMemoryAccessError):
        g.replay()


# --- what is never flagged ----------------------------------------------------------------------------

def test_buffers_in_the_graphs_own_pool_are_never_flagged():
    dev = ToyDevice()
    x = dev.tensor([1, 2, 3], name="x")
    g = ToyGraph(dev)
    with graph(g, check_input_liveness=True):
        h = launch(double, x, name="double")
        out = launch(lambda v: [a + 1 for a in v], h, name="add")
    dev.free(h)
    dev.free(out)  # only the Python names go: the pool holds both blocks for the graph's life
    fresh = dev.tensor([9, 9, 9])
    assert fresh.address not in (h.address, out.address)
    assert g.replay().tolist() == [3, 5, 7] and g.dead_tensors() == []
    assert g.external_buffers == [x]


def test_a_kept_reference_replays_right_however_much_else_is_freed():
    dev, x, g = captured(check=True)
    for n in range(20):
        dev.free(dev.tensor([n] * (1 + n % 4)))
    x.copy_([5, 6, 7])
    assert g.replay().tolist() == [10, 12, 14]


def test_the_seed_example_still_works_with_checking_on():
    g = ToyGraph(ToyDevice())
    g.record(lambda x: [v * 2 for v in x])
    g.record(lambda x: [v + 1 for v in x])
    g.capture([1, 2, 3], check_input_liveness=True)
    assert g.replay([1, 2, 3]).tolist() == [3, 5, 7], "the graph holds its own static input"


# --- the allocator and host code ----------------------------------------------------------------------

def test_reuse_is_best_fit_within_the_eager_pool_and_bytes_come_back_once():
    dev = ToyDevice()
    small, big = dev.tensor([0] * 3), dev.tensor([0] * 200)  # one block of 512 bytes, one of 1024
    used = dev.eager_pool.used_bytes
    dev.free(big)
    dev.free(small)
    assert dev.eager_pool.used_bytes == used - 203 * 4
    del small, big
    gc.collect()
    assert dev.eager_pool.used_bytes == used - 203 * 4, "a freed buffer's finalizer does not count it twice"
    a = dev.tensor([1] * 129)  # needs 1024 bytes: only the big block fits
    b = dev.tensor([1])  # the 512-byte block
    assert (a.address, b.address) == (0x7F0000000000 + 512, 0x7F0000000000)
    assert dev.cached_bytes == 0


def test_host_code_cannot_use_a_freed_buffer():
    dev = ToyDevice()
    x = dev.tensor([1, 2], name="x")
    dev.free(x)
    assert x.freed
    for use in (x.tolist, lambda: x.copy_([3, 4]), lambda: launch(double, x), lambda: dev.tensor(x),
                lambda: dev.free(x)):
        with pytest.raises(tg.InvalidArgumentError, match="buffer 'x' was"):
            use()
    with pytest.raises(tg.InvalidArgumentError, match="is a view"):
        dev.free(dev.tensor([1, 2, 3])[1:])


def test_check_input_liveness_must_be_a_bool():
    with pytest.raises(tg.InvalidArgumentError):
        with graph(ToyGraph(ToyDevice()), check_input_liveness="yes"):
            pass


# --- property: whatever order of frees and allocations --------------------------------------------------

ops = st.lists(st.one_of(
    st.tuples(st.just("free"), st.integers(0, 2)),
    st.tuples(st.just("alloc"), st.integers(1, 200)),
    st.tuples(st.just("free_last"), st.just(0)),
    st.tuples(st.just("empty_cache"), st.just(0)),
), max_size=12)


@settings(max_examples=150, deadline=None)
@given(ops)
def test_checking_on_never_lets_a_replay_read_a_freed_or_reowned_address(program):
    """Any frees and allocations: with checking on, a replay raises exactly when a captured input was freed,
    and otherwise computes from the captured inputs; with checking off it reads what now lives at each address."""
    dev = ToyDevice()
    inputs = [dev.tensor([i + 1, i + 2, i + 3], name=f"in{i}") for i in range(3)]
    graphs = {}
    for check in (True, False):
        g = ToyGraph(dev, name=f"check={check}")
        with graph(g, check_input_liveness=check):
            launch(lambda a, b, c: [p + 10 * q + 100 * r for p, q, r in zip(a, b, c)], *inputs, name="mix")
        graphs[check] = g
    memory = {b.address: b.tolist() for b in inputs}  # the test's own model of what lies at each input's address
    live = []
    for op, arg in program:
        if op == "free" and not inputs[arg].freed:
            dev.free(inputs[arg])
        elif op == "alloc":
            new = dev.tensor([1000 + len(live)] * arg, name=f"new{len(live)}")
            live.append(new)
            if new.address in memory:  # a freed input's block, re-used: its first values are overwritten
                memory[new.address][:min(arg, 3)] = [1000 + len(live) - 1] * min(arg, 3)
        elif op == "free_last" and live and not live[-1].freed:
            dev.free(live[-1])
        elif op == "empty_cache":
            dev.empty_cache()
    freed = any(b.freed for b in inputs)
    if freed:
        with pytest.raises(tg.InputLivenessError) as caught:
            graphs[True].replay()
        assert {d.name for d in caught.value.dead} == {f"buffer {b.name!r}" for b in inputs if b.freed}
    else:
        assert graphs[True].replay().tolist() == [321 + 111 * k for k in range(3)]
    if any(b.freed and b._storage.block.state == "unmapped" for b in inputs):
        with pytest.raises(tg.IllegalMemoryAccessError):
            graphs[False].replay()
    else:
        a, b, c = (memory[x.address] for x in inputs)
        assert graphs[False].replay().tolist() == [p + 10 * q + 100 * r for p, q, r in zip(a, b, c)]
