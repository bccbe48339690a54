"""Lessons 05 and 06's helpers: steadier decode timings, the toy's prediction for a measured step, the lines and plots of µs per token."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from toygraph.timeline import CostModel, step_time_us

from .plots import COLORS


@dataclass(frozen=True)
class ToyPrediction:
    """What toygraph predicts for a decode step of `kernels` kernels of `kernel_us` each."""

    kernels: int
    kernel_us: float
    eager_us: float
    graph_us: float
    eager_item_us: float
    graph_item_us: float

    @property
    def speedup(self) -> float:
        """Eager step time over graph step time."""
        return self.eager_us / self.graph_us


def toy_prediction(row: dict[str, Any], cost: CostModel | None = None) -> ToyPrediction:
    """The toy's step times for a measured decode row: its kernel count, each kernel the row's mean kernel time."""
    n = round(row["kernels"])
    if n < 1:
        raise ValueError(f"the row has {row['kernels']!r} kernels: a decode step needs at least one.")
    kernels = [row["kernel_time_us"] / n] * n
    times = {(mode, sync): step_time_us(kernels, mode=mode, sync_every_step=sync, cost=cost)
             for mode in ("eager", "graph") for sync in (False, True)}
    return ToyPrediction(n, kernels[0], times["eager", False], times["graph", False],
                         times["eager", True], times["graph", True])


HEADLINE_EAGER_US, HEADLINE_GRAPH_US = 1000, 50
"""A rule of thumb often quoted for small models: graph replay takes a decode step "from about 1 ms/token to about 50 µs/token"."""


def fastest_of(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Several `bench_decode` results merged into one: per batch, the fastest eager and graph step (noise only adds time).

    Kept for old notebooks; the benchmark now records medians of interleaved repeats with their
    spread, which is what lessons show.
    """
    if not runs:
        raise ValueError("no decode runs to merge: pass the results of at least one bench_decode call.")
    merged = {**runs[0], "rows": []}
    for first in runs[0]["rows"]:
        same = [r for run in runs for r in run["rows"] if r["batch"] == first["batch"]]
        eager_us, graph_us = min(r["eager_step_us"] for r in same), min(r["graph_step_us"] for r in same)
        floor_us = first["kernel_time_us"]
        merged["rows"].append({**first, "eager_step_us": eager_us, "graph_step_us": graph_us, "speedup": eager_us / graph_us,
                               "graph_over_kernel_time": graph_us / floor_us if floor_us else None,
                               "replay_matches_eager": all(r.get("replay_matches_eager", True) for r in same),
                               "runs": len(same)})
    return merged


def with_spread(row: dict[str, Any], key: str, fmt: str = ".0f") -> str:
    """'median [min..max]' of a measured figure (just the median where the data has no spread)."""
    if f"{key}_min" not in row:
        return f"{row[key]:{fmt}}"
    return f"{row[key]:{fmt}} [{row[f'{key}_min']:{fmt}}..{row[f'{key}_max']:{fmt}}]"


def is_effect(row: dict[str, Any], a: str, b: str) -> bool:
    """True when the ranges [min..max] of two measured figures do not overlap: a difference larger than its spread."""
    if f"{a}_min" not in row or f"{b}_min" not in row:
        return True
    return row[f"{a}_min"] > row[f"{b}_max"] or row[f"{b}_min"] > row[f"{a}_max"]


