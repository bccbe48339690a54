"""Matplotlib drawings of the toy timeline: a CPU lane and a GPU lane, with the GPU's idle gaps visible."""

from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from toygraph.timeline import Timeline

COLORS = {
    "launch": "#4C72B0",        # eager launches: the launch tax
    "graph_launch": "#55A868",  # one graph launch per step
    "host": "#8C8C8C",          # Python and other CPU work
    "wait": "#F2C14E",          # the CPU waiting on a sync
    "sync": "#C44E52",          # the sync itself
    "kernel": "#DD8452",        # kernels on the GPU
}
LABELS = {
    "launch": "kernel launch (CPU)", "graph_launch": "graph launch (CPU)", "host": "host work (CPU)",
    "wait": "CPU waits for GPU", "sync": "sync (.item())", "kernel": "kernel (GPU)",
}


def draw_timeline(timeline: Timeline, ax: Axes | None = None, title: str = "", max_us: float | None = None) -> Axes:
    """Draw one timeline as two lanes, CPU above GPU; white space in the GPU lane is the GPU sitting idle."""
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 2.2))
    lanes = {"cpu": 1.0, "gpu": 0.0}
    for event in timeline.events:
        ax.broken_barh([(event.start_us, max(event.duration_us, 1e-3))], (lanes[event.lane] - 0.35, 0.7),
                       facecolors=COLORS.get(event.kind, "#999999"), edgecolors="white", linewidth=0.3)
    end = max_us if max_us is not None else max(timeline.total_us, 1.0)
    ax.set_xlim(0, end * 1.02)
    ax.set_ylim(-0.6, 1.6)
    ax.set_yticks([1.0, 0.0], ["CPU", "GPU"])
    ax.set_xlabel("time (µs)")
    util = 100 * timeline.gpu_utilization
    ax.set_title(f"{title}  —  {timeline.total_us:,.1f} µs, GPU busy {util:.0f}%".strip(" —"), fontsize=10, loc="left")
    for step_end in timeline.step_end_us:
        ax.axvline(step_end, color="#333333", linewidth=0.6, linestyle=":")
    return ax


def legend_handles(kinds: Sequence[str] | None = None) -> list[Patch]:
    """Coloured patches naming each kind of bar."""
    return [Patch(color=COLORS[k], label=LABELS[k]) for k in (kinds or COLORS)]


def compare_timelines(timelines: dict[str, Timeline], title: str = "") -> Figure:
    """Draw several timelines on one time axis, one above the other, so their lengths compare at a glance."""
    if not timelines:
        raise ValueError("compare_timelines needs at least one timeline, e.g. {'eager': t1, 'graph': t2}.")
    end = max(t.total_us for t in timelines.values())
    fig, axes = plt.subplots(len(timelines), 1, figsize=(10, 1.9 * len(timelines) + 0.6), sharex=True, squeeze=False)
    for ax, (name, t) in zip(axes[:, 0], timelines.items()):
        draw_timeline(t, ax=ax, title=name, max_us=end)
    for ax in axes[:-1, 0]:
        ax.set_xlabel("")
    kinds = sorted({e.kind for t in timelines.values() for e in t.events}, key=list(COLORS).index)
    fig.legend(handles=legend_handles(kinds), loc="lower center", ncol=min(len(kinds), 6), fontsize=8, frameon=False)
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return fig
