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


# run_plan: ex19's harness. Each case says what a plan does on toy ranks.
from graphcourse.lessons.ranks import run_plan  # noqa: E402

SIZES = [1, 2, 4, 8]


def test_run_plan_one_shared_size_sums_every_ranks_rows():
    assert run_plan([8, 8], [3, 5], SIZES) == {"rows": [[6.0] * 3 + [4.0] * 2 + [0.0] * 3] * 2}


def test_run_plan_own_buckets_hang_and_name_both_sizes():
    out = run_plan([4, 8], [3, 5], SIZES)
    assert set(out) == {"hang"} and "size 4" in out["hang"] and "size 8" in out["hang"]


def test_run_plan_a_rank_sitting_out_leaves_the_other_waiting():
    out = run_plan([4, None], [3, 0], SIZES)
    assert "rank 1 never reached collective #1" in out["hang"]


def test_run_plan_an_idle_rank_that_replays_padding_lets_the_step_finish():
    assert run_plan([4, 4], [3, 0], SIZES) == {"rows": [[2.0] * 3 + [0.0]] * 2}


def test_run_plan_eager_on_every_rank_pads_to_the_largest_batch_and_mixed_hangs():
    assert run_plan(["eager"] * 2, [3, 10], SIZES) == {"rows": [[6.0] * 3 + [4.0] * 7] * 2}
    assert "graphed on some ranks, eager on others" in run_plan([8, "eager"], [3, 10], SIZES)["hang"]


def test_run_plan_refuses_plans_no_rank_could_run_with_a_message():
    assert run_plan(None, [0, 0], SIZES) == {"ran": "nothing"}
    assert "one per rank" in run_plan([4], [3, 0], SIZES)["error"]
    assert "neither a capture size" in run_plan([5, 5], [3, 0], SIZES)["error"]
    assert "neither a capture size" in run_plan([True, 4], [1, 0], SIZES)["error"]
    assert "do not fit" in run_plan([2, 2], [3, 0], SIZES)["error"]


def test_the_things_to_try_answer_is_computed_from_the_toy():
    from graphcourse.lessons.ranks import try_answer
    text = try_answer("With `run_plan` ...")
    assert "graph of 16" in text and "first 10 =" in text and "rank 0 never reached collective #1" in text
    assert try_answer("another item") is None
