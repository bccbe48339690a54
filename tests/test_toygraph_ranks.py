"""toygraph.ranks: collectives complete only when every rank reaches the same one; every mismatch is a bounded, named hang."""

from __future__ import annotations

import pytest

from toygraph.buckets import bucket_for, pad_to, powers_of_two
from toygraph.errors import GraphStateError, InvalidArgumentError, ToyGraphError
from toygraph.ranks import (CollectiveHang, CommunicatorDestroyedError, CommunicatorHang, GraphMixingError, World,
                            shared_bucket)


def captured(sizes, *, n_collectives=None, **kw):
    """A world whose rank i captured 'step': scale by 2, then n_collectives[i] all-reduces of a buffer of sizes[i]."""
    world = World(len(sizes), timeout_steps=kw.pop("timeout_steps", 20), **kw)
    n_collectives = n_collectives or [1] * len(sizes)
    bufs = [r.tensor([float(r.index + 1)] * n) for r, n in zip(world.ranks, sizes)]
    graphs = [r.graph("step") for r in world.ranks]
    for r, g, b, k in zip(world.ranks, graphs, bufs, n_collectives):
        with g.capture():
            r.launch(lambda x: [v * 2 for v in x], b, name="scale")
            for _ in range(k):
                r.all_reduce(b)
    return world, bufs, graphs


# (a) every rank captures and replays the same collectives: the right sums ---------------------------------------

@pytest.mark.parametrize("n_ranks", [2, 3, 4])
def test_matching_captures_replay_to_the_right_sum_on_every_rank(n_ranks):
    world, bufs, graphs = captured([4] * n_ranks)
    for replay in range(3):
        for r, b in zip(world.ranks, bufs):
            b.copy_([float(r.index + 1)] * 4)   # new data into the static buffers, queued before the replay
        for g in graphs:
            g.replay()
        world.synchronize()
        expected = float(sum(2 * (i + 1) for i in range(n_ranks)))
        assert all(b.tolist() == [expected] * 4 for b in bufs)
    assert all(r.completed == 3 for r in world.ranks)
    assert all(g.replays == 3 for g in graphs)


def test_replay_is_asynchronous_and_a_host_read_syncs():
    world, bufs, graphs = captured([2, 2])
    for g in graphs:
        g.replay()
    assert bufs[0]._values == [1.0, 1.0]           # nothing ran yet: replay only queued work
    assert bufs[0].tolist() == [6.0, 6.0]          # the read waits for the rank's stream, which needs rank 1 too
    assert not any(r.stream for r in world.ranks)


def test_broadcast_copies_the_roots_buffer():
    world = World(3)
    bufs = [r.tensor([10.0 * r.index, 1.0]) for r in world.ranks]
    for r, b in zip(world.ranks, bufs):
        r.broadcast(b, root=2)
    world.synchronize()
    assert [b.tolist() for b in bufs] == [[20.0, 1.0]] * 3


def test_a_captured_kernel_keeps_the_python_values_of_capture_time():
    world = World(2)
    scale = 3
    bufs = [r.tensor([1.0]) for r in world.ranks]
    graphs = [r.graph() for r in world.ranks]
    for r, g, b in zip(world.ranks, graphs, bufs):
        with g.capture():
            r.launch(lambda x: [v * scale for v in x], b)
            r.all_reduce(b)
    scale = 100  # noqa: F841  (rebinding after capture changes nothing a replay computes)
    for g in graphs:
        g.replay()
    world.synchronize()
    assert bufs[0].tolist() == [6.0]


# (b) one rank pads differently or captures a different number of collectives ----------------------------------

def test_a_rank_padded_to_another_size_hangs_and_the_report_names_both_ranks_and_sizes():
    world, bufs, graphs = captured([8, 16], timeout_steps=7)
    for g in graphs:
        g.replay()
    with pytest.raises(CollectiveHang) as hang:
        world.synchronize()
    msg = str(hang.value)
    assert msg.startswith("rank 0 waits in all_reduce #1 (size 8, graph 'step' replay 1); "
                          "rank 1 waits in all_reduce #1 (size 16, graph 'step' replay 1): sizes differ")
    assert "pad every rank to the same capture size" in msg
    assert hang.value.waits == {0: "rank 0 waits in all_reduce #1 (size 8, graph 'step' replay 1)",
                                1: "rank 1 waits in all_reduce #1 (size 16, graph 'step' replay 1)"}
    assert hang.value.steps == 7
    assert world.steps == 8                        # one step ran the kernels, then 7 idle steps: bounded
    assert isinstance(hang.value, TimeoutError) and isinstance(hang.value, ToyGraphError)


