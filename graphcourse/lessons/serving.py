"""Lesson 09's helpers: padding waste of the engines' capture-size lists, and the trade against capture cost.

The engines' rules themselves (vLLM's and SGLang's default sizes, read from their source) live in
:mod:`graphcourse.gpulib.capture_sizes` and are imported here under the names the lesson uses.
Pure functions first (no torch): the expected padding waste of a list, the trade-off table that
joins waste to the capture time and memory recorded on a GPU, and a chooser within budgets. Then a
plot and a widget that call them (the widget only wires a slider to :func:`render_tradeoff`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from toygraph.buckets import check_buckets
from toygraph.serving import PaddedSizeTable, ToyCaptureCost, WasteSummary, expected_waste

from ..gpulib.capture_sizes import (  # the lesson reads the engines' rules under these names
    SOURCES,
    SGLANG_CAPTURE_FAILED_ADVICE,
    K_SMALL_SIZE,
    K_SMALL_BUFFER,
    K_MIN_LARGE_ALLOC,
    K_LARGE_BUFFER,
    K_ROUND_LARGE,
    segment_bytes,
    vllm_batch_defaults,
    vllm_default_sizes,
    sglang_default_max_bs,
    sglang_default_sizes,
    sglang_sizes_2025,
    chat_batch_distribution,
    uniform_distribution,
    candidate_lists,
)

__all__ = [
    "CAPTURE_BUDGET_GID", "CAPTURE_READOUT_FORMAT", "MEMORY_BUDGET_GID", "MEMORY_READOUT_FORMAT",
    "SOURCES", "TradeoffRow", "candidate_lists", "chat_batch_distribution", "choose_sizes",
    "fit_capture_cost", "render_tradeoff", "sglang_default_max_bs", "sglang_default_sizes",
    "sglang_sizes_2025", "tradeoff_explorer", "tradeoff_figure", "tradeoff_rows", "uniform_distribution",
    "vllm_batch_defaults", "vllm_default_sizes",
]

# --------------------------------------------------------------------------- the trade-off


@dataclass(frozen=True)
class TradeoffRow:
    """One capture-size list: how many graphs, its padding waste on the traffic, and its recorded capture cost."""

    name: str
    sizes: tuple[int, ...]
    waste: WasteSummary
    capture_s: float | None = None
    capture_s_min: float | None = None
    capture_s_max: float | None = None
    shared_bytes: int | None = None
    private_bytes: int | None = None

    @property
    def n_sizes(self) -> int:
        """Number of graphs."""
        return len(self.sizes)


def tradeoff_rows(distribution: Mapping[int, float], recorded: Mapping[str, Any] | None = None,
                  lists: Mapping[str, Iterable[int]] | None = None) -> list[TradeoffRow]:
    """Each list's waste on `distribution`, joined to its recorded capture time and memory when `recorded` has it.

    `recorded` is the benchmark's "serving" section (or None): its ``lists`` rows give, per list
    name, the median wall time of capturing it largest first into one pool and the memory that
    took (shared pool) against a pool per graph.
    """
    by_name = {r["name"]: r for r in (recorded or {}).get("lists", [])}
    if lists is None:
        lists = {r["name"]: r["sizes"] for r in (recorded or {}).get("lists", [])} or candidate_lists()
    rows = []
    for name, sizes in lists.items():
        sizes = check_buckets(sizes)
        r = by_name.get(name)
        kw: dict[str, Any] = {}
        if r is not None:
            shared, private = r["shared"], r["private"]
            kw = dict(capture_s=shared["capture_s"], capture_s_min=shared["capture_s_min"],
                      capture_s_max=shared["capture_s_max"], shared_bytes=int(shared["free_drop_bytes"]),
                      private_bytes=int(private["free_drop_bytes"]))
        rows.append(TradeoffRow(name, sizes, expected_waste(sizes, distribution), **kw))
    return sorted(rows, key=lambda r: r.n_sizes)


def fit_capture_cost(per_size: Iterable[Mapping[str, Any]]) -> ToyCaptureCost:
    """A :class:`ToyCaptureCost` fitted (least squares, a line in the batch size) to recorded per-size rows.

    Each row holds ``size``, ``capture_ms`` and ``private_pool_bytes`` (what one graph of that
    size took in a pool of its own); the shared-pool model then uses the fitted per-row bytes.
    """
    rows = list(per_size)
    if len(rows) < 2:
        raise ValueError("fitting needs at least two recorded sizes.")
    xs = [float(r["size"]) for r in rows]

    def line(ys: list[float]) -> tuple[float, float]:
        n, mx, my = len(xs), sum(xs) / len(xs), sum(ys) / len(ys)
        sxx = sum((x - mx) ** 2 for x in xs)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
        return my - slope * mx, slope

    t0, t1 = line([float(r["capture_ms"]) for r in rows])
    _m0, m1 = line([float(r["private_pool_bytes"]) for r in rows])
    return ToyCaptureCost(capture_ms=max(t0, 0.0), capture_ms_per_row=max(t1, 0.0),
                          pool_bytes_per_row=max(int(m1), 0), output_bytes_per_row=0)


def capture_cost_model(sec: Mapping[str, Any] | None) -> tuple[ToyCaptureCost, str]:
    """The toy capture-cost model fitted to the recorded per-size rows when there are any, else its assumed prices."""
    rows = list((sec or {}).get("per_size") or [])
    if len(rows) >= 2:
        return fit_capture_cost(rows), ("capture ms: a line fitted to the recorded per-size captures; pool bytes "
                                        "per row: the slope of a line through recorded pool bytes that are a step "
                                        "function of allocator segments (an average, not a price)")
    return ToyCaptureCost(), "assumed (not recorded yet)"


POOLS = {"shared": "one shared pool, largest first", "private": "a pool per graph"}
"""The memory column the chooser reads: the engines' way (shared) or a pool per graph (private)."""


