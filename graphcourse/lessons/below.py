"""What lesson 12's cells call: the recorded runs of the CUDA graph API below PyTorch, read into lines and a plot.

``data/below_torch.json`` (``python -m graphcourse.gpulib.below_torch``) holds one small graph built
three ways, the cost of changing a graph, and the first launch with and without upload;
``data/while_node.json`` (``python -m graphcourse.gpulib.while_node``) holds the WHILE-node decode.
Every sentence the lesson prints about a figure is made here from the data.
"""

from __future__ import annotations

import re
from typing import Any

from ..core.paths import DATA_DIR
from ..core.recorded import load_recorded
from ..errors import ReferenceDataError, ReferenceDataMissingError

__all__ = ["recorded", "label", "ways_lines", "update_lines", "update_summary", "plot_update", "upload_lines",
           "while_lines", "PATHS"]

PATHS = {  # the ways of changing a graph's scalar, in the order the lesson shows them
    "device_scalar": "device tensor (fill_), same graph",
    "update": "update in place (Graph.update)",
    "reinstantiate": "capture + instantiate again",
    "torch_recapture": "torch.cuda.graph capture again",
}


def recorded(name: str, path: Any = None) -> tuple[dict[str, Any] | None, str]:
    """``(data, label)`` of ``data/<name>.json``, or ``(None, why not)``."""
    file = path or DATA_DIR / f"{name}.json"
    try:
        data = load_recorded(file, f"python -m graphcourse.gpulib.{name}")
    except (ReferenceDataError, ReferenceDataMissingError) as exc:
        return None, f"not recorded yet: {exc}"
    return data, label(data)


def label(data: dict[str, Any]) -> str:
    p = data["provenance"]
    return (f"recorded on {p.get('gpu_name')}, {str(p.get('date_utc'))[:10]}, torch {p.get('torch')}, "
            f"cuda-core {p.get('cuda_core')}, driver {p.get('driver')} (`{p.get('command')}`)")


def _span(s: dict[str, float], unit: str = "µs", digits: int = 1) -> str:
    return f"{s['median']:.{digits}f} {unit} [{s['min']:.{digits}f}-{s['max']:.{digits}f}]"


def ways_lines(ways: dict[str, Any] | None) -> str:
    """One line per way of building the graph: nodes, edges, what they are, right or not."""
    if not ways or "error" in ways:
        return f"not recorded: {ways}"
    names = {"torch_capture": "torch.cuda.graph (stream capture)", "cuda_core_capture":
             "cuda.core GraphBuilder (stream capture)", "explicit_nodes": "cuda.core GraphDefinition (explicit)"}
    out = []
    for key, title in names.items():
        w = ways[key]
        names = re.findall(r'label="\d+\n(\w+)\n"', w.get("dot", ""))  # cuda.core's plain DOT: id, then name
        kinds = " -> ".join(names) if names else ", ".join(f"{v} {k}" for k, v in sorted(w["kinds"].items()))
        out.append(f"{title:<40} {w['nodes']} nodes, {w['edges']} edges ({kinds}); "
                   f"result {'matches' if w['right'] else 'DIFFERS FROM'} torch's eager relu(a*x+b)")
    return "\n".join(out)


def update_lines(update: dict[str, Any] | None) -> str:
    """µs per change of one scalar, each way, median [min-max] over repeats."""
    if not update or "error" in update:
        return f"not recorded: {update}"
    u = update["us_per_change"]
    rows = [f"{PATHS[k]:<36} {_span(u[k])}" for k in PATHS]
    return "\n".join([f"µs per change of a, then one launch; median [min-max] over {update['repeats']} repeats "
                      f"of {update['changes_per_repeat']} changes:"] + rows)


def update_summary(update: dict[str, Any] | None) -> str:
    """The sentences that read the figures: each ratio, and whether the ranges overlap."""
    if not update or "error" in update:
        return ""
    u = update["us_per_change"]

    def compare(a: str, b: str) -> str:
        apart = u[a]["max"] < u[b]["min"]
        ratio = u[b]["median"] / u[a]["median"]
        return (f"{PATHS[a]} is {ratio:.1f}x as fast as {PATHS[b]}"
                + ("" if apart else " (their ranges overlap: not a clear difference)"))
    return "\n".join([compare("update", "reinstantiate") + ";", compare("update", "torch_recapture") + ";",
                      compare("device_scalar", "update") + "."])


def plot_update(update: dict[str, Any] | None) -> Any:
    """Bars of µs per change, with the min-max range as error bars (log scale: the ways differ 30x)."""
    import matplotlib.pyplot as plt

    from .palette import COLORS

    fig, ax = plt.subplots(figsize=(8, 2.8))
    if not update or "error" in update:
        ax.text(0.5, 0.5, "not recorded yet", ha="center", va="center")
        return fig
    u = update["us_per_change"]
    keys = list(PATHS)
    med = [u[k]["median"] for k in keys]
    err = [[u[k]["median"] - u[k]["min"] for k in keys], [u[k]["max"] - u[k]["median"] for k in keys]]
    colors = list(COLORS.values())
    ax.barh([PATHS[k] for k in keys], med, xerr=err, color=[colors[i % len(colors)] for i in range(len(keys))],
            hatch="//", edgecolor="black", capsize=4)
    ax.set_xscale("log")
    ax.set_xlabel("µs per change (median; bars: min-max over repeats)")
    ax.invert_yaxis()
    for i, m in enumerate(med):
        ax.text(m * 1.1, i, f"{m:.0f}", va="center")
    fig.tight_layout()
    return fig


def upload_lines(first: dict[str, Any] | None) -> str:
    if not first or "error" in first:
        return f"not recorded: {first}"
    apart = first["uploaded_us"]["max"] < first["plain_us"]["min"]
    return "\n".join([
        f"first launch, to completion, of a new executable graph (median [min-max], {first['repeats']} repeats):",
        f"  instantiated, not uploaded   {_span(first['plain_us'])}",
        f"  uploaded at instantiation    {_span(first['uploaded_us'])}",
        f"uploading first saves {first['plain_us']['median'] - first['uploaded_us']['median']:.1f} µs of the first "
        f"launch" + ("" if apart else " (ranges overlap: not a clear difference)")])


def while_lines(data: dict[str, Any] | None) -> str:
    """Each recorded WHILE-node run: steps, same tokens, and the three ways' times."""
    if not data or "runs" not in data:
        return f"not recorded: {data}"
    out = []
    for r in data["runs"]:
        out.append(f"batch {r['batch']}: the sequences emit end-of-sequence (token {r['eos_id']}) at steps "
                   f"{r['first_eos_per_sequence']}; limit {r['max_new']} steps")
        out.append(f"  WHILE node, one launch          {r['while_steps']:>3} steps  {_span(r['while_ms'], 'ms', 3)}")
        out.append(f"  host loop, a sync per step      {r['host_steps']:>3} steps  {_span(r['host_ms'], 'ms', 3)}")
        out.append(f"  {r['k']} steps per launch (lesson 08)  {r['k_steps']:>3} steps  {_span(r['k_ms'], 'ms', 3)}")
        out.append(f"  same tokens as the host loop: {r['same_tokens']}")
    return "\n".join(out)
