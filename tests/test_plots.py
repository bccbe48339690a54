"""The timeline drawing: one bar per event, CPU above GPU, every timeline on one time axis."""

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
from matplotlib.collections import PolyCollection  # noqa: E402

import toygraph as tg  # noqa: E402
from graphcourse.lessons.plots import compare_timelines, draw_timeline  # noqa: E402


def _bars(ax):
    return [path for c in ax.collections if isinstance(c, PolyCollection) for path in c.get_paths()]


def test_draw_timeline_draws_one_bar_per_event_in_its_lane():
    timeline = tg.simulate(6, mode="eager", steps=2, sync_every_step=True)
    ax = draw_timeline(timeline, title="eager")
    bars = _bars(ax)
    assert len(bars) == len(timeline.events)
    cpu_bars = [b for b in bars if b.vertices[:, 1].min() > 0.5]
    assert len(cpu_bars) == len(timeline.lane("cpu"))
    assert "GPU busy" in ax.get_title(loc="left")


def test_compare_timelines_shares_one_time_axis():
    eager, graph = tg.simulate(8), tg.simulate(8, mode="graph")
    fig = compare_timelines({"eager": eager, "graph": graph}, "demo")
    axes = fig.axes
    assert len(axes) == 2
    assert axes[0].get_xlim() == axes[1].get_xlim()
    assert axes[0].get_xlim()[1] >= eager.total_us > graph.total_us


def test_compare_timelines_needs_a_timeline():
    with pytest.raises(ValueError, match="at least one timeline"):
        compare_timelines({})
