"""Matplotlib drawings of the toy timeline: a CPU lane and a GPU lane, with the GPU's idle gaps visible."""

from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from toygraph.timeline import CostModel, Timeline

from .palette import COLORS, HATCHES, MARKERS, install_alt_text  # colour-blind-safe (Okabe–Ito), with hatches

install_alt_text()  # figures shown in a notebook carry a text alternative in their output metadata
LABELS = {
    "launch": "kernel launch (CPU)", "graph_launch": "graph launch (CPU)", "host": "host work (CPU)",
    "wait": "CPU waits for GPU", "sync": "sync (.item())", "kernel": "kernel (GPU)",
}


def finish(fig: Figure, ax: Axes, xlabel: str, ylabel: str, title: str) -> Figure:
    """The course's look for a small line chart: both axes labelled, the title small and on the left, a legend."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10, loc="left")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def draw_timeline(timeline: Timeline, ax: Axes | None = None, title: str = "", max_us: float | None = None) -> Axes:
    """Draw one timeline as two lanes, CPU above GPU; white space in the GPU lane is the GPU sitting idle."""
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 2.2))
    lanes = {"cpu": 1.0, "gpu": 0.0}
    groups: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for event in timeline.events:  # one bar collection per lane and kind: quick enough to redraw under a slider
        groups.setdefault((event.lane, event.kind), []).append((event.start_us, max(event.duration_us, 1e-3)))
    for (lane, kind), bars in groups.items():
        ax.broken_barh(bars, (lanes[lane] - 0.35, 0.7), facecolors=COLORS.get(kind, "#999999"),
                       edgecolors="white", linewidth=0.3, hatch=HATCHES.get(kind, ""))
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
    return [Patch(facecolor=COLORS[k], edgecolor="white", hatch=HATCHES[k], label=LABELS[k]) for k in (kinds or LABELS)]


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
    kinds = sorted({e.kind for t in timelines.values() for e in t.events}, key=list(LABELS).index)
    fig.legend(handles=legend_handles(kinds), loc="lower center", ncol=min(len(kinds), 6), fontsize=8, frameon=False)
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return fig


def plot_chain_vs_toy(chain: dict, label: str, cost: CostModel | None = None) -> Figure:
    """µs per kernel against chain length: measured eager and graph (the benchmark's 'chain' section) beside the toy's prediction."""
    from toygraph.timeline import step_time_us

    rows = sorted(chain["rows"], key=lambda r: r["kernels"])
    ns = [r["kernels"] for r in rows]
    fig, ax = plt.subplots(figsize=(8, 4))
    for key, kind, name in (("eager_us_per_kernel", "launch", "eager, measured"),
                            ("graph_us_per_node", "graph_launch", "graph replay, measured")):
        spread = f"{key}_min" in rows[0]
        yerr = ([[r[key] - r[f"{key}_min"] for r in rows], [r[f"{key}_max"] - r[key] for r in rows]]
                if spread else None)
        ax.errorbar(ns, [r[key] for r in rows], yerr=yerr, fmt=MARKERS[kind] + "-", color=COLORS[kind], capsize=3,
                    label=name + (" (median, bars min..max)" if spread else ""))
    ax.plot(ns, [step_time_us(n, mode="eager", cost=cost) / n for n in ns], "--", color=COLORS["launch"],
            alpha=0.7, label="eager, toy prediction")
    ax.plot(ns, [step_time_us(n, mode="graph", cost=cost) / n for n in ns], "--", color=COLORS["graph_launch"],
            alpha=0.7, label="graph replay, toy prediction")
    ax.set(xscale="log", yscale="log", xlabel="kernels in the chain (N)", ylabel="µs per kernel",
           title=f"A chain of N tiny kernels ({chain.get('op', 'tiny kernels')}), {label}")
    ax.title.set_fontsize(9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_bucketed_runner(bucketed: dict, label: str) -> Figure:
    """The bucketed runner on a mixed stream (the benchmark's 'bucketed' section): throughput, padding, memory per bucket."""
    fig, (speed, waste, memory) = plt.subplots(1, 3, figsize=(12, 3.6), gridspec_kw={"width_ratios": [1, 1, 2]})
    rows_total = bucketed["stream"].get("rows")
    yerr = None
    if "eager_s_min" in bucketed and rows_total:
        per_s = lambda key, t: rows_total / bucketed[f"{key}_{t}"]  # noqa: E731  (more time, fewer rows/s)
        yerr = [[bucketed["eager_rows_per_s"] - per_s("eager_s", "max"), bucketed["graph_rows_per_s"] - per_s("graph_s", "max")],
                [per_s("eager_s", "min") - bucketed["eager_rows_per_s"], per_s("graph_s", "min") - bucketed["graph_rows_per_s"]]]
    speed.bar(["eager", "bucketed\ngraphs"], [bucketed["eager_rows_per_s"], bucketed["graph_rows_per_s"]],
              color=[COLORS["launch"], COLORS["graph_launch"]], hatch=[HATCHES["launch"], HATCHES["graph_launch"]],
              edgecolor="white", yerr=yerr, capsize=4)
    ratio = f"{bucketed['speedup']:.1f}x"
    if "speedup_min" in bucketed:
        ratio += f" [{bucketed['speedup_min']:.1f}..{bucketed['speedup_max']:.1f}]"
    speed.set(ylabel="rows per second", title=f"throughput: {ratio} eager")
    pad = bucketed["padding"]
    waste.bar(["useful", "padding"], [pad["useful_rows"], pad["padded_rows"]],
              color=[COLORS["useful"], COLORS["padding"]], hatch=[HATCHES["useful"], HATCHES["padding"]], edgecolor="white")
    waste.set(ylabel="rows replayed", title=f"padding: {100 * pad['waste_fraction']:.1f}% of rows")
    per_bucket = sorted(bucketed["memory_per_bucket"], key=lambda m: m["bucket"])
    xs = range(len(per_bucket))
    mib = 2**20
    memory.bar([x - 0.2 for x in xs], [m["private_pool_reserved_bytes"] / mib for m in per_bucket], width=0.4,
               color=COLORS["kernel"], hatch="..", edgecolor="white", label="own private pool")
    memory.bar([x + 0.2 for x in xs], [m["shared_pool_reserved_bytes"] / mib for m in per_bucket], width=0.4,
               color=COLORS["graph_launch"], label="one shared pool (largest captured first)")
    memory.set_xticks(list(xs), [str(m["bucket"]) for m in per_bucket])
    memory.set(xlabel="bucket", ylabel="MiB reserved by its capture", title="GPU memory per captured bucket")
    memory.legend(fontsize=8)
    for ax in (speed, waste, memory):
        ax.title.set_fontsize(9)
    fig.suptitle(f"Bucketed runner, {bucketed['stream']['n_batches']} batches of 1..{bucketed['stream']['max']} rows, {label}",
                 fontsize=10)
    fig.tight_layout()
    return fig
