"""Lessons 07 and 08 read the decode-paths benchmark here: load data/decode_paths.json, label it, tabulate, plot.

Reading needs no torch. The file is written on a GPU by ``python -m graphcourse.gpulib.bench_decode_paths``;
every figure a lesson shows from it carries :func:`recorded_label` (GPU, date, torch).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from ..errors import ReferenceDataError
from ..core.paths import DECODE_PATHS_FILE as DATA_FILE, decode_paths_path
from ..core.recorded import load_recorded

__all__ = ["PATH_LABELS", "bar_effect_lines", "compile_order", "cond_capture_line", "decode_step_profile",
           "demos_live_or_recorded", "k_step_costs", "kernel_lines", "load",
           "one_time_cost_lines", "path_label", "path_rows", "path_table", "plot_paths", "ratio_line",
           "recorded_label", "section", "shorten", "simulate_k_steps", "static_skip_lines"]

PATH_LABELS = {
    "eager": "eager (one launch per kernel)",
    "graph_k1": "one graph per step (lesson 05)",
    "compiled_default": "torch.compile default (compiled kernels, no graphs)",
    "reduce_overhead": "torch.compile reduce-overhead",
}


def path_label(name: str) -> str:
    """A readable name for a benchmark path ('graph_k16' -> '16 steps per graph')."""
    if name in PATH_LABELS:
        return PATH_LABELS[name]
    if name.startswith("compiled_graph_k"):
        k = name[len("compiled_graph_k"):]
        return f"compiled kernels, {k} step{'s' if k != '1' else ''} per graph (by hand)"
    if name.startswith("graph_k"):
        return f"{name[len('graph_k'):]} steps per graph"
    return name


def default_path() -> Path:
    """data/decode_paths.json of the course folder."""
    return decode_paths_path()


def load(path: str | Path | None = None) -> dict[str, Any]:
    """The recorded benchmark, with a clear error when the file is missing or not the benchmark's."""
    file = Path(path) if path is not None else default_path()
    return load_recorded(file, "python -m graphcourse.gpulib.bench_decode_paths")


def shorten(text: str, limit: int = 160) -> str:
    """`text` on one line, cut at a word boundary to at most `limit` characters ('…' where cut), never mid-word."""
    line = " ".join(str(text).split())
    if len(line) <= limit:
        return line
    cut = line[: limit - 1].rsplit(" ", 1)[0]
    return cut.rstrip(" ,;:") + "…"


def section(name: str, data: dict[str, Any]) -> Any:
    """One section of the results; a clear error naming why it is missing (a failed section records its error)."""
    if name in data:
        return data[name]
    if f"{name}_error" in data:
        raise ReferenceDataError(f"the benchmark run that wrote this file failed in section {name!r}: "
                                 f"{shorten(data[name + '_error'].splitlines()[0], 200)}")
    raise ReferenceDataError(f"the recorded results have no section {name!r}: re-run the benchmark on a GPU.")


def recorded_label(data: dict[str, Any]) -> str:
    """'recorded on NVIDIA H200, 2026-11-30, torch 2.11.0+cu130 (CUDA 13.0)'."""
    p = data["provenance"]
    return (f"recorded on {p.get('gpu_name', 'an unnamed GPU')}, {str(p.get('date_utc', '?'))[:10]}, "
            f"torch {p.get('torch', '?')} (CUDA {p.get('cuda', '?')})")


def path_rows(data: dict[str, Any], batch: int, part: str = "batches") -> list[dict[str, Any]]:
    """The rows of one batch size, in the order they were measured.

    `part`: 'batches' (eager, K steps per graph, default mode, reduce-overhead, all timed together)
    or 'compiled_graphs' (default-mode kernels captured by hand, timed with their own references).
    """
    for b in section(part, data):
        if b["batch"] == batch:
            return b["rows"]
    known = [b["batch"] for b in data[part]]
    raise ReferenceDataError(f"no batch {batch} in the recorded results (batches: {known}).")


