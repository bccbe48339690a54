"""What lesson 13's cells call: the recorded floors, one replay's kernels and the levers, read into lines and plots.

``data/floors.json`` (``python -m graphcourse.gpulib.bench_floors``, on the H200) holds the device's
measured bandwidths and fp32 throughput, the kernels of one graph replay per path and batch, and the
per-token time of each lever. Every sentence the lesson prints about a figure is made here from the
data; a difference between two paths whose ranges over the repeats overlap is said to be no effect.
"""

from __future__ import annotations

from typing import Any

from ..core.paths import DATA_DIR
from ..core.recorded import provenance_label, recorded_or_why
from ..errors import ReferenceDataError
from .palette import OKABE_ITO, color

__all__ = ["PATHS", "recorded", "toy_twin", "gaps_before", "pdl_lines", "label", "kind_of", "budget_lines", "anatomy_lines", "plot_anatomy",
           "lever_lines", "lever_story", "plot_levers", "target_lines", "try_answer"]

PATHS = {  # the paths in the order the lesson shows them, with what each is
    "eager": "eager (no graph)",
    "reduce_overhead": "torch.compile reduce-overhead",
    "graph_k1": "plain graph (PyTorch's kernels)",
    "compiled_graph_k1": "compiled kernels in a hand graph",
    "fused_mlp_graph_k1": "graph, MLP as 2 Triton kernels",
    "fused_mlp_pdl_graph_k1": "graph, MLP kernels with PDL",
    "fused_attention_graph_k1": "graph, attention as 1 Triton kernel",
    "fused_both_graph_k1": "graph, attention and MLP in Triton",
    "fused_both_pdl_graph_k1": "graph, both, MLP kernels with PDL",
}
KINDS = (  # a kernel's name (as the profiler gives it, cut at 48 characters) -> what it does, first match wins
    ("triton_", "compiled (Triton)"), ("fmha", "attention (PyTorch, fp32)"), ("attend", "attention (Triton)"),
    ("ln_fc1_gelu", "MLP part 1 (Triton)"), ("fc2_residual", "MLP part 2 (Triton)"),
    ("(anonymous namespace)::vectoriz", "layer norm"),  # vectorized_layer_norm_kernel, its name cut
    ("layer_norm", "layer norm"), ("indexSel", "embedding lookup"), ("internal::g", "matrix-vector (cuBLAS)"),
    ("gemm", "matrix multiply (cuBLAS)"), ("splitKreduce", "matrix multiply (cuBLAS)"),
    ("index", "index / cache write"), ("reduce_kernel", "argmax"), ("Memcpy", "copy"), ("memcpy", "copy"),
    ("Memset", "copy"), ("elementwise", "elementwise"),
)
SHADES = {  # kind -> (colour, hatch): eight Okabe-Ito colours, hatches where two kinds share one
    "attention (PyTorch, fp32)": (OKABE_ITO["vermillion"], ""), "attention (Triton)": (OKABE_ITO["bluish_green"], ""),
    "MLP part 1 (Triton)": (OKABE_ITO["sky_blue"], ""), "MLP part 2 (Triton)": (OKABE_ITO["sky_blue"], "////"),
    "matrix-vector (cuBLAS)": (OKABE_ITO["blue"], ""), "matrix multiply (cuBLAS)": (OKABE_ITO["blue"], "////"),
    "elementwise": (OKABE_ITO["orange"], ""), "layer norm": (OKABE_ITO["yellow"], ""),
    "index / cache write": (OKABE_ITO["reddish_purple"], ""), "compiled (Triton)": (OKABE_ITO["bluish_green"], "////"),
    "embedding lookup": (OKABE_ITO["grey"], ""), "argmax": (OKABE_ITO["black"], ""), "copy": (OKABE_ITO["grey"], "xxx"),
}


def recorded(path: Any = None) -> tuple[dict[str, Any] | None, str]:
    """``(data, label)`` of ``data/floors.json``, or ``(None, why not)``."""
    return recorded_or_why(path or DATA_DIR / "floors.json", "python -m graphcourse.gpulib.bench_floors", label)


