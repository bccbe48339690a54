"""The benchmark refuses clearly without CUDA; its target checks and summary read the JSON it writes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from graphcourse.gpulib import bench

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_bench_without_cuda_exits_nonzero_with_one_line(tmp_path: Path) -> None:
    out = tmp_path / "ref.json"
    done = subprocess.run(
        [sys.executable, "-m", "graphcourse.gpulib.bench", "--out", str(out), "--quick"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == bench.NO_CUDA_EXIT
    lines = [line for line in done.stderr.splitlines() if "graphcourse.gpulib.bench" in line]
    assert len(lines) == 1 and "no CUDA GPU here" in lines[0], done.stderr
    assert not out.exists(), "nothing measured, so nothing may be written"


def _measured(**values: float) -> dict:
    """Each value as the benchmark writes a measured figure: median, and a spread of +-5% across repeats."""
    out = {}
    for k, v in values.items():
        out.update({k: v, f"{k}_min": v * 0.95, f"{k}_max": v * 1.05})
    return out


def fake_result(b1_ratio: float = 1.02, b1_speedup: float = 8.0, node_us: float = 1.1, bucket_speedup: float = 4.0) -> dict:
    return {
        "provenance": {"gpu_name": "NVIDIA H200", "driver": "580", "cuda": "13.0", "torch": "2.11.0+cu130", "date_utc": "2026-11-30T00:00:00Z"},
        "chain": {"rows": [
            {"kernels": 1, **_measured(eager_us_per_kernel=12.0, graph_us_per_node=5.0, speedup=2.4,
                                       eager_step_us=12.0, graph_step_us=5.0)},
            {"kernels": 100, **_measured(eager_us_per_kernel=7.0, graph_us_per_node=1.0, speedup=7.0,
                                         eager_step_us=700.0, graph_step_us=100.0)},
            {"kernels": 1000, **_measured(eager_us_per_kernel=12.0, graph_us_per_node=node_us, speedup=12.0 / node_us,
                                          eager_step_us=12000.0, graph_step_us=1000 * node_us)}]},
        "decode": {"rows": [{"batch": 1, "kernels": 60, "kernel_time_us": 200.0, "graph_kernel_time_us": 200.0,
                             **_measured(eager_step_us=1600.0, graph_step_us=200.0, speedup=b1_speedup,
                                         graph_over_kernel_time=b1_ratio),
                             "graph_memory_allocated_bytes": 2**20, "replay_matches_eager": True}]},
        "bucketed": {**_measured(speedup=bucket_speedup), "stream": {"n_batches": 400}, "padding": {"waste_fraction": 0.2},
                     "memory_per_bucket": [{"shared_pool_reserved_bytes": 2**20, "private_pool_reserved_bytes": 2**21}]},
        "item_sync": {**_measured(graph_us_per_token=230.0, graph_item_us_per_token=290.0, eager_us_per_token=1600.0,
                                  eager_item_us_per_token=1650.0, item_cost_us=60.0),
                      "graph_tokens_match_eager": True},
        "elapsed_s": 90.0,
    }


def test_targets_met_and_missed() -> None:
    met = bench.check_targets(fake_result())
    assert all(t["met"] for t in met.values()) and len(met) == 4
    missed = bench.check_targets(fake_result(b1_ratio=1.2, b1_speedup=5.0, node_us=2.0, bucket_speedup=2.0))
    assert not any(t["met"] for t in missed.values())
    assert missed["chain_1000_graph_us_per_node"]["value"] == 2.0


def test_summary_names_the_gpu_and_every_target() -> None:
    data = fake_result()
    data["costs"] = bench.toy_costs(data)
    data["targets"] = bench.check_targets(data)
    lines = bench.summary_lines(data)
    assert lines[0].startswith("NVIDIA H200")
    assert sum(line.startswith("target ") for line in lines) == 4
    assert any("1.0 MiB" in line and "2.0 MiB" in line for line in lines)


def test_bench_sizes_cover_the_issue() -> None:
    assert bench.CHAIN_KERNELS[0] == 1 and bench.CHAIN_KERNELS[-1] == 1000
    assert bench.DECODE_BATCHES == (1, 2, 4, 8, 16, 32, 64)


def test_spread_is_the_median_and_range_of_the_repeats() -> None:
    assert bench.spread([3.0, 1.0, 2.0, 10.0]) == {"median": 2.5, "min": 1.0, "max": 10.0, "n": 4}
    with pytest.raises(ValueError, match="at least one"):
        bench.spread([])


def test_timers_alternate_so_eager_and_graph_share_every_slow_spell() -> None:
    calls = []
    samples = bench._alternate([("eager", lambda: calls.append("e") or 2.0), ("graph", lambda: calls.append("g") or 1.0)], 3)
    assert calls == ["e", "g"] * 3 and samples == {"eager": [2.0] * 3, "graph": [1.0] * 3}


def test_toy_costs_name_their_source_with_median_and_spread() -> None:
    costs = bench.toy_costs(fake_result())
    assert set(costs) >= {"eager_launch_us", "kernel_in_model_us", "graph_node_us", "item_sync_us"}
    assert costs["eager_launch_us"]["median"] == 7.0 and costs["eager_launch_us"]["min"] < 7.0
    assert costs["kernel_in_model_us"]["median"] == pytest.approx(1600.0 / 60)
    assert costs["item_sync_us"]["median"] == 60.0
    assert all(c["from"] for c in costs.values())