def path_table(data: dict[str, Any], batch: int, paths: Sequence[str] | None = None,
               part: str = "batches") -> str:
    """Aligned lines: each path's median µs per token and CPU issue µs per token, each with its spread.

    A part the benchmark could not record gives one line saying so and why.
    """
    try:
        rows = [r for r in path_rows(data, batch, part) if paths is None or r["path"] in paths]
    except ReferenceDataError as exc:
        return f"batch {batch}: not recorded: {shorten(str(exc), 300)}"
    width = max(len(path_label(r["path"])) for r in rows)
    lines = [f"{'batch ' + str(batch):<{width}}   µs per token (spread)   CPU µs per token (spread)"]
    for r in rows:
        t, i = r["us_per_token"], r["issue_us_per_token"]
        lines.append(f"{path_label(r['path']):<{width}}   {t['median']:8.1f} ({t['spread']:6.1f})"
                     f"        {i['median']:8.1f} ({i['spread']:6.1f})")
    return "\n".join(lines)


def ratio_line(data: dict[str, Any], batch: int, path: str, reference: str, part: str = "batches") -> str:
    """One path's median over another's, with the range the spreads allow, and whether the range excludes 1."""
    try:
        rows = {r["path"]: r for r in path_rows(data, batch, part)}
    except ReferenceDataError as exc:
        return f"batch {batch}: not recorded: {shorten(str(exc), 200)}"
    a, b = rows[path]["us_per_token"], rows[reference]["us_per_token"]
    ratio, lo, hi = a["median"] / b["median"], a["min"] / b["max"], a["max"] / b["min"]
    verdict = ("faster" if hi < 1 else "slower" if lo > 1 else "no difference beyond the run-to-run spread")
    return (f"batch {batch}: {path_label(path)} / {path_label(reference)} = {ratio:.3f} "
            f"(range {lo:.3f}-{hi:.3f}): {verdict}")


PLOT_BARS = (("us_per_token", "kernel", "time per token (until the GPU finished)"),
             ("issue_us_per_token", "launch", "CPU time to issue it"))
"""The two bars of each path in :func:`plot_paths`: the figure, its palette kind, its legend label."""


def plot_paths(data: dict[str, Any], paths: Sequence[str] | None = None, title: str = "",
               part: str = "batches") -> Any:
    """Per batch size: median µs per token and CPU issue µs per token of each path, error bars = min..max.

    One linear x axis from 0, shared by the panels (the same µs is the same length side by side),
    each bar labelled with its median; colours and hatches from :mod:`graphcourse.lessons.palette`.
    """
    import matplotlib.pyplot as plt
    from matplotlib.ticker import AutoMinorLocator, MaxNLocator

    from .palette import color, hatch

    batches = [b["batch"] for b in section(part, data)]
    rows_of = {batch: [r for r in path_rows(data, batch, part) if paths is None or r["path"] in paths]
               for batch in batches}
    top = max((r[key]["max"] for rows in rows_of.values() for r in rows for key, _, _ in PLOT_BARS), default=1.0)
    same_rows = len({tuple(r["path"] for r in rows) for rows in rows_of.values()}) == 1
    fig, axes = plt.subplots(1, len(batches), figsize=(5 * len(batches) + 3, 0.5 * 12 + 1), squeeze=False,
                             sharex=True, sharey=same_rows, layout="constrained")
    for n, (ax, batch) in enumerate(zip(axes[0], batches)):
        rows = rows_of[batch]
        names = [path_label(r["path"]) for r in rows]
        ys = range(len(rows))
        for offset, (key, kind, label) in zip((-0.2, 0.2), PLOT_BARS):
            med = [r[key]["median"] for r in rows]
            err = [[m - r[key]["min"] for m, r in zip(med, rows)], [r[key]["max"] - m for m, r in zip(med, rows)]]
            bars = ax.barh([y + offset for y in ys], med, height=0.4, xerr=err, color=color(kind),
                           hatch=hatch(kind), edgecolor="white", label=label, capsize=2)
            for bar, r in zip(bars, rows):  # the median, just past the whisker
                ax.text(r[key]["max"] + top * 0.01, bar.get_y() + bar.get_height() / 2, f"{r[key]['median']:.1f}",
                        va="center", ha="left", fontsize=8)
        if n == 0 or not same_rows:  # shared rows: the names once, on the left
            ax.set_yticks(list(ys), names, fontsize=8)
            if n == 0:
                ax.invert_yaxis()
        else:
            ax.tick_params(axis="y", labelleft=False)
        if not same_rows and n > 0:
            ax.invert_yaxis()
        ax.set_xlim(0, top * 1.15)
        ax.xaxis.set_major_locator(MaxNLocator(nbins=8))
        ax.xaxis.set_minor_locator(AutoMinorLocator())
        ax.tick_params(axis="x", labelsize=8)
        ax.set_xlabel("µs per token (bars: median, whiskers: min..max over repeats)", fontsize=8)
        ax.set_title(f"batch {batch}", fontsize=10)
        ax.grid(True, axis="x", which="major", alpha=0.3)
    fig.legend(*axes[0][0].get_legend_handles_labels(), loc="outside lower center", ncol=2, fontsize=8,
               frameon=False)
    fig.suptitle(title or f"Decode paths of the tiny GPT, {recorded_label(data)}", fontsize=10)
    return fig


