"""The toy's default prices come from the course's recorded benchmark (issue 8, point 9).

`python -m graphcourse.authoring.toy_prices` writes toygraph/prices.py from data/gpu_reference.json;
`--check` fails when it is stale. These tests run --check on the repository, and check the
derivation, the staleness check and the errors on small recorded files of their own.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

import toygraph as tg
from graphcourse.authoring import toy_prices
from graphcourse.errors import ReferenceDataError

ROOT = Path(__file__).resolve().parents[1]

RECORDED = {
    "schema": 1,
    "provenance": {"gpu_name": "Test GPU", "torch": "9.9", "cuda": "13.0", "date_utc": "2030-01-02T03:04:05Z",
                   "command": "python -m graphcourse.bench", "timing": "test"},
    "chain": {"op": "x.add_(1.0)", "rows": [
        {"kernels": 1, "eager_us_per_kernel": 12.0, "graph_step_us": 4.0, "graph_us_per_node": 4.0},
        {"kernels": 10, "eager_us_per_kernel": 7.0, "graph_step_us": 11.0, "graph_us_per_node": 1.1},
        {"kernels": 100, "eager_us_per_kernel": 8.0, "graph_step_us": 100.0, "graph_us_per_node": 1.0},
        {"kernels": 1000, "eager_us_per_kernel": 6.0, "graph_step_us": 1020.0, "graph_us_per_node": 1.02},
    ]},
    "decode": {"rows": [{"batch": 1, "kernels": 50.0, "graph_kernels": 50.0, "eager_step_us": 900.0}]},
    "item_sync": {"batch": 1, "repeats": 5, "item_cost_us": 30.0, "graph_item_spread_us": 6.0, "graph_spread_us": 1.0},
}


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "graphcourse.authoring.toy_prices", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_the_committed_prices_match_the_recorded_data():
    result = run("--check")
    assert result.returncode == 0, result.stderr


def test_the_toys_defaults_are_the_generated_prices():
    from toygraph import prices
    cost = tg.CostModel()
    for name in ("launch_us", "kernel_us", "graph_launch_us", "graph_node_us", "sync_us"):
        assert getattr(cost, name) == prices.PRICES[name]["value"]
    assert tg.H200_COSTS == cost == tg.DEFAULT_COSTS
    assert prices.SOURCE["gpu"] in tg.describe_prices()


def test_each_price_is_its_documented_measurement():
    prices = toy_prices.derive_prices(RECORDED)
    assert prices["launch_us"].value == 7.0 and prices["launch_us"].spread == 2.0  # median and range over N >= 10
    assert prices["kernel_us"].value == 1.01 and prices["kernel_us"].spread == 0.02  # N >= 100
    assert prices["graph_launch_us"].value == 4.0  # the one-kernel chain's replay
    assert prices["graph_node_us"].value == toy_prices.NVIDIA_NODE_US and "not measured" in prices["graph_node_us"].measurement
    assert prices["sync_us"].value == pytest.approx(30.0 - 4.0 - 50 * 0.001, abs=1e-3)
    assert prices["sync_us"].spread == 7.0
    assert prices["launch_in_model_us"].value == 18.0


SCHEMA2 = {
    "schema": 2,
    "provenance": RECORDED["provenance"],
    "method": {"repeats": 7},
    "decode": {"rows": [{"batch": 1, "kernels": 57, "graph_kernels": 57}]},
    "costs": {
        "eager_launch_us": {"median": 6.5, "min": 6.0, "max": 7.5, "from": "chain of 100, eager, per kernel"},
        "kernel_in_model_us": {"median": 16.0, "min": 15.0, "max": 18.0, "from": "decode b1 eager / kernels"},
        "graph_node_us": {"median": 1.0, "min": 0.99, "max": 1.02, "from": "chain of 1000, replay, per node"},
        "graph_launch_us": {"median": 3.0, "min": 2.5, "max": 4.0, "from": "1-kernel graph replay"},
        "item_sync_us": {"median": 25.0, "min": 20.0, "max": 33.0, "from": "graph loop with - without .item()"},
    },
}


def test_schema_2_takes_the_benchmarks_own_costs_with_their_spreads():
    p = toy_prices.derive_prices(SCHEMA2)
    assert (p["launch_us"].value, p["launch_us"].spread) == (6.5, 1.5)
    assert (p["kernel_us"].value, p["kernel_us"].spread) == (1.0, 0.03)
    assert (p["graph_launch_us"].value, p["graph_launch_us"].spread) == (3.0, 1.5)
    assert p["sync_us"].value == pytest.approx(25.0 - 3.0 - 57 * 0.001, abs=1e-3) and p["sync_us"].spread == 13.0
    assert p["launch_in_model_us"].value == 16.0
    assert "max - min over 7 repeats" == p["launch_us"].spread_kind and "chain of 100" in p["launch_us"].measurement
    broken = copy.deepcopy(SCHEMA2)
    del broken["costs"]["item_sync_us"]["median"]
    with pytest.raises(ReferenceDataError, match="item_sync_us"):
        toy_prices.derive_prices(broken)


def test_the_toy_with_these_prices_charges_the_recorded_item_cost():
    p = toy_prices.derive_prices(RECORDED)
    cost = tg.CostModel(**{k: p[k].value for k in ("launch_us", "kernel_us", "graph_launch_us", "graph_node_us",
                                                    "sync_us")})
    kernels = [3.0] * 50
    extra = (tg.step_time_us(kernels, mode="graph", sync_every_step=True, cost=cost)
             - tg.step_time_us(kernels, mode="graph", cost=cost))
    assert extra == pytest.approx(30.0, abs=0.01)


def test_check_fails_on_a_stale_module_and_writing_fixes_it(tmp_path):
    data, out = tmp_path / "recorded.json", tmp_path / "prices.py"
    data.write_text(json.dumps(RECORDED))
    assert run("--data", str(data), "--out", str(out), "--check").returncode == 1  # missing
    assert run("--data", str(data), "--out", str(out)).returncode == 0
    assert run("--data", str(data), "--out", str(out), "--check").returncode == 0
    changed = copy.deepcopy(RECORDED)
    changed["chain"]["rows"][1]["eager_us_per_kernel"] = 9.5
    data.write_text(json.dumps(changed))
    stale = run("--data", str(data), "--out", str(out), "--check")
    assert stale.returncode == 1 and "stale" in stale.stderr and "python -m graphcourse.authoring.toy_prices" in stale.stderr
    namespace: dict = {}
    exec(out.read_text(), namespace)
    assert namespace["SOURCE"]["gpu"] == "Test GPU" and namespace["PRICES"]["launch_us"]["value"] == 7.0


def test_a_file_without_the_needed_measurements_gets_a_clear_error(tmp_path):
    broken = copy.deepcopy(RECORDED)
    del broken["item_sync"]
    with pytest.raises(ReferenceDataError, match="item_sync.*graphcourse.gpulib.bench"):
        toy_prices.derive_prices(broken)
    data = tmp_path / "recorded.json"
    data.write_text(json.dumps(broken))
    result = run("--data", str(data), "--out", str(tmp_path / "p.py"))
    assert result.returncode == 2 and "error:" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "p.py").exists(), "nothing is written from a broken file"


def test_the_generated_module_is_standard_library_only():
    text = (ROOT / "toygraph" / "prices.py").read_text()
    assert "import" not in text.split('"""', 2)[2], "data only: no imports"
