"""Lesson 05's helpers: the toy's prediction for a measured decode row and the plots drawn from recorded data."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest

import toygraph as tg
from graphcourse.lessons import decode
from graphcourse.lessons.reference import load_reference, recorded_label, section


def row(kernels: float = 50.0, kernel_time_us: float = 100.0) -> dict:
    return {"batch": 1, "kernels": kernels, "kernel_time_us": kernel_time_us, "eager_step_us": 1000.0, "graph_step_us": 120.0}


def test_toy_prediction_uses_the_rows_kernels_and_their_mean_time() -> None:
    p = decode.toy_prediction(row())
    assert (p.kernels, p.kernel_us) == (50, 2.0)
    assert p.eager_us == pytest.approx(tg.step_time_us([2.0] * 50, mode="eager"))
    assert p.graph_us == pytest.approx(tg.step_time_us([2.0] * 50, mode="graph"))
    # launches (12 µs) cost more than kernels (2 µs): eager is launch-bound, a graph is kernel-bound
    assert p.eager_us == pytest.approx(50 * tg.H200_COSTS.launch_us, rel=0.01)
    assert p.graph_us == pytest.approx(100.0, rel=0.05)
    assert p.graph_item_us > p.graph_us and p.speedup > 1


def test_toy_prediction_refuses_an_empty_step() -> None:
    with pytest.raises(ValueError, match="at least one"):
        decode.toy_prediction(row(kernels=0))


def test_cpu_us_per_launch_divides_the_eager_step() -> None:
    assert decode.cpu_us_per_launch(row()) == pytest.approx(20.0)


def test_plots_draw_from_the_recorded_benchmark() -> None:
    data = load_reference()
    label = recorded_label(data)
    fig = decode.plot_decode_per_batch(section("decode", data), label)
    ax = fig.axes[0]
    assert len(ax.containers) == 2, "eager and graph replay drawn with error bars (min..max over repeats)"
    assert len([ln for ln in ax.get_legend_handles_labels()[1]]) == 5 and "NVIDIA" in ax.get_title()
    item = section("item_sync", data)
    fig2 = decode.plot_item_cost(item, label, decode.toy_prediction(section("decode", data)["rows"][0]))
    assert len(fig2.axes[0].patches) == 4


def decode_run(eager_us: float, graph_us: float, batch: int = 1) -> dict:
    r = {**row(), "batch": batch, "eager_step_us": eager_us, "graph_step_us": graph_us, "graph_kernels": 50.0,
         "graph_kernel_time_us": 110.0, "replay_matches_eager": True}
    return {"config": {"d_model": 8}, "rows": [r]}


def test_with_spread_and_is_effect_read_the_min_and_max_keys() -> None:
    r = {"a": 10.0, "a_min": 9.0, "a_max": 12.0, "b": 11.0, "b_min": 10.5, "b_max": 11.5, "c": 20.0, "c_min": 19.0,
         "c_max": 21.0}
    assert decode.with_spread(r, "a") == "10 [9..12]" and decode.with_spread({"x": 3.0}, "x") == "3"
    assert not decode.is_effect(r, "a", "b"), "overlapping ranges: not an effect"
    assert decode.is_effect(r, "a", "c")


def test_headline_lines_put_the_quoted_headline_beside_the_measurement() -> None:
    text = decode.headline_lines({**row(), "kernel_time_us": 100.0}, "label")
    assert "1000 -> 50 µs/token, 20x" in text and "1000 -> 120 µs/token, 8.3x (label, batch 1;" in text
    assert "floor: 100 µs, above the rule of thumb's 50 µs" in text
    assert "eager 900 µs (90% of its step), graph 20 µs (17% of its step)" in text
    assert "below the rule of thumb" in decode.headline_lines({**row(), "kernel_time_us": 30.0}, "label")


def test_item_sync_lines_print_each_loops_cost_and_the_remaining_speedup() -> None:
    item = {"batch": 1, "tokens": 100, "eager_us_per_token": 1000.0, "eager_item_us_per_token": 1010.0,
            "graph_us_per_token": 100.0, "graph_item_us_per_token": 125.0}
    text = decode.item_sync_lines(item)
    assert "100 tokens at batch 1" in text
    assert "(+10 µs, +1% a token)" in text and "(+25 µs, +25% a token)" in text
    assert "still 8.1x faster than eager (10.0x without it)" in text


def test_item_sync_lines_call_a_difference_inside_the_spread_noise() -> None:
    item = {"batch": 1, "tokens": 100, "eager_us_per_token": 1000.0, "eager_item_us_per_token": 960.0,
            "graph_us_per_token": 100.0, "graph_item_us_per_token": 125.0,
            "eager_spread_us": 80.0, "eager_item_spread_us": 30.0, "graph_spread_us": 3.0, "graph_item_spread_us": 4.0}
    text = decode.item_sync_lines(item)
    assert "(-40 µs: its range includes 0, so no cost we can see)" in text
    assert "(+25 µs, +25% a token)" in text, "a difference beyond the spread is still reported as a cost"


def test_item_sync_lines_use_the_per_repeat_cost_range_when_recorded() -> None:
    item = {"batch": 1, "tokens": 100, "repeats": 7, "eager_us_per_token": 1000.0, "eager_item_us_per_token": 990.0,
            "graph_us_per_token": 100.0, "graph_item_us_per_token": 130.0,
            "item_cost_us": 30.0, "item_cost_us_min": 22.0, "item_cost_us_max": 41.0,
            "eager_item_cost_us": -10.0, "eager_item_cost_us_min": -90.0, "eager_item_cost_us_max": 60.0}
    text = decode.item_sync_lines(item)
    assert "(median per-repeat difference +30 µs [+22..+41], +30% a token)" in text
    assert "(median per-repeat difference -10 µs [-90..+60]: its range includes 0" in text


def test_item_sync_lines_label_the_recorded_cost_as_the_median_of_differences() -> None:
    """The recorded eager medians fall while the paired differences' median rises: the line must say which it prints."""
    item = section("item_sync", load_reference())
    text = decode.item_sync_lines(item)
    for mode, key in (("eager", "eager_item_cost_us"), ("graph", "item_cost_us")):
        line = next(ln for ln in text.splitlines() if ln.strip().startswith(f"{mode}:"))
        assert f"median per-repeat difference {item[key]:+.0f} µs" in line
        medians = item[f"{mode}_item_us_per_token"] - item[f"{mode}_us_per_token"]
        if round(medians) != round(item[key]):
            assert f"difference {medians:+.0f} µs" not in line


def test_the_lines_read_the_recorded_benchmark() -> None:
    data = load_reference()
    assert "rule of thumb" in decode.headline_lines(section("decode", data)["rows"][0], recorded_label(data))
    assert "still" in decode.item_sync_lines(section("item_sync", data))
