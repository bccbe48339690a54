"""graphcourse.lessons.ranks: lesson 10's step with a collective on toy ranks sums right when ranks agree, hangs when not."""

from __future__ import annotations

import pytest

from graphcourse.lessons.ranks import capture_step, serve_step
from toygraph.buckets import powers_of_two
from toygraph.ranks import CollectiveHang, CommunicatorHang, GraphMixingError, shared_bucket


@pytest.mark.parametrize("n_ranks", [2, 3])
def test_matching_sizes_replay_to_the_sum_of_the_doubled_rows_on_every_rank(n_ranks):
    world, bufs, graphs = capture_step([4] * n_ranks)
    for _ in range(2):                              # static buffers refilled each step
        serve_step(bufs, graphs, [[float(i + 1)] * 4 for i in range(n_ranks)])
        world.synchronize()
        want = float(sum(2 * (i + 1) for i in range(n_ranks)))
        assert all(b.tolist() == [want] * 4 for b in bufs)
    assert all(g.replays == 2 for g in graphs)


def test_padding_to_the_shared_bucket_sums_right_and_own_buckets_hang():
    batches = [[1.0] * 3, [2.0] * 5]
    world, bufs, graphs = capture_step([4, 8], timeout_steps=5)
    serve_step(bufs, graphs, batches)
    with pytest.raises(CollectiveHang, match=r"size 4.*size 8.*sizes differ"):
        world.synchronize()
    size = shared_bucket([3, 5], powers_of_two(16))
    world, bufs, graphs = capture_step([size, size])
    serve_step(bufs, graphs, batches)
    assert bufs[0].tolist() == bufs[1].tolist() == [6.0] * 3 + [4.0] * 2 + [0.0] * 3


def test_a_skipped_rank_leaves_the_other_waiting():
    world, bufs, graphs = capture_step([2, 2], timeout_steps=3)
    serve_step(bufs, graphs, [[1.0], [2.0]], skip=[1])
    with pytest.raises(CollectiveHang, match="rank 1 never reached collective #1") as hang:
        world.synchronize()
    assert hang.value.steps == 3


def test_world_options_pass_through_to_mixing_and_teardown():
    world, bufs, graphs = capture_step([2, 2], graph_mixing_support=False)
    serve_step(bufs, graphs, [[1.0], [2.0]])
    with pytest.raises(GraphMixingError):
        world[0].all_reduce(world[0].tensor([1.0]))
    world.synchronize()
    with pytest.raises(CommunicatorHang):
        world.destroy()
    for g in graphs:
        g.free()
    world.destroy()
    assert world.state == "destroyed"
