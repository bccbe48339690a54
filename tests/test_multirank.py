"""graphcourse.gpulib.multirank on CPU: argument checks, and the launcher that bounds every hang and leaves nothing behind."""

from __future__ import annotations

import os

import pytest

from graphcourse.gpulib import multirank
from graphcourse.gpulib.multirank import _alive


@pytest.mark.parametrize("name, kwargs, error", [
    ("no_such", {}, KeyError),
    ("matched", {"world": 1}, ValueError),
    ("matched", {"world": True}, ValueError),
    ("matched", {"size": 0}, ValueError),
    ("skipped_replay", {"replays": 1}, ValueError),
    ("matched", {"timeout_s": 0}, ValueError),
    ("matched", {"option": "1"}, ValueError),
    ("mixing", {"option": "2"}, ValueError),
    ("teardown", {"option": "never"}, ValueError),
])
def test_bad_scenario_arguments_are_refused(name, kwargs, error):
    with pytest.raises(error):
        multirank.check_scenario_args(name, **kwargs)


def test_scenario_options_and_their_defaults():
    assert multirank.check_scenario_args("mixing") == "1"
    assert multirank.check_scenario_args("mixing", option="0") == "0"
    assert multirank.check_scenario_args("teardown") == "graphs_first"
    assert multirank.check_scenario_args("teardown", option="destroy_first") == "destroy_first"
    assert multirank.check_scenario_args("pad_mismatch") is None
    assert set(multirank.SCENARIOS) == {"matched", "pad_mismatch", "skipped_replay", "graphed_vs_eager", "mixing",
                                        "teardown"}


def test_a_scenario_without_two_gpus_says_so():
    torch = pytest.importorskip("torch")
    if torch.cuda.device_count() >= 2:
        pytest.skip("this machine has two GPUs: tests/test_multirank_cuda.py runs the scenarios")
    with pytest.raises(RuntimeError, match="needs 2 GPUs"):
        multirank.run_scenario("matched")


def test_a_rank_that_hangs_is_killed_with_its_child_and_nothing_is_left_behind():
    run = multirank.run_ranks(multirank._sleeper, (600, True), world=2, timeout_s=8)
    assert run.timed_out and run.killed == [0, 1]
    assert run.exitcodes == [-9, -9]
    assert run.wall_s < 8 + 30                       # bounded: the timeout, then the kill and the joins
    for r in range(2):
        started = run.events[r][0]
        assert started["event"] == "started" and not run.reached(r, "woke")
        assert started["nvls"] == "0" and started["symm"] == "1"   # multicast off in every process
        assert not _alive(started["pid"]) and not _alive(started["child_pid"])
    assert run.leftovers == []


def test_ranks_that_finish_are_not_killed_and_get_the_environment():
    run = multirank.run_ranks(multirank._finisher, (7,), world=3, timeout_s=60,
                              env={"NCCL_GRAPH_MIXING_SUPPORT": "0"})
    assert not run.timed_out and run.killed == [] and run.exitcodes == [0, 0, 0]
    assert [run.events[r][0]["rank"] for r in range(3)] == [0, 1, 2]
    assert all(run.events[r][0]["value"] == 7 and run.events[r][0]["mixing"] == "0" for r in range(3))
    assert run.leftovers == []
    assert os.environ["NCCL_NVLS_ENABLE"] and os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"]


def test_a_rank_that_fails_is_reported_with_its_error():
    run = multirank.run_ranks(multirank._failer, world=2, timeout_s=60)
    assert run.exitcodes == [0, 1] and not run.timed_out
    assert run.last(0) == "done"
    assert run.events[1][-1] == {"event": "error", "t_s": run.events[1][-1]["t_s"],
                                 "error": "RuntimeError: rank 1 failed on purpose"}


@pytest.mark.parametrize("kwargs", [{"timeout_s": 0}, {"timeout_s": -1}, {"world": 0}])
def test_bad_launcher_arguments_are_refused(kwargs):
    with pytest.raises(ValueError):
        multirank.run_ranks(multirank._finisher, (1,), **kwargs)


def test_a_line_cut_short_by_a_kill_ends_the_events_without_an_error():
    from graphcourse.gpulib.multirank import _read_events
    lines = ['{"event": "captured"}\n', '\n', '{"event": "repl']
    assert _read_events(lines) == [{"event": "captured"}]