def headline_lines(row: dict[str, Any], label: str) -> str:
    """The rule of thumb beside one measured decode row: step times (median [min..max]), the kernel floor, the overhead above it."""
    eager_us, graph_us, floor_us = row["eager_step_us"], row["graph_step_us"], row["kernel_time_us"]
    eager_over, graph_over = eager_us - floor_us, graph_us - floor_us
    side = "above" if floor_us > HEADLINE_GRAPH_US else "below"
    return "\n".join([
        f"rule of thumb : {HEADLINE_EAGER_US} -> {HEADLINE_GRAPH_US} µs/token, "
        f"{HEADLINE_EAGER_US / HEADLINE_GRAPH_US:.0f}x (round numbers, quoted)",
        f"measured      : {with_spread(row, 'eager_step_us')} -> {with_spread(row, 'graph_step_us')} µs/token, "
        f"{with_spread(row, 'speedup', '.1f') if 'speedup' in row else format(eager_us / graph_us, '.1f')}x "
        f"({label}, batch {row['batch']}; median [min..max] over repeats)",
        f"the kernels' own GPU time, the floor: {floor_us:.0f} µs, {side} the rule of thumb's {HEADLINE_GRAPH_US} µs",
        f"overhead above the floor: eager {eager_over:.0f} µs ({eager_over / eager_us:.0%} of its step), "
        f"graph {graph_over:.0f} µs ({graph_over / graph_us:.0%} of its step)",
    ])


def item_sync_lines(item: dict[str, Any]) -> str:
    """What one `.item()` a token costs each loop (the benchmark's 'item_sync' section): medians with [min..max].

    Where the data records it, the cost is the median of the per-repeat differences with [min..max]
    (labelled so: it need not equal the difference of the two medians); older data without it falls
    back to the difference of the medians. A difference whose range over the repeats includes zero (or, in older data, that is no larger
    than the loops' spread) is reported as noise rather than as a cost or a gain.
    """
    lines = [f"{item['tokens']} tokens at batch {item['batch']} (median [min..max] over {item.get('repeats', '?')} repeats):"]
    for mode in ("eager", "graph"):
        plain_us, synced_us = item[f"{mode}_us_per_token"], item[f"{mode}_item_us_per_token"]
        cost_key = "item_cost_us" if mode == "graph" else "eager_item_cost_us"
        if f"{cost_key}_min" in item:
            lo, hi, diff = item[f"{cost_key}_min"], item[f"{cost_key}_max"], item[cost_key]
            noise = lo <= 0 <= hi
            # The median of the paired per-repeat differences (each repeat times both loops back to
            # back), which need not equal the difference of the two medians printed beside it.
            shown = f"median per-repeat difference {diff:+.0f} µs [{lo:+.0f}..{hi:+.0f}]"
        else:
            diff = synced_us - plain_us
            spread = max(item.get(f"{mode}_spread_us", 0.0), item.get(f"{mode}_item_spread_us", 0.0))
            noise, shown = abs(diff) <= spread, f"{diff:+.0f} µs"
        verdict = (f"{shown}: its range includes 0, so no cost we can see" if noise
                   else f"{shown}, {diff / plain_us:+.0%} a token")
        lines.append(f"{mode:>7}: {with_spread(item, f'{mode}_us_per_token')} µs/token, with one .item() a token "
                     f"{with_spread(item, f'{mode}_item_us_per_token')} ({verdict})")
    eager_us, graph_item_us = item["eager_item_us_per_token"], item["graph_item_us_per_token"]
    lines.append(f"with the sync in both loops, graph replay is still {eager_us / graph_item_us:.1f}x faster than eager "
                 f"({item['eager_us_per_token'] / item['graph_us_per_token']:.1f}x without it)")
    return "\n".join(lines)


def cpu_us_per_launch(row: dict[str, Any]) -> float:
    """The eager step's CPU time per kernel it launched (what `launch_us` would have to be for the toy to match)."""
    return row["eager_step_us"] / row["kernels"]


def _yerr(rows: Sequence[dict[str, Any]], key: str) -> Any:
    """Error bars from a measured key's [min..max] (None where the data has no spread)."""
    if not rows or f"{key}_min" not in rows[0]:
        return None
    return [[r[key] - r[f"{key}_min"] for r in rows], [r[f"{key}_max"] - r[key] for r in rows]]