def _pool_bytes(r: TradeoffRow, pool: str) -> int | None:
    return r.shared_bytes if pool == "shared" else r.private_bytes


def choose_sizes(rows: Iterable[TradeoffRow], *, memory_budget_bytes: float = math.inf,
                 capture_budget_s: float = math.inf, pool: str = "shared") -> TradeoffRow:
    """The list with the least padding waste whose recorded memory and capture time fit the budgets.

    `pool` picks the recorded memory column: "shared" (one pool, largest first, as the engines
    capture) or "private" (a pool per graph). Ties go to fewer graphs. A list without recorded
    figures fits no finite budget. Raises ValueError, naming the cheapest list, when none fits.
    """
    if pool not in POOLS:
        raise ValueError(f"pool is one of {sorted(POOLS)}, got {pool!r}.")
    rows = list(rows)
    if not rows:
        raise ValueError("no candidate lists to choose from.")

    def fits(r: TradeoffRow) -> bool:
        got = _pool_bytes(r, pool)
        mem_ok = memory_budget_bytes == math.inf or (got is not None and got <= memory_budget_bytes)
        time_ok = capture_budget_s == math.inf or (r.capture_s is not None and r.capture_s <= capture_budget_s)
        return mem_ok and time_ok

    ok = [r for r in rows if fits(r)]
    if not ok:
        cheapest = min(rows, key=lambda r: (_pool_bytes(r, pool) or math.inf, r.capture_s or math.inf))
        got = _pool_bytes(cheapest, pool)
        took = "" if got is None else f", {got / 2**20:.1f} MiB"
        raise ValueError(
            f"no list fits {memory_budget_bytes / 2**20:.1f} MiB ({POOLS[pool]}) and {capture_budget_s:.2f} s; "
            f"the cheapest is {cheapest.name!r} ({cheapest.n_sizes} sizes{took}): raise a budget, or capture "
            f"fewer sizes" + (" or a smaller largest size." if pool == "shared" else ".")
        )
    return min(ok, key=lambda r: (r.waste.waste_fraction + r.waste.eager_share, r.n_sizes))


# --------------------------------------------------------------------------- plot and widget


MEMORY_BUDGET_GID = "memory-budget"
"""The ``gid`` of the memory-budget line on :func:`tradeoff_figure`'s cost panel."""
CAPTURE_BUDGET_GID = "capture-budget"
"""The ``gid`` of the capture-time-budget line on :func:`tradeoff_figure`'s cost panel."""