def test_after_a_hang_the_communicator_is_aborted():
    world, bufs, graphs = captured([8, 16])
    for g in graphs:
        g.replay()
    with pytest.raises(CollectiveHang):
        world.synchronize()
    assert world.state.startswith("aborted")
    assert not any(r.stream for r in world.ranks)
    with pytest.raises(CommunicatorDestroyedError, match="aborted"):
        graphs[0].replay()
    with pytest.raises(CommunicatorDestroyedError):
        world.ranks[0].all_reduce(bufs[0])


def test_wrong_sum_mode_completes_a_size_mismatch_with_a_silently_wrong_tail():
    world, bufs, graphs = captured([4, 8], on_size_mismatch="wrong_sum")
    for g in graphs:
        g.replay()
    world.synchronize()                            # no hang: it "finishes properly"
    assert bufs[0].tolist() == [6.0] * 4
    assert bufs[1].tolist() == [6.0] * 4 + [4.0] * 4   # the tail lacks rank 0's part: 4, not 6


def test_a_rank_that_captured_one_collective_fewer_hangs_the_other_at_the_last_one():
    world, bufs, graphs = captured([4, 4], n_collectives=[3, 2])
    for g in graphs:
        g.replay()
    with pytest.raises(CollectiveHang) as hang:
        world.synchronize()
    assert hang.value.waits[0] == "rank 0 waits in all_reduce #3 (size 4, graph 'step' replay 1)"
    assert hang.value.waits[1].startswith("rank 1 is elsewhere: nothing queued on its stream; its last collective "
                                          "was #2 (all_reduce)")
    assert "rank 1 never reached collective #3" in str(hang.value)


def test_different_counts_pair_across_replays_by_order_alone():
    # NCCL matches by order: rank 0's 2nd collective of replay 1 meets rank 1's only collective of replay 2
    world, bufs, graphs = captured([4, 4], n_collectives=[2, 1])
    graphs[0].replay()
    graphs[1].replay()
    graphs[1].replay()
    world.synchronize()                            # no hang: 2 collectives on each rank, paired #1-#1, #2-#2
    assert [r.completed for r in world.ranks] == [2, 2]


def test_different_operations_at_the_same_place_hang():
    world = World(2, timeout_steps=3)
    b0, b1 = world[0].tensor([1.0]), world[1].tensor([2.0])
    world[0].all_reduce(b0)
    world[1].broadcast(b1, root=0)
    with pytest.raises(CollectiveHang, match="rank 1 waits in broadcast #1 \\(size 1, root 0, eager\\): "
                                             "operations differ"):
        world.synchronize()


def _capture_padded(batches, size_of):
    world = World(len(batches), timeout_steps=5)
    bufs = [r.tensor(pad_to(b, size_of(b))) for r, b in zip(world.ranks, batches)]
    graphs = [r.graph("decode") for r in world.ranks]
    for r, g, b in zip(world.ranks, graphs, bufs):
        with g.capture():
            r.all_reduce(b)
    for g in graphs:
        g.replay()
    return world, bufs


def test_each_rank_padding_to_its_own_bucket_hangs_and_one_shared_bucket_fixes_it():
    buckets = powers_of_two(16)
    batches = [[1.0] * 3, [2.0] * 5]               # rank 0 has 3 requests this step, rank 1 has 5
    world, _ = _capture_padded(batches, lambda b: bucket_for(len(b), buckets))
    with pytest.raises(CollectiveHang, match=r"size 4.*size 8.*sizes differ"):
        world.synchronize()
    size = shared_bucket([len(b) for b in batches], buckets)
    assert size == 8
    world, bufs = _capture_padded(batches, lambda b: size)
    world.synchronize()
    assert bufs[0].tolist() == [3.0, 3.0, 3.0, 2.0, 2.0, 0.0, 0.0, 0.0] == bufs[1].tolist()
    with pytest.raises(InvalidArgumentError, match="fits no bucket"):
        shared_bucket([3, 17], buckets)


# (c) one rank skips a replay --------------------------------------------------------------------------------------

def test_a_skipped_replay_hangs_the_others_and_names_the_rank_elsewhere():
    world, bufs, graphs = captured([4, 4, 4])
    for g in graphs:
        g.replay()
    world.synchronize()
    graphs[0].replay()
    graphs[2].replay()                             # rank 1 skips this step's replay
    with pytest.raises(CollectiveHang) as hang:
        world.synchronize()
    assert hang.value.waits[0] == "rank 0 waits in all_reduce #2 (size 4, graph 'step' replay 2)"
    assert hang.value.waits[2] == "rank 2 waits in all_reduce #2 (size 4, graph 'step' replay 2)"
    assert hang.value.waits[1].startswith("rank 1 is elsewhere")
    assert "rank 1 never reached collective #2" in str(hang.value)