def demos_live_or_recorded(data: dict[str, Any] | None, key: str = "demos") -> tuple[dict[str, Any] | None, str]:
    """A child-process demo ('demos': lesson 07, 'conditional_demo': lesson 08): live on a CUDA GPU, else recorded.

    With GRAPHCOURSE_RECORDED_DEMOS=1 a GPU shows the recorded observations too, labelled as such: for
    re-executing the lessons right after the benchmark recorded them, without paying for the demos twice.
    """
    from .teaching import cuda_here

    if key not in ("demos", "conditional_demo"):
        raise ValueError(f"key must be 'demos' or 'conditional_demo', got {key!r}.")
    import os

    reuse = os.environ.get("GRAPHCOURSE_RECORDED_DEMOS") == "1" and data is not None and key in data
    if cuda_here() and not reuse:
        import torch

        if key == "demos":
            from ..gpulib.compiled import run_demos as run
        else:
            from ..gpulib.device_loop import run_conditional_demo as run
        name = torch.cuda.get_device_name(0)
        return run(), f"live on {name}, torch {torch.__version__}, in a child process"
    if data is None or key not in data:
        return None, "no CUDA GPU here and no recorded observations of this demo"
    # a demo recorded again on its own (`--sections demos`, merged into the file) carries its own provenance
    label = recorded_label({"provenance": data[f"{key}_provenance"]}) if f"{key}_provenance" in data \
        else recorded_label(data)
    if reuse:  # re-executing a lesson right after the benchmark: show what it just recorded, not a second run
        return data[key], f"{label}, in a child process (GRAPHCOURSE_RECORDED_DEMOS=1)"
    return data[key], f"no CUDA GPU here: {label}, in a child process there"


# --------------------------------------------------------------------------- K steps per launch on the toy timeline