def tradeoff_figure(rows: list[TradeoffRow], label: str, highlight: str | None = None,
                    memory_budget_mib: float | None = None, capture_budget_s: float | None = None,
                    pool: str = "shared") -> Any:
    """Capture time and memory (recorded, with min..max) and padding waste against the number of captured sizes.

    Budgets that are given and finite are drawn as labelled horizontal lines on the cost panel (the
    memory budget on the memory axis, read against `pool`'s column; the capture budget on the time axis).
    """
    import matplotlib.pyplot as plt

    from .palette import COLORS

    fig, (ax_cost, ax_waste) = plt.subplots(1, 2, figsize=(11, 3.8))
    timed = [r for r in rows if r.capture_s is not None]
    if timed:
        tx = [r.n_sizes for r in timed]
        ty = [r.capture_s for r in timed]
        err = [[r.capture_s - r.capture_s_min for r in timed], [r.capture_s_max - r.capture_s for r in timed]]
        ax_cost.errorbar(tx, ty, yerr=err, marker="o", color=COLORS["graph_launch"],
                         capsize=3, label="capture time, s (median, min..max)")
        ax_cost.set_xscale("log")
        ax_cost.set_ylabel("capture time (s)")
        ax_mem = ax_cost.twinx()
        ax_mem.plot(tx, [r.shared_bytes / 2**20 for r in timed], marker="s", color=COLORS["launch"],
                    label="one shared pool, MiB")
        ax_mem.plot(tx, [r.private_bytes / 2**20 for r in timed], marker="^", linestyle="--",
                    color=COLORS["sync"], label="a pool per graph, MiB")
        ax_mem.set_ylabel("graph memory (MiB)")
        if memory_budget_mib is not None and math.isfinite(memory_budget_mib):
            ax_mem.axhline(memory_budget_mib, color=COLORS["launch"], linestyle=":", linewidth=1.5,
                           gid=MEMORY_BUDGET_GID,
                           label=f"memory budget {memory_budget_mib:.0f} MiB ({POOLS[pool]})")
        if capture_budget_s is not None and math.isfinite(capture_budget_s):
            ax_cost.axhline(capture_budget_s, color=COLORS["graph_launch"], linestyle="-.", linewidth=1.5,
                            gid=CAPTURE_BUDGET_GID, label=f"capture budget {capture_budget_s:.2f} s")
        lines = ax_cost.get_legend_handles_labels()[0] + ax_mem.get_legend_handles_labels()[0]
        # below the axes, never over the lines it names
        ax_cost.legend(lines, [ln.get_label() for ln in lines], fontsize=8, loc="upper center",
                       bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
        ax_cost.set_title(f"capture cost ({label})", fontsize=9)
    else:
        ax_cost.text(0.5, 0.5, "capture cost not recorded yet:\nrun python -m graphcourse.gpulib.bench_serving\n"
                     "on a GPU", ha="center", va="center", transform=ax_cost.transAxes)
        ax_cost.set_title("capture cost: not recorded yet", fontsize=9)
    ax_cost.set_xlabel("number of captured sizes")
    ax_waste.bar(range(len(rows)), [100 * r.waste.waste_fraction for r in rows], color=COLORS["padding"],
                 hatch="//", edgecolor="black")
    ax_waste.set_xticks(range(len(rows)), [f"{r.name}\n({r.n_sizes})" for r in rows], fontsize=7, rotation=30)
    ax_waste.set_ylabel("padding rows / graphed rows (%)")
    ax_waste.set_title("padding waste on the assumed chat mix", fontsize=9)
    if highlight is not None:
        for i, r in enumerate(rows):
            if r.name == highlight:
                ax_waste.patches[i].set_edgecolor(COLORS["highlight"])
                ax_waste.patches[i].set_linewidth(3)
    fig.tight_layout()
    return fig


def tradeoff_lines(rows: list[TradeoffRow]) -> list[str]:
    """The plot's numbers as text: one line per list."""
    out = [f"{'list':<16}{'sizes':>6}{'waste %':>9}{'eager %':>9}{'capture s':>18}{'shared MiB':>12}{'private MiB':>12}"]
    for r in rows:
        if r.capture_s is None:
            cap, sh, pr = "not recorded", "-", "-"
        else:
            cap = f"{r.capture_s:.2f} ({r.capture_s_min:.2f}-{r.capture_s_max:.2f})"
            sh, pr = f"{r.shared_bytes / 2**20:.1f}", f"{r.private_bytes / 2**20:.1f}"
        out.append(f"{r.name:<16}{r.n_sizes:>6}{100 * r.waste.waste_fraction:>9.1f}"
                   f"{100 * r.waste.eager_share:>9.1f}{cap:>18}{sh:>12}{pr:>12}")
    return out


def binding_budget(rows: Iterable[TradeoffRow], memory_budget_bytes: float, capture_budget_s: float,
                   pool: str = "shared") -> str:
    """Which budget decides, computed from the rows: the lists each budget alone excludes."""
    rows = list(rows)
    mem_out = [r.name for r in rows if (_pool_bytes(r, pool) is None and memory_budget_bytes != math.inf)
               or (_pool_bytes(r, pool) or 0) > memory_budget_bytes]
    time_out = [r.name for r in rows if (r.capture_s is None and capture_budget_s != math.inf)
                or (r.capture_s or 0) > capture_budget_s]
    return (f"the memory budget alone excludes {len(mem_out)} of {len(rows)} lists"
            + (f" ({', '.join(mem_out)})" if 0 < len(mem_out) < len(rows) else "")
            + f"; the capture-time budget alone excludes {len(time_out)}"
            + (f" ({', '.join(time_out)})" if 0 < len(time_out) < len(rows) else ""))


def render_tradeoff(memory_budget_mib: float, distribution: Mapping[int, float],
                    recorded: Mapping[str, Any] | None, label: str = "not recorded yet",
                    capture_budget_s: float = math.inf, pool: str = "shared") -> tuple[str, Any]:
    """The chooser as a pure function: text naming the best list within the budgets, which budget binds, the figure.

    `pool` is the memory column the memory budget is read against (:data:`POOLS`).
    """
    rows = tradeoff_rows(distribution, recorded)
    budget = memory_budget_mib * 2**20
    try:
        best = choose_sizes(rows, memory_budget_bytes=budget, capture_budget_s=capture_budget_s, pool=pool)
        within = f"{memory_budget_mib:.0f} MiB ({POOLS[pool]})" + (
            "" if capture_budget_s == math.inf else f" and {capture_budget_s:.2f} s of capture")
        text = (f"within {within}: {best.name!r} ({best.n_sizes} sizes), "
                f"{100 * best.waste.waste_fraction:.1f}% padding waste")
    except ValueError as exc:
        best, text = None, str(exc)
    if any(r.capture_s is not None for r in rows):
        text += "\n" + binding_budget(rows, budget, capture_budget_s, pool)
    figure = tradeoff_figure(rows, label, best.name if best else None, memory_budget_mib=memory_budget_mib,
                             capture_budget_s=capture_budget_s, pool=pool)
    return "\n".join([text, *tradeoff_lines(rows)]), figure


MEMORY_READOUT_FORMAT = ",.0f"
"""Readout of the memory slider: a plain number of MiB ("1,218"), not the slider's default "1.22e+3"."""
CAPTURE_READOUT_FORMAT = ".2f"
"""Readout of the capture-time slider, in seconds."""


def tradeoff_explorer(distribution: Mapping[int, float], recorded: Mapping[str, Any] | None,
                      label: str = "not recorded yet", memory_budget_mib: float = 160.0,
                      capture_budget_s: float = 0.3, pool: str = "shared") -> Any:
    """Sliders for the memory and capture-time budgets and a choice of memory column, redrawing
    :func:`render_tradeoff` (a ``widgets.Explorer``).

    Works without a front end: setting ``explorer.controls["capture_budget_s"].value`` re-renders at once,
    and ``explorer.text`` holds the text shown.
    """
    import ipywidgets as widgets

    from .widgets import Explorer

    wide = {"description_width": "initial"}  # the whole description, not cut to the default width
    controls = {
        "memory_budget_mib": widgets.FloatLogSlider(
            value=memory_budget_mib, base=2, min=0, max=12, step=0.25, description="memory budget (MiB)",
            readout_format=MEMORY_READOUT_FORMAT, continuous_update=False, style=wide),
        "capture_budget_s": widgets.FloatLogSlider(
            value=capture_budget_s, base=10, min=-2, max=2, step=0.1, description="capture budget (s)",
            readout_format=CAPTURE_READOUT_FORMAT, continuous_update=False, style=wide),
        "pool": widgets.Dropdown(options=[(v, k) for k, v in POOLS.items()], value=pool,
                                 description="memory read against", style=wide,
                                 layout=widgets.Layout(width="30em")),  # room for the longest choice, uncut
    }
    return Explorer(controls, render_tradeoff,
                    fixed={"distribution": distribution, "recorded": recorded, "label": label})


def table_for(sizes: Iterable[int]) -> PaddedSizeTable:
    """The padded-size table of a list (re-exported for the lesson)."""
    return PaddedSizeTable(sizes)




# --------------------------------------------------------------------------- reading the recorded section


def worst_waste_by_band(sizes: Iterable[int], bands: Iterable[tuple[int, int]]) -> list[tuple[int, int, int, float]]:
    """For each band (lo, hi) of batch sizes: (lo, hi, the batch that wastes most, its padding share of the graph)."""
    table = PaddedSizeTable(sizes)
    out = []
    for lo, hi in bands:
        hi = min(hi, table.largest)
        if lo > hi:
            continue
        worst = max(range(lo, hi + 1), key=lambda b: (table.padded_size(b) - b) / table.padded_size(b))
        out.append((lo, hi, worst, (table.padded_size(worst) - worst) / table.padded_size(worst)))
    return out


def _pm(row: Mapping[str, Any], key: str, scale: float = 1.0, fmt: str = ".2f") -> str:
    return (f"{row[key] * scale:{fmt}} ({row[key + '_min'] * scale:{fmt}}-{row[key + '_max'] * scale:{fmt}})")


def capture_mode_lines(sec: Mapping[str, Any] | None) -> list[str]:
    """Per list: capture time and memory (free memory fallen, MiB) for one pool largest first, a pool per graph,
    and one pool smallest first; medians with min-max over the repeats."""
    if not sec:
        return ["capture cost: not recorded yet (run python -m graphcourse.gpulib.bench_serving on a GPU)"]
    out = [f"{'list':<15}{'sizes':>6}  {'capture s, shared pool':<24}{'shared, largest first MiB':<28}"
           f"{'a pool per graph MiB':<26}{'shared, smallest first MiB'}"]
    for r in sec["lists"]:
        out.append(f"{r['name']:<15}{r['n_sizes']:>6}  {_pm(r['shared'], 'capture_s'):<24}"
                   f"{_pm(r['shared'], 'free_drop_bytes', 2**-20, '.1f'):<28}"
                   f"{_pm(r['private'], 'free_drop_bytes', 2**-20, '.1f'):<26}"
                   f"{_pm(r['shared_smallest_first'], 'free_drop_bytes', 2**-20, '.1f')}")
    return out


def compare(a: Mapping[str, Any], b: Mapping[str, Any], key: str) -> str:
    """'less', 'more' or 'no different (the ranges overlap)': a's median against b's, read against both spreads."""
    if a[f"{key}_max"] < b[f"{key}_min"]:
        return "less"
    if a[f"{key}_min"] > b[f"{key}_max"]:
        return "more"
    return "no different (the ranges overlap)"


def capture_mode_summary(sec: Mapping[str, Any] | None) -> str:
    """One sentence per list, computed from the recorded ranges: does one shared pool take less than a pool per graph?"""
    if not sec:
        return "not recorded yet"
    lines = []
    for r in sec["lists"]:
        vs_private = compare(r["shared"], r["private"], "free_drop_bytes")
        vs_order = compare(r["shared"], r["shared_smallest_first"], "free_drop_bytes")
        lines.append(f"{r['name']} ({r['n_sizes']} sizes): one pool largest first took {vs_private} memory than a "
                     f"pool per graph, and {vs_order} than one pool smallest first")
    return "\n".join(lines)


def piecewise_lines(sec: Mapping[str, Any] | None) -> list[str]:
    """µs per decode step: eager, one full graph, piecewise (attention eager); medians with min-max; tokens checked."""
    if not sec:
        return ["piecewise against full graph: not recorded yet (run python -m graphcourse.gpulib.bench_serving)"]
    out = [f"{'batch':>5}  {'eager µs':<22}{'full graph µs':<22}{'piecewise µs':<22}{'piecewise / full':<20}tokens"]
    for r in sec["piecewise"]["rows"]:
        same = "same as eager" if r["full_matches_eager"] and r["piecewise_matches_eager"] else "DIFFER"
        out.append(f"{r['batch']:>5}  {_pm(r, 'eager_us', 1, '.0f'):<22}{_pm(r, 'full_graph_us', 1, '.0f'):<22}"
                   f"{_pm(r, 'piecewise_us', 1, '.0f'):<22}{_pm(r, 'piecewise_over_full'):<20}{same}")
    rows = sec["piecewise"]["rows"]
    out.append(f"piecewise replays {rows[0]['graphs_per_step_piecewise']} graphs and runs "
               f"{rows[0]['eager_attention_calls_per_step']} attentions eagerly per step")
    return out


def piecewise_summary(sec: Mapping[str, Any] | None) -> str:
    """Per batch, computed from the recorded ranges: piecewise against one full graph and against eager."""
    if not sec:
        return "not recorded yet"

    def rng(row: Mapping[str, Any], key: str) -> dict[str, float]:
        return {"t": row[key], "t_min": row[f"{key}_min"], "t_max": row[f"{key}_max"]}

    words = {"less": "less time than", "more": "more time than"}
    out = []
    for r in sec["piecewise"]["rows"]:
        vs_full = compare(rng(r, "piecewise_us"), rng(r, "full_graph_us"), "t")
        vs_eager = compare(rng(r, "piecewise_us"), rng(r, "eager_us"), "t")
        out.append(f"batch {r['batch']}: piecewise took {words.get(vs_full, vs_full + ' from')} one full graph, "
                   f"and {words.get(vs_eager, vs_eager + ' from')} eager")
    return "\n".join(out)


# --------------------------------------------------------------------------- what the recorded memory shows


def _mib(b: float) -> str:
    return f"{b / 2**20:.0f} MiB"


def pool_steps(per_size: Iterable[Mapping[str, Any]]) -> list[tuple[int, int, int]]:
    """(first size, last size, bytes) for each run of equal recorded ``private_pool_bytes`` (a step function)."""
    steps: list[list[int]] = []
    for r in sorted(per_size, key=lambda r: r["size"]):
        b = int(r["private_pool_bytes"])
        if steps and steps[-1][2] == b:
            steps[-1][1] = r["size"]
        else:
            steps.append([r["size"], r["size"], b])
    return [(a, z, b) for a, z, b in steps]


def gather_bytes(model: Mapping[str, int], batch: int, itemsize: int = 4) -> int:
    """Bytes of one layer's attention gather of the cache (``index_select`` of K or V) at `batch`: the step's largest
    tensor on the tiny GPT, batch x heads x max_len x head_dim x itemsize (float32 by default)."""
    head_dim = model["d_model"] // model["n_heads"]
    return batch * model["n_heads"] * model["max_len"] * head_dim * itemsize


def first_large_segment_batch(model: Mapping[str, int], max_batch: int, itemsize: int = 4) -> int | None:
    """The smallest batch whose gather is above kSmallSize, so is served from a large-pool segment (None if none)."""
    return next((b for b in range(1, max_batch + 1) if gather_bytes(model, b, itemsize) > K_SMALL_SIZE), None)


def memory_facts(sec: Mapping[str, Any] | None) -> list[str]:
    """What the recorded capture memory shows, as sentences computed from the data (nothing typed).

    The shared pool per list against its largest size and against one graph of that size alone;
    the growth of a pool per graph; capture time per size; and the step function of one graph's
    pool bytes, with the batch at which the caching allocator's segment size predicts the big step.
    """
    if not sec or not sec.get("lists"):
        return ["capture memory: not recorded yet (run python -m graphcourse.gpulib.bench_serving on a GPU)"]
    lists = sec["lists"]
    shared = [r["shared"]["free_drop_bytes"] for r in lists]
    pool = [r["shared"].get("pool_reserved_bytes", r["shared"]["free_drop_bytes"]) for r in lists]
    largest = sorted({max(r["sizes"]) for r in lists})
    n_sizes = [r["n_sizes"] for r in lists]
    worst = max(r["shared"].get("free_drop_bytes_max", r["shared"]["free_drop_bytes"]) for r in lists)
    out = [f"one shared pool, largest first: pool segments {_mib(min(pool))} to {_mib(max(pool))}, free memory "
           f"fallen (median) {_mib(min(shared))} to {_mib(max(shared))} (at most {_mib(worst)} in one repeat), "
           f"for every list from {min(n_sizes)} to {max(n_sizes)} sizes; every list's largest size is "
           f"{', '.join(map(str, largest))}"]
    per = {r["size"]: int(r["private_pool_bytes"]) for r in sec.get("per_size") or []}
    if len(largest) == 1 and largest[0] in per:
        out.append(f"one graph of size {largest[0]} alone, in its own pool: {_mib(per[largest[0]])}: the shared "
                   f"pool is set by the largest graph, not by the number of sizes")
    priv = sorted((r["n_sizes"], r["private"]["free_drop_bytes"]) for r in lists)
    out.append(f"a pool per graph: {_mib(priv[0][1])} for {priv[0][0]} sizes to {_mib(priv[-1][1])} for "
               f"{priv[-1][0]} sizes (it grows with the sizes)")
    if len(lists) >= 2:
        xs, ys = [float(n) for n in n_sizes], [r["shared"]["capture_s"] * 1000 for r in lists]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        out.append(f"capture time (shared pool): about {slope:.1f} ms more per captured size (a line through the "
                   f"{len(lists)} lists' medians)")
    if per:
        steps = pool_steps(sec["per_size"])
        shown = ", ".join(f"{a}-{z}: {_mib(b)}" if a != z else f"{a}: {_mib(b)}" for a, z, b in steps[:5])
        out.append(f"one graph in its own pool, by size (a step function): {shown}"
                   + (f", ... from {steps[-1][0]}: {_mib(steps[-1][2])}" if len(steps) > 5 else ""))
        model = sec.get("model")
        if model:
            b = first_large_segment_batch(model, max(per))
            jump = next((s for s in sorted(per) if per[s] >= K_LARGE_BUFFER), None)
            if b is not None:
                out.append(
                    f"the gather of the cache is {gather_bytes(model, 1) // 1024} KiB per row: "
                    f"{gather_bytes(model, b - 1) / 2**20:.3f} MiB at batch {b - 1} fits a "
                    f"{_mib(K_SMALL_BUFFER)} small segment (requests <= {_mib(K_SMALL_SIZE)}), "
                    f"{gather_bytes(model, b) / 2**20:.3f} MiB at batch {b} needs a {_mib(K_LARGE_BUFFER)} "
                    f"segment: predicted jump at {b}, recorded first pool of {_mib(K_LARGE_BUFFER)} or more at "
                    f"{jump}")
    return out


def largest_size_lines(sec: Mapping[str, Any] | None, largest: Iterable[int] = (32, 64, 128, 256)) -> list[str]:
    """The memory lever: one graph of each largest size in its own pool (recorded), which is what one shared pool
    captured largest first holds for a list ending there (checked against the lists at the recorded largest size)."""
    per = {r["size"]: int(r["private_pool_bytes"]) for r in (sec or {}).get("per_size") or []}
    if not per:
        return ["by largest size: not recorded yet"]
    return [f"largest size {m:>4}: one graph's pool {_mib(per[m]):>8}" for m in largest if m in per]