def plot_decode_per_batch(decode: dict[str, Any], label: str, cost: CostModel | None = None) -> Figure:
    """µs per output token against batch size: eager and graph replay as measured, the kernels' own GPU time, the toy's prediction."""
    rows = sorted(decode["rows"], key=lambda r: r["batch"])
    batches = [r["batch"] for r in rows]
    toy = [toy_prediction(r, cost) for r in rows]
    fig, ax = plt.subplots(figsize=(8, 4))
    for key, color, marker, name in (("eager_step_us", COLORS["launch"], "o-", "eager, measured"),
                                     ("graph_step_us", COLORS["graph_launch"], "^-", "graph replay, measured")):
        ax.errorbar(batches, [r[key] for r in rows], yerr=_yerr(rows, key), fmt=marker, color=color, capsize=3,
                    label=name + (" (median, bars min..max)" if f"{key}_min" in rows[0] else ""))
    ax.plot(batches, [r["kernel_time_us"] for r in rows], "s:", color=COLORS["kernel"], label="sum of kernel GPU time (floor)")
    ax.plot(batches, [t.eager_us for t in toy], "--", color=COLORS["launch"], alpha=0.6, label="eager, toy prediction")
    ax.plot(batches, [t.graph_us for t in toy], "--", color=COLORS["graph_launch"], alpha=0.6, label="graph, toy prediction")
    ax.set_xscale("log", base=2)
    ax.set_xticks(batches, [str(b) for b in batches])
    ax.set_ylim(0, None)
    c = decode.get("config", {})
    ax.set(xlabel="batch size (sequences decoded together)", ylabel="µs per decode step (one token per sequence)",
           title=f"Tiny GPT decode step (d={c.get('d_model', '?')}, {c.get('n_layers', '?')} layers), {label}")
    ax.title.set_fontsize(9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_item_cost(item: dict[str, Any], label: str, toy: ToyPrediction | None = None) -> Figure:
    """µs per token for eager and graph loops, with and without one `.item()` a token (the benchmark's 'item_sync' section)."""
    groups = ["eager", "graph"]
    plain = [item["eager_us_per_token"], item["graph_us_per_token"]]
    synced = [item["eager_item_us_per_token"], item["graph_item_us_per_token"]]
    fig, ax = plt.subplots(figsize=(7, 3.6))
    xs = range(len(groups))
    def err(keys: Sequence[str]) -> Any:
        if f"{keys[0]}_min" not in item:
            return None
        return [[item[k] - item[f"{k}_min"] for k in keys], [item[f"{k}_max"] - item[k] for k in keys]]

    ax.bar([x - 0.2 for x in xs], plain, width=0.4, color=COLORS["graph_launch"], label="token stays on the GPU",
           yerr=err(["eager_us_per_token", "graph_us_per_token"]), capsize=4)
    ax.bar([x + 0.2 for x in xs], synced, width=0.4, color=COLORS["sync"], label="one .item() a token", hatch="//",
           yerr=err(["eager_item_us_per_token", "graph_item_us_per_token"]), capsize=4)
    if toy is not None:
        ax.scatter([x - 0.2 for x in xs], [toy.eager_us, toy.graph_us], marker="_", s=600, color="black", zorder=3,
                   label="toy prediction")
        ax.scatter([x + 0.2 for x in xs], [toy.eager_item_us, toy.graph_item_us], marker="_", s=600, color="black", zorder=3)
    for x, mode, a, b in zip(xs, groups, plain, synced):
        key = "item_cost_us" if mode == "graph" else "eager_item_cost_us"
        lo, hi = item.get(f"{key}_min"), item.get(f"{key}_max")
        if lo is not None and lo <= 0 <= hi:
            text = "no effect beyond the spread"  # never draw a difference smaller than its spread as an effect
        else:
            text = f"{b - a:+.0f} µs"
        ax.annotate(text, (x + 0.2, b), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(list(xs), groups)
    ax.set(ylabel="µs per output token", title=f"The cost of .item() in the token loop (batch {item['batch']}), {label}")
    ax.title.set_fontsize(9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