def label(data: dict[str, Any]) -> str:
    return provenance_label(data, f"Triton {data['provenance'].get('triton', {}).get('triton')}")


def kind_of(name: str) -> str:
    """What a kernel does, from its profiler name ('vectorized_layer_norm_kernel' -> 'layer norm')."""
    for key, kind in KINDS:
        if key in name:
            return kind
    return "other"


def _span(s: dict[str, float], digits: int = 1) -> str:
    return f"{s['median']:.{digits}f} µs [{s['min']:.{digits}f}-{s['max']:.{digits}f}]"


def _batch(data: dict[str, Any], section: str, batch: int) -> dict[str, Any]:
    for b in data.get(section) or []:
        if b["batch"] == batch:
            return b
    raise ReferenceDataError(f"data/floors.json has no {section} at batch {batch}: re-run bench_floors on a GPU.")


def budget_lines(data: dict[str, Any], batch: int) -> str:
    """What the step must move and compute at `batch`, the floors that gives, and the plain graph's replay."""
    from ..gpulib.bench_floors import floors_us

    b = _batch(data, "anatomy", batch)
    budget, dev = b["budget"], data["device"]
    f = floors_us(budget, dev)
    plain = b["paths"]["graph_k1"]
    return "\n".join([
        f"batch {batch}: the step reads {budget['weight_bytes'] / 1e6:.1f} MB of weights and "
        f"{budget['kv_bytes'] / 1e6:.1f} MB of KV cache, and does {budget['flops'] / 1e6:.1f} MFLOP",
        f"  HBM   {dev['hbm_gbps']['median']:7.0f} GB/s measured -> floor {f['hbm_us']:6.2f} µs per step",
        f"  L2    {dev['l2_gbps']['median']:7.0f} GB/s measured (copies: a lower bound) -> floor {f['l2_us']:6.2f} µs "
        f"per step, if every byte were already in L2",
        f"  fp32  {dev['fp32_tflops']['median']:7.1f} TFLOP/s measured -> floor {f['flops_us']:6.2f} µs per step",
        f"  one replay of the plain graph: {_span(plain['span_us'])}, {plain['kernels_per_replay']} kernels: "
        f"{plain['span_us']['median'] / f['hbm_us']:.0f}x the HBM floor"])


def _kinds(kernels: list[list[Any]]) -> dict[str, tuple[int, float]]:
    out: dict[str, tuple[int, float]] = {}
    for name, _start, dur in kernels:
        n, total = out.get(kind_of(name), (0, 0.0))
        out[kind_of(name)] = (n + 1, total + dur)
    return dict(sorted(out.items(), key=lambda kv: -kv[1][1]))


def anatomy_lines(data: dict[str, Any], batch: int, path: str = "graph_k1") -> str:
    """One replay of `path` at `batch`: span, kernel time, gaps, and the kernels by kind, longest first."""
    a = _batch(data, "anatomy", batch)["paths"][path]
    if "error" in a:
        return f"{path} at batch {batch}: not recorded ({a['error']})"
    lines = [f"{PATHS.get(path, path)}, batch {batch}: one replay {_span(a['span_us'])}: "
             f"{a['kernels_per_replay']} kernels busy {_span(a['kernel_us'])}, gaps between them "
             f"{_span(a['gap_us'])}; the median kernel {a['median_kernel_us']:.1f} µs"]
    for kind, (n, total) in _kinds(a["last_replay"]).items():
        lines.append(f"  {kind:<26} {n:3d} kernels {total:7.1f} µs ({total / n:5.1f} µs each)")
    return "\n".join(lines)


def gaps_before(data: dict[str, Any], batch: int, path: str) -> dict[str, float]:
    """Mean gap (µs) before the kernels of each kind in one recorded replay: the idle time that ends at them."""
    kernels = _batch(data, "anatomy", batch)["paths"][path]["last_replay"]
    gaps: dict[str, list[float]] = {}
    for (_, s0, d0), (name, s1, _) in zip(kernels, kernels[1:]):
        gaps.setdefault(kind_of(name), []).append(s1 - (s0 + d0))
    return {k: sum(v) / len(v) for k, v in gaps.items()}