def simulate_k_steps(kernels: int | Sequence[float], k: int, tokens: int, *, host_us_per_launch: float = 0.0,
                     cost: Any = None) -> Any:
    """The toy timeline of `tokens` decode steps, K per graph launch, each launch preceded by host work.

    One graph launch per K steps (``toygraph.timeline.Clock.replay`` of K steps' kernels), and
    `host_us_per_launch` of CPU work before each (a scheduler choosing what runs next).
    """
    from toygraph.errors import InvalidArgumentError
    from toygraph.timeline import Clock, _kernel_list

    for name, value in (("k (steps per graph)", k), ("tokens", tokens)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidArgumentError(f"{name} must be a whole number >= 1, got {value!r}.")
    if isinstance(host_us_per_launch, bool) or not isinstance(host_us_per_launch, (int, float)) \
            or host_us_per_launch < 0:
        raise InvalidArgumentError(f"host_us_per_launch must be a number of µs >= 0, got {host_us_per_launch!r}.")
    clock = Clock(cost)
    times = _kernel_list(kernels, clock.cost)
    done = 0
    while done < tokens:
        steps = min(k, tokens - done)
        if host_us_per_launch:
            clock.host(host_us_per_launch, "scheduler")
        clock.replay(f"{steps} steps", times * steps)
        clock.end_step()
        done += steps
    return clock.timeline


def k_step_costs(kernels: int | Sequence[float], ks: Sequence[int], tokens: int = 64, *,
                 host_us_per_launch: float = 0.0, cost: Any = None) -> list[dict[str, float]]:
    """For each K: µs per token, CPU busy µs per token, GPU busy µs per token and GPU busy share (toy timeline)."""
    rows = []
    for k in ks:
        t = simulate_k_steps(kernels, k, tokens, host_us_per_launch=host_us_per_launch, cost=cost)
        rows.append({"k": k, "us_per_token": t.total_us / tokens, "cpu_us_per_token": t.busy_us("cpu") / tokens,
                     "gpu_us_per_token": t.busy_us("gpu") / tokens, "gpu_busy": t.gpu_utilization})
    return rows


# --------------------------------------------------------------------------- lines the lessons print


def _all_rows(data: dict[str, Any], batch: int) -> dict[str, dict[str, Any]]:
    """Rows of one batch from every part recorded, the first part that has a path winning."""
    out: dict[str, dict[str, Any]] = {}
    for part in ("batches", "compiled_graphs"):
        for b in data.get(part) or []:
            if b["batch"] == batch:
                for r in b["rows"]:
                    out.setdefault(r["path"], {**r, "part": part})
    return out


PROCESS_OF_PART = {"batches": 1, "compiled_graphs": 2}
"""The benchmark ran its 'batches' part in its own process first, then 'compiled_graphs' in a child process it started."""


def compile_order(data: dict[str, Any]) -> dict[tuple[str, int, str], tuple[int, int]]:
    """(part, batch, path) -> (process, n): the n-th compile of that process, in the order the benchmark ran them.

    Each process ran its batch sizes in the order recorded, and at each batch built its paths in the order
    of their rows; a row with `compile_s` or `compile_and_capture_s` is a compile.
    """
    order: dict[tuple[str, int, str], tuple[int, int]] = {}
    for part, process in PROCESS_OF_PART.items():
        n = 0
        for b in data.get(part) or []:
            for r in b["rows"]:
                if "compile_s" in r or "compile_and_capture_s" in r:
                    n += 1
                    order[(part, b["batch"], r["path"])] = (process, n)
    return order


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def one_time_cost_lines(data: dict[str, Any]) -> str:
    """What each path cost before its first fast token: compile, record, capture, graph-pool memory.

    Each compile time is labelled with the process that ran it and how many compiles that process had run
    before it (:func:`compile_order`): a later compile may reuse what earlier ones left in the compiler's caches.
    """
    order = compile_order(data)

    def when(row: dict[str, Any], batch: int) -> str:
        process, n = order.get((row["part"], batch, row["path"]), (None, None))
        if process is None:
            return ""
        return f" [process {process}, its {_ordinal(n)} compile]"

    lines = []
    for batch in (1, 8):
        rows = _all_rows(data, batch)
        if not rows:
            lines.append(f"batch {batch}: not recorded")
            continue
        parts = []
        if "compiled_default" in rows:
            cd = rows["compiled_default"]
            parts.append(f"default mode compiled in {cd['compile_s']:.1f} s{when(cd, batch)}")
        if "reduce_overhead" in rows:
            ro = rows["reduce_overhead"]
            # Runs recorded before the benchmark read CUDAGraph Trees' pool from `cuda_graphs_thread_pool`
            # (it had looked under another attribute) hold no reserved_bytes for reduce-overhead.
            memory = (f", CUDAGraph Trees' pool {ro['reserved_bytes'] / 2**20:.0f} MiB" if "reserved_bytes" in ro
                      else ", its memory not measured in the recorded run")
            parts.append(f"reduce-overhead compiled and warmed up (first call) in {ro['compile_s']:.1f} s"
                         f"{when(ro, batch)}, recorded and replayed once (next two calls) in "
                         f"{ro['warmup_and_record_s'] * 1e3:.0f} ms{memory}")
        if "compiled_graph_k1" in rows:
            cg = rows["compiled_graph_k1"]
            parts.append(f"default-mode kernels compiled and captured by hand in "
                         f"{cg['compile_and_capture_s']:.1f} s{when(cg, batch)} "
                         f"(graph pool {cg['reserved_bytes'] / 2**20:.0f} MiB)")
        if "graph_k1" in rows:
            parts.append(f"eager step captured by hand in {rows['graph_k1']['capture_s'] * 1e3:.1f} ms "
                         f"(graph pool {rows['graph_k1']['reserved_bytes'] / 2**20:.0f} MiB)")
        lines.append(f"batch {batch}: " + "; ".join(parts))
    if any(_all_rows(data, batch) for batch in (1, 8)):
        lines.append("process 1 timed eager, default mode and reduce-overhead, batch 1 then batch 8; process 2, "
                     "started after it, the compiled kernels captured by hand, batch 1 then 8: a compile after "
                     "the 1st may reuse what earlier ones left in the compiler's caches")
        lines.append("each figure is ONE sample (no repeats, so no spread): read them as orders of magnitude")
    return "\n".join(lines)


def kernel_lines(data: dict[str, Any]) -> str:
    """Kernels per decode step and their GPU time, eager against compiled (the benchmark's profiler)."""
    lines = []
    for b in data.get("batches") or []:
        k = b.get("kernels") or {}
        if "eager" in k and "compiled_default" in k:
            lines.append(f"batch {b['batch']}: eager step {k['eager']['kernels_per_step']:.0f} kernels, "
                         f"{k['eager']['kernel_us_per_step']:.0f} µs of GPU time; compiled step "
                         f"{k['compiled_default']['kernels_per_step']:.0f} kernels, "
                         f"{k['compiled_default']['kernel_us_per_step']:.0f} µs")
    if not lines:
        why = data.get("batches_error", "no 'batches' section")
        lines.append(f"kernel counts not recorded: {shorten(why.splitlines()[0], 160)}")
    return "\n".join(lines)


def decode_step_profile() -> dict[str, float] | None:
    """Lesson 05's decode step at batch 1 from data/gpu_reference.json: kernels, their GPU time, eager step time."""
    from .reference import load_reference

    try:
        rows = load_reference()["decode"]["rows"]
        b1 = next(r for r in rows if r["batch"] == 1)
        return {"kernels": float(b1["kernels"]), "kernel_time_us": float(b1["kernel_time_us"]),
                "eager_step_us": float(b1["eager_step_us"])}
    except (ReferenceDataError, KeyError, StopIteration, TypeError, ValueError):
        return None


def static_skip_lines(data: dict[str, Any]) -> str:
    """The benchmark's own reduce-overhead step, cache and state marked static: how many graphs it skipped."""
    lines = []
    where = {"batches": "first process", "compiled_graphs": "second process"}
    for part in ("batches", "compiled_graphs"):
        for b in data.get(part) or []:
            for r in b["rows"]:
                if r["path"] == "reduce_overhead":
                    lines.append(f"the benchmark's reduce-overhead step ({where[part]}), batch {b['batch']}, "
                                 f"mark_static_address on cache and state: skips={r['cudagraph_skips']}")
    return "\n".join(lines) or "not recorded"


def unrecorded_lines(data: dict[str, Any]) -> str:
    """What the recorded file does not hold (yet), each with the reason it gives; what it holds, in one line."""
    def why(key: str) -> str:
        return shorten((data.get(key + "_error") or f"no '{key}' section").splitlines()[0], 160)

    held, missing = [], []
    if data.get("batches"):
        held.append("eager, default mode and eager kernels at K = 1, 4, 16, 32 steps per graph, checked against eager")
        if not any((b.get("kernels") or {}) for b in data["batches"]):
            missing.append("kernel counts per step: not recorded")
    else:
        missing.append(f"eager, default mode, eager kernels at K = 1, 4, 16, 32 steps per graph, kernel counts and "
                       f"the check of the graphed paths' tokens against eager's: not recorded ({why('batches')})")
    if data.get("compiled_graphs"):
        held.append("compiled kernels captured 1 and 16 steps per graph by hand, one graph per step, reduce-overhead")
    else:
        missing.append(f"the compiled kernels captured by hand: not recorded ({why('compiled_graphs')})")
    ro = [r for r in _all_rows(data, 1).values() if r["path"] == "reduce_overhead"]
    if not any("reserved_bytes" in r for r in ro):
        missing.append("reduce-overhead's graph memory: not measured in the recorded run")
    if data.get("traces"):
        held.append("real profiler traces of two decode steps at batch 1")
    else:
        missing.append(f"the real profiler traces (lesson 07): not recorded ({why('traces')})")
    node = data.get("if_node") or {}
    if not node.get("supported"):
        missing.append(f"IF-node replay figures: not recorded ({node.get('reason') or why('if_node')})")
    missing.append("torch.compile mode max-autotune-no-cudagraphs: not timed by design (default mode's kernels "
                   "captured by hand stand in for it)")
    lines = ["recorded: " + ("; ".join(held) or "nothing")] + ["- " + m for m in missing]
    return "\n".join(lines)


# --------------------------------------------------------------------------- sentences built from the data


def _ratio(a: dict[str, float], b: dict[str, float]) -> str:
    """'x0.88 (range 0.88-0.88), shorter' for two {median, min, max} figures; 'no change ...' when the range holds 1."""
    ratio, lo, hi = a["median"] / b["median"], a["min"] / b["max"], a["max"] / b["min"]
    verdict = "shorter" if hi < 1 else "longer" if lo > 1 else "no change beyond the spread"
    return f"x{ratio:.2f} (range {lo:.2f}-{hi:.2f}), {verdict}"


def _bars(new: dict[str, Any], old: dict[str, Any]) -> str:
    return (f"time per token {_ratio(new['us_per_token'], old['us_per_token'])}; CPU time to issue it "
            f"{_ratio(new['issue_us_per_token'], old['issue_us_per_token'])}")


def bar_effect_lines(data: dict[str, Any]) -> str:
    """What compiling and graphs did to each bar of the path plot, per batch, from the recorded file only.

    With eager and default mode recorded: compiled kernels alone (default mode against eager, no graphs
    on either side) and graphs alone (one graph per step against eager). Without them, the lines say
    so and why, then give the two comparisons the file does hold: compiled kernels with graphs on both sides
    (compiled kernels against eager kernels, each one step per graph) and who manages the graph
    (reduce-overhead against the compiled kernels captured by hand).
    """
    lines = []
    for batch in (1, 8):
        core = {r["path"]: r for b in data.get("batches") or [] if b["batch"] == batch for r in b["rows"]}
        done = False
        if {"eager", "compiled_default"} <= set(core):
            lines.append(f"batch {batch}, compiled kernels without graphs (default mode / eager): "
                         f"{_bars(core['compiled_default'], core['eager'])}")
            done = True
        if {"eager", "graph_k1"} <= set(core):
            lines.append(f"batch {batch}, graphs without compiling (one graph per step / eager): "
                         f"{_bars(core['graph_k1'], core['eager'])}")
            done = True
        if done:
            continue
        why = shorten((data.get("batches_error") or "no 'batches' section").splitlines()[0], 160)
        lines.append(f"batch {batch}: eager and default mode not recorded ({why}), so compiling alone and graphs "
                     f"alone cannot be read off this file yet; what it holds:")
        comp = {r["path"]: r for b in data.get("compiled_graphs") or [] if b["batch"] == batch for r in b["rows"]}
        if {"compiled_graph_k1", "graph_k1"} <= set(comp):
            lines.append(f"  compiled kernels, graphs on both sides (compiled kernels / eager kernels, 1 step per graph): "
                         f"{_bars(comp['compiled_graph_k1'], comp['graph_k1'])}")
        if {"reduce_overhead", "compiled_graph_k1"} <= set(comp):
            lines.append(f"  who manages the graph (reduce-overhead / the same kernels captured by hand): "
                         f"{_bars(comp['reduce_overhead'], comp['compiled_graph_k1'])}")
        if not comp:
            lines.append("  nothing: the compiled kernels captured by hand are not recorded either")
    return "\n".join(lines)


def cond_capture_line(features: dict[str, Any] | None, where: str) -> str:
    """Whether the torch described by `features` (device_loop.torch_features) can capture torch.cond into IF nodes."""
    if not features:
        return f"{where}: features not recorded"
    nodes = features.get("cudagraph_conditional_nodes") or []
    if_method = features.get("CUDAGraph.begin_capture_to_if_node")
    head = f"{where}, torch {features.get('torch', '?')}: "
    if "if_else_node" in nodes:
        return (head + "has torch._higher_order_ops.cudagraph_conditional_nodes: on a CUDA GPU, torch.cond can "
                "be captured into IF nodes (outside Inductor: backend='cudagraphs' or 'eager'; under "
                "reduce-overhead it stays a host-side if, a sync)")
    extra = "; it does have CUDAGraph.begin_capture_to_if_node (an IF node by hand)" if if_method else ""
    return (head + "no cudagraph_conditional_nodes module: torch.cond is NOT captured into a conditional node "
            f"(it decides on the host, a sync, which a capture refuses){extra}")
