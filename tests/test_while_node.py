"""The WHILE node below PyTorch: the eos chooser on any machine, the recorded H200 run, and (on a GPU) the real loop."""

from __future__ import annotations

import json

import pytest

from graphcourse.core.paths import DATA_DIR
from graphcourse.gpulib.while_node import KEEP_GOING, choose_eos

RECORDED = json.loads((DATA_DIR / "while_node.json").read_text())


def test_choose_eos_takes_a_token_every_sequence_reaches_late_enough_and_finishing_first():
    rows = [[1] * 16 + [2, 3], [1] * 17 + [3, 2]]
    assert choose_eos(rows) == 3            # 3: the last sequence is done at step 17; 2: at step 18
    assert choose_eos([[5, 6, 7]], min_steps=1) == 6
    with pytest.raises(ValueError, match="no token appears in every sequence"):
        choose_eos([[1, 2], [2, 1]])


def test_the_keep_going_kernel_sets_the_condition_from_done_and_the_limit():
    assert "cudaGraphSetConditional(handle" in KEEP_GOING and "*pos < *limit" in KEEP_GOING


def test_the_recorded_while_loop_stopped_when_every_sequence_was_done_with_the_host_loops_tokens():
    p = RECORDED["provenance"]
    assert p["gpu_name"] and p["cuda_core"] and p["torch"] and p["command"] == "python -m graphcourse.gpulib.while_node"
    for run in RECORDED["runs"]:
        last = max(run["first_eos_per_sequence"])
        assert run["same_tokens"] is True
        assert run["while_steps"] == run["host_steps"] == last + 1 < run["max_new"], run
        assert run["k_steps"] == -(-run["while_steps"] // run["k"]) * run["k"], "K steps per launch overshoot"
        for key in ("while_ms", "host_ms", "k_ms"):
            assert run[key]["min"] <= run[key]["median"] <= run[key]["max"]
    assert len({tuple(r["first_eos_per_sequence"]) for r in RECORDED["runs"]}) == 2


def test_on_a_gpu_the_while_graph_decodes_the_host_loops_tokens_and_stops_early():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    pytest.importorskip("cuda.core")
    from graphcourse.gpulib.while_node import run_while_demo

    run = run_while_demo(batch=1, seed=0, repeats=1)
    assert run["same_tokens"] and run["while_steps"] == max(run["first_eos_per_sequence"]) + 1 < run["max_new"]