def pdl_lines(data: dict[str, Any]) -> str:
    """What PDL changed, per batch: the gap before each MLP kernel with and without it, and the time per token."""
    out = []
    for batch in [b["batch"] for b in data.get("anatomy") or []]:
        plain = gaps_before(data, batch, "fused_both_graph_k1")
        pdl = gaps_before(data, batch, "fused_both_pdl_graph_k1")
        rows = _rows(data, batch)
        saved, real = _bought(rows, "fused_both_graph_k1", "fused_both_pdl_graph_k1")
        parts = [f"before {k}: {plain[k]:.2f} -> {pdl[k]:.2f} µs" for k in ("MLP part 1 (Triton)",
                                                                           "MLP part 2 (Triton)")]
        verdict = (f"{abs(saved):.1f} µs per token {'saved' if saved > 0 else 'slower'}"
                   + ("" if real else " (ranges overlap: no effect to claim)"))
        out.append(f"batch {batch}: mean gap {'; '.join(parts)}; {verdict}")
    return "\n".join(out)


def plot_anatomy(data: dict[str, Any], batch: int, paths: tuple[str, ...] = ("graph_k1", "fused_both_graph_k1")) -> Any:
    """One replay per path as a GPU timeline: a bar per kernel, coloured by what it does; white is a gap."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    fig, ax = plt.subplots(figsize=(10, 2.4 + 0.6 * len(paths)))
    seen: dict[str, tuple[str, str]] = {}
    for row, path in enumerate(reversed(paths)):
        a = _batch(data, "anatomy", batch)["paths"][path]
        for name, start, dur in a.get("last_replay", []):
            kind = kind_of(name)
            shade, hatch = seen.setdefault(kind, SHADES.get(kind, (OKABE_ITO["grey"], "...")))
            ax.broken_barh([(start, dur)], (row - 0.35, 0.7), facecolors=shade, edgecolor="white", linewidth=0.4,
                           hatch=hatch)
    ax.set_yticks(range(len(paths)), [PATHS.get(p, p) for p in reversed(paths)])
    ax.set_xlabel("µs from the replay's first kernel (the gaps between kernels are too thin to see here)")
    ax.set_title(f"One graph replay of the tiny GPT's decode step on the GPU, batch {batch}")
    fig.legend(handles=[Patch(facecolor=c, hatch=h, edgecolor="white", label=k) for k, (c, h) in seen.items()],
               fontsize=8, ncol=5,
               loc="lower center", frameon=False)
    fig.tight_layout(rect=(0, 0.22, 1, 1))
    return fig


def _rows(data: dict[str, Any], batch: int) -> dict[str, dict[str, Any]]:
    return {r["path"]: r for r in _batch(data, "levers", batch)["rows"]}


def lever_lines(data: dict[str, Any], batch: int) -> str:
    """µs per token of every path at `batch` (median [min-max]), its ratio to reduce-overhead, tokens equal."""
    rows = _rows(data, batch)
    ref = rows["reduce_overhead"]["us_per_token"]["median"]
    b = _batch(data, "levers", batch)
    out = [f"batch {batch} ({b['tokens']} tokens x {b['repeats']} repeats), µs per token:"]
    for path, title in PATHS.items():
        if path in rows:
            r = rows[path]
            out.append(f"  {title:<36} {_span(r['us_per_token'])}  {r['us_per_token']['median'] / ref:5.2f}x "
                       f"reduce-overhead  tokens equal to eager: {r['tokens_equal_to_eager']:.0%}")
    return "\n".join(out)


def _bought(rows: dict[str, Any], before: str, after: str) -> tuple[float, bool]:
    """µs per token saved going from `before` to `after`, and whether their min-max ranges do not overlap."""
    a, b = rows[before]["us_per_token"], rows[after]["us_per_token"]
    return a["median"] - b["median"], b["max"] < a["min"] or b["min"] > a["max"]


def lever_story(data: dict[str, Any], batch: int) -> str:
    """Which lever bought what at `batch`, each step read from the data (no effect when within the spreads)."""
    rows = _rows(data, batch)
    steps = [("graph_k1", "compiled_graph_k1", "torch.compile's kernels instead of PyTorch's"),
             ("graph_k1", "fused_attention_graph_k1", "the attention as one Triton kernel"),
             ("fused_attention_graph_k1", "fused_both_graph_k1", "then the MLP as two Triton kernels"),
             ("fused_both_graph_k1", "fused_both_pdl_graph_k1", "then programmatic dependent launch")]
    out = []
    for before, after, what in steps:
        if before not in rows or after not in rows:
            continue
        saved, real = _bought(rows, before, after)
        if not real:
            out.append(f"- {what}: {abs(saved):.1f} µs per token {'saved' if saved > 0 else 'slower'}, but the two "
                       f"paths' ranges over the repeats overlap: no effect to claim.")
        else:
            out.append(f"- {what}: {abs(saved):.1f} µs per token {'saved' if saved > 0 else 'slower'} "
                       f"({rows[before]['us_per_token']['median']:.1f} -> {rows[after]['us_per_token']['median']:.1f}).")
    return "\n".join(out)


def target_lines(data: dict[str, Any]) -> str:
    """The course's target (best path with eager's tokens at or below 0.5x reduce-overhead), met or missed."""
    out = []
    for key, t in sorted(data.get("targets", {}).items()):
        lo, hi = t["ratio_range"]
        verdict = ("met" if hi <= t["max"] else "met at the median, but the range crosses it" if t["met"]
                   else "missed at the median" + (", though the range reaches it" if lo <= t["max"] else ""))
        out.append(f"{key.replace('_', ' ')}: {PATHS.get(t['best_path'], t['best_path'])} at "
                   f"{t['ratio_to_reduce_overhead']:.2f}x reduce-overhead (range {lo:.2f}-{hi:.2f}); target "
                   f"<= {t['max']}x: {verdict}")
    return "\n".join(out)


def plot_levers(data: dict[str, Any]) -> Any:
    """µs per token of every path, batch 1 and 8 side by side, medians with min-max whiskers."""
    import matplotlib.pyplot as plt

    batches = [b["batch"] for b in data.get("levers") or []]
    fig, axes = plt.subplots(1, len(batches), figsize=(11, 4.6), sharey=True, sharex=True)
    for ax, batch in zip(axes if len(batches) > 1 else [axes], batches):
        rows = _rows(data, batch)
        names = [p for p in PATHS if p in rows and p != "eager"]
        med = [rows[p]["us_per_token"]["median"] for p in names]
        err = [[m - rows[p]["us_per_token"]["min"] for p, m in zip(names, med)],
               [rows[p]["us_per_token"]["max"] - m for p, m in zip(names, med)]]
        shades = [color("graph_launch") if p.startswith("fused") else color("launch") if p == "reduce_overhead"
                  else color("kernel") for p in names]
        ax.barh(range(len(names)), med, xerr=err, color=shades, capsize=3)
        ax.set_yticks(range(len(names)), [PATHS[p] for p in names])
        ax.invert_yaxis()
        ax.set_title(f"batch {batch}")
        ax.set_xlabel("µs per token (median, whiskers min-max)")
        for i, m in enumerate(med):
            ax.text(m, i, f" {m:.0f}", va="center", fontsize=8)
    from matplotlib.patches import Patch

    fig.suptitle("Decode step, one graph per step: fewer kernels per replay, less time per token "
                 "(eager, about 1 ms, left out)")
    fig.legend(handles=[Patch(color=color("launch"), label="torch.compile reduce-overhead (CUDAGraph Trees)"),
                        Patch(color=color("kernel"), label="hand-captured graph, PyTorch's or the compiler's kernels"),
                        Patch(color=color("graph_launch"), label="hand-captured graph with the course's Triton kernels")],
               loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return fig


def toy_twin(data: dict[str, Any], batch: int, path: str = "graph_k1") -> tuple[Any, float, float]:
    """The toy's timeline of one replay with the recorded kernels' durations and their mean gap.

    Returns ``(timeline, gap_us, recorded_span_us)``: the toy runs the recorded kernels back to
    back with ``node_gap_us`` set to the replay's mean gap, so its step time can be set beside
    the recorded span.
    """
    from toygraph.timeline import CostModel, simulate

    a = _batch(data, "anatomy", batch)["paths"][path]
    kernels = a["last_replay"]
    durations = [k[2] for k in kernels]
    span = kernels[-1][1] + kernels[-1][2] - kernels[0][1]
    gap = max(0.0, (span - sum(durations)) / max(1, len(durations) - 1))
    return simulate(durations, mode="graph", cost=CostModel().with_(node_gap_us=gap)), gap, span


def try_answer(item: str) -> str | None:
    """The computed answer to one of lesson 13's "Things to try" items, or None for an item it does not know."""
    data, _ = recorded()
    if data is None:
        return None
    if "reduce-overhead" in item and "batch 1" in item:
        r1, r8 = _rows(data, 1), _rows(data, 8)
        c1 = _batch(data, "anatomy", 1)["paths"]["compiled_graph_k1"]
        p1 = _batch(data, "anatomy", 1)["paths"]["graph_k1"]
        c8 = _kinds(_batch(data, "anatomy", 8)["paths"]["compiled_graph_k1"]["last_replay"])
        mm = c8.get("matrix multiply (cuBLAS)", (0, 0.0))
        med = lambda rows, p: rows[p]["us_per_token"]["median"]  # noqa: E731
        return (f"Batch 1: reduce-overhead {med(r1, 'reduce_overhead'):.1f} µs per token, the plain graph "
                f"{med(r1, 'graph_k1'):.1f}: the compiled kernels are shorter (one replay of them: "
                f"{c1['kernel_us']['median']:.1f} µs of kernels against {p1['kernel_us']['median']:.1f}). Batch 8: "
                f"reduce-overhead {med(r8, 'reduce_overhead'):.1f}, the plain graph {med(r8, 'graph_k1'):.1f}: "
                f"the compiled replay spends {mm[1]:.1f} µs in {mm[0]} cuBLAS matrix-multiply kernels.")
    if "HBM floor" in item and "batch 8" in item:
        from ..gpulib.bench_floors import floors_us

        b = _batch(data, "anatomy", 8)
        f = floors_us(b["budget"], data["device"])
        best = b["paths"]["fused_both_graph_k1"]["span_us"]["median"]
        return (f"At batch 8 the step must read {b['budget']['bytes'] / 1e6:.1f} MB: an HBM floor of "
                f"{f['hbm_us']:.2f} µs; the fused graph's replay takes {best:.1f} µs, {best / f['hbm_us']:.0f}x it.")
    if "anatomy" in item and "batch 8" in item:
        a = _batch(data, "anatomy", 8)["paths"]["graph_k1"]
        kinds = _kinds(a["last_replay"])
        top, (n, total) = next(iter(kinds.items()))
        return (f"At batch 8 one replay of the plain graph has {a['kernels_per_replay']} kernels over "
                f"{a['span_us']['median']:.1f} µs; the longest kind is still {top}: {n} kernels, {total:.1f} µs.")
    if "node_gap_us" in item:
        from toygraph.timeline import CostModel, simulate

        tl = simulate([8.0] * 2, mode="graph", steps=2, cost=CostModel().with_(node_gap_us=1.0))
        gpu = [e for e in tl.lane("gpu") if e.step == 1]
        span = gpu[-1].end_us - gpu[0].start_us
        busy = sum(e.duration_us for e in gpu)
        return (f"Two kernels of 8 µs with a 1.0 µs gap: a replay's kernels span {span:.1f} µs, of which "
                f"{span - busy:.1f} µs ({(span - busy) / span:.0%}) is the gap; the step takes "
                f"{tl.step_times_us[-1]:.1f} µs with the graph launch.")
    return None
