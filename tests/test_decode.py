"""Lesson 05's helpers: the toy's prediction for a measured decode row and the plots drawn from recorded data."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest

import toygraph as tg
from graphcourse import decode
from graphcourse.reference import load_reference, recorded_label, section


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
    assert len(fig.axes[0].lines) == 5 and "NVIDIA" in fig.axes[0].get_title()
    item = section("item_sync", data)
    fig2 = decode.plot_item_cost(item, label, decode.toy_prediction(section("decode", data)["rows"][0]))
    assert len(fig2.axes[0].patches) == 4