def test_every_hang_is_bounded_by_the_step_budget():
    for budget in (1, 5, 50):
        world, _, graphs = captured([4, 4], timeout_steps=budget)
        graphs[0].replay()
        with pytest.raises(CollectiveHang) as hang:
            world.synchronize()
        assert hang.value.steps == budget and world.steps <= budget + 1


# (d) graphed and eager collectives on one communicator ------------------------------------------------------------

def test_graphed_on_one_rank_and_eager_on_the_other_is_a_mismatch():
    world, bufs, graphs = captured([4, 4])
    graphs[0].replay()
    world[1].launch(lambda x: [v * 2 for v in x], bufs[1])
    world[1].all_reduce(bufs[1])                   # same size, same place in the order, but eager
    with pytest.raises(CollectiveHang) as hang:
        world.synchronize()
    assert hang.value.waits[1] == "rank 1 waits in all_reduce #1 (size 4, eager)"
    assert "graphed on some ranks, eager on others" in str(hang.value)


def test_with_mixing_support_an_eager_collective_may_follow_an_outstanding_replay():
    world, bufs, graphs = captured([4, 4])        # graph_mixing_support=True: NCCL's default
    extra = [r.tensor([1.0]) for r in world.ranks]
    for r, g, e in zip(world.ranks, graphs, extra):
        g.replay()
        r.all_reduce(e)                            # eager, while the replay is still outstanding
    world.synchronize()
    assert bufs[0].tolist() == [6.0] * 4 and extra[1].tolist() == [2.0]


def test_without_mixing_support_an_eager_collective_behind_an_outstanding_replay_is_refused():
    world, bufs, graphs = captured([4, 4], graph_mixing_support=False)
    extra = [r.tensor([1.0]) for r in world.ranks]
    graphs[0].replay()
    with pytest.raises(GraphMixingError, match="NCCL_GRAPH_MIXING_SUPPORT=0.*Synchronize after the replay"):
        world[0].all_reduce(extra[0])
    graphs[1].replay()
    world.synchronize()                            # the fix: nothing outstanding, then the eager collective
    for r, e in zip(world.ranks, extra):
        r.all_reduce(e)
    world.synchronize()
    assert extra[0].tolist() == [2.0] and bufs[1].tolist() == [6.0] * 4


# (e) teardown order -----------------------------------------------------------------------------------------------

def test_destroying_the_communicator_while_graphs_hold_it_hangs_and_names_them():
    world, _, graphs = captured([4, 4], timeout_steps=9)
    with pytest.raises(CommunicatorHang) as hang:
        world.destroy()
    assert set(hang.value.waits) == {0, 1}
    assert hang.value.waits[0] == "rank 0 waits in destroy for its graph(s) ['step'] that hold the communicator"
    assert "free the graphs first" in str(hang.value) and "115388" in str(hang.value)
    assert hang.value.steps == 9
    assert world.state == "ready"                  # not destroyed: free the graphs and try again
    for g in graphs:
        g.free()
    world.destroy()
    assert world.state == "destroyed"


def test_the_safe_order_frees_graphs_then_destroys():
    world, bufs, graphs = captured([4, 4])
    for g in graphs:
        g.replay()
    world.synchronize()
    for g in graphs:
        g.free()
        assert not g.holds_communicator
    world.destroy()
    with pytest.raises(GraphStateError, match="freed"):
        graphs[0].replay()
    with pytest.raises(CommunicatorDestroyedError, match="destroyed"):
        world[0].all_reduce(bufs[0])


def test_only_the_graphs_still_alive_are_named():
    world, _, graphs = captured([4, 4])
    graphs[0].free()
    with pytest.raises(CommunicatorHang) as hang:
        world.destroy()
    assert list(hang.value.waits) == [1]


def test_a_graph_without_collectives_does_not_hold_the_communicator():
    world = World(2)
    g = world[0].graph("local")
    b = world[0].tensor([1.0])
    with g.capture():
        world[0].launch(lambda x: [v + 1 for v in x], b)
    assert not g.holds_communicator
    world.destroy()


# argument and state checks ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs", [dict(n_ranks=1), dict(n_ranks=True), dict(timeout_steps=0),
                                    dict(timeout_steps=1.5), dict(on_size_mismatch="crash"),
                                    dict(graph_mixing_support="yes")])
def test_bad_world_arguments_are_refused(kwargs):
    with pytest.raises(InvalidArgumentError):
        World(**kwargs)


def test_bad_calls_are_refused():
    world = World(2)
    b0, b1 = world[0].tensor([1.0]), world[1].tensor([1.0])
    with pytest.raises(InvalidArgumentError, match="buffer of rank 1"):
        world[0].all_reduce(b1)
    with pytest.raises(InvalidArgumentError):
        world[0].broadcast(b0, root=2)
    with pytest.raises(InvalidArgumentError):
        world[0].tensor([])
    with pytest.raises(InvalidArgumentError, match="pad"):
        b0.copy_([1.0, 2.0])
    with pytest.raises(InvalidArgumentError):
        world[0].replay(world[1].graph())
    g = world[0].graph()
    with pytest.raises(GraphStateError):
        g.replay()                                 # not captured yet
    with g.capture():
        world[0].all_reduce(b0)
        with pytest.raises(GraphStateError, match="sync"):
            world[0].synchronize()
    with pytest.raises(GraphStateError, match="captured once"):
        with g.capture():
            pass


# --------------------------------------------------------------------------- the custom all-reduce (vLLM's, peer to peer)
from toygraph.ranks import CustomAllReduce, UnregisteredBufferError  # noqa: E402


def _captured_custom(n=2, calls=1):
    world = World(n, timeout_steps=10)
    car = CustomAllReduce(world)
    bufs = [r.tensor([float(r.index + 1)] * 3) for r in world.ranks]
    graphs = [r.graph("step") for r in world.ranks]
    for r, g, b in zip(world.ranks, graphs, bufs):
        with g.capture():
            for _ in range(calls):
                r.launch(lambda x: [v * 2 for v in x], b, name="layer")
                car.all_reduce(r, b)
    return world, car, bufs, graphs


def test_a_replay_before_register_graph_buffers_reads_an_empty_slot():
    world, car, bufs, graphs = _captured_custom()
    for g in graphs:
        g.replay()
    with pytest.raises(UnregisteredBufferError, match="slot 0.*register_graph_buffers"):
        world.synchronize()


def test_registered_after_capture_every_replay_sums_over_the_ranks():
    world, car, bufs, graphs = _captured_custom(n=3, calls=2)
    assert car.register_graph_buffers() == 2
    for _ in range(2):
        for r, b in zip(world.ranks, bufs):
            b.copy_([float(r.index + 1)] * 3)
        for g in graphs:
            g.replay()
        world.synchronize()
        # layer doubles (1, 2, 3) -> sum 12; again doubled -> 24, summed over 3 ranks -> 72
        assert [b.tolist() for b in bufs] == [[72.0] * 3] * 3


def test_register_graph_buffers_refuses_during_capture_and_uneven_counts():
    world = World(2, timeout_steps=10)
    car = CustomAllReduce(world)
    b = [r.tensor([1.0]) for r in world.ranks]
    g0, g1 = world[0].graph("a"), world[1].graph("b")
    with g0.capture():
        car.all_reduce(0, b[0])
        with pytest.raises(GraphStateError, match="after the capture"):
            car.register_graph_buffers()
    with g1.capture():
        car.all_reduce(1, b[1])
        car.all_reduce(1, b[1])
    with pytest.raises(InvalidArgumentError, match=r"different numbers of custom all-reduces \(\[1, 2\]\)"):
        car.register_graph_buffers()


def test_eager_custom_all_reduce_needs_a_registered_buffer():
    world = World(2, timeout_steps=10)
    car = CustomAllReduce(world)
    bufs = [r.tensor([float(r.index + 1)]) for r in world.ranks]
    with pytest.raises(UnregisteredBufferError, match="not registered"):
        car.all_reduce(0, bufs[0])
    car.register_buffer(bufs)
    for r, b in zip(world.ranks, bufs):
        car.all_reduce(r, b)
    world.synchronize()
    assert [b.tolist() for b in bufs] == [[3.0], [3.0]]


def test_graphs_of_custom_all_reduces_do_not_hold_the_nccl_communicator():
    world, car, bufs, graphs = _captured_custom()
    car.register_graph_buffers()
    world.destroy()
    assert world.state == "destroyed"


def test_custom_all_reduce_rejects_foreign_ranks_and_a_second_instance():
    world = World(2, timeout_steps=10)
    car = CustomAllReduce(world)
    with pytest.raises(InvalidArgumentError, match="already has a custom all-reduce"):
        CustomAllReduce(world)
    other = World(2)
    with pytest.raises(InvalidArgumentError):
        car.all_reduce(other[0], other[0].tensor([1.0]))
    with pytest.raises(InvalidArgumentError, match="one buffer per rank"):
        car.register_buffer([world[0].tensor([1.0])])
