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
from ..core.recorded import provenance_label, recorded_or_why

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
    return recorded_or_why(path or DATA_DIR / f"{name}.json", f"python -m graphcourse.gpulib.{name}", label)


def label(data: dict[str, Any]) -> str:
    return provenance_label(data, f"cuda-core {data['provenance'].get('cuda_core')}")


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
    inst = u["reinstantiate"]["median"] - u["update"]["median"]
    return "\n".join([compare("update", "reinstantiate") + ";", compare("update", "torch_recapture") + ";",
                      compare("device_scalar", "update") + ".",
                      f"Instantiating again (and destroying the old executable graph) costs about {inst:.0f} µs per "
                      f"change more than an update "
                      f"({u['reinstantiate']['median']:.1f} - {u['update']['median']:.1f})."])


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
    ax.set_xlabel("µs per change, log scale (median; error bars: min-max over repeats)")
    ax.xaxis.set_minor_formatter(plt.NullFormatter())
    ax.set_title("Changing one scalar of a graph, recorded on the H200", fontsize=10)
    ax.invert_yaxis()
    for i, k in enumerate(keys):
        ax.text(u[k]["max"] * 1.15, i, f"{med[i]:.0f} µs", va="center")
    ax.set_xlim(right=max(u[k]["max"] for k in keys) * 3)
    fig.tight_layout()
    return fig


def upload_lines(first: dict[str, Any] | None) -> str:
    if not first or "error" in first:
        return f"not recorded: {first}"
    apart = first["uploaded_us"]["max"] < first["plain_us"]["min"]
    return "\n".join([
        f"first launch of a new executable graph, until the GPU has finished it (median [min-max], "
        f"{first['repeats']} repeats):",
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
                   f"{r['first_eos_per_sequence']} (counted from 0); limit {r['max_new']} steps; one whole "
                   f"decode, median [min-max] over {r['repeats']} repeats")
        out.append(f"  WHILE node, one launch          {r['while_steps']:>3} steps  {_span(r['while_ms'], 'ms', 3)}")
        out.append(f"  host loop, a sync per step      {r['host_steps']:>3} steps  {_span(r['host_ms'], 'ms', 3)}")
        out.append(f"  {r['k']} steps per launch (lesson 08)  {r['k_steps']:>3} steps  {_span(r['k_ms'], 'ms', 3)}")
        out.append(f"  same tokens as the host loop: {r['same_tokens']}")
    return "\n".join(out)


def try_answer(item: str) -> str | None:
    """The computed answer to one of lesson 12's "Things to try" items, or None for an item it does not know."""
    import toygraph as tg

    if "different kernel" in item:
        dev = tg.ToyDevice()
        x = dev.tensor([-1.0, 0.5, 2.0], name="x")

        def capture(second: Any) -> Any:
            new = tg.ToyGraph(dev)
            with tg.graph(new):
                y = tg.launch(lambda v: [2.0 * e for e in v], x, name="scale")
                tg.launch(second, y, name="second")
            return new

        exe = capture(lambda v: [max(e + 1.0, 0.0) for e in v])
        result = exe.update(capture(lambda v: [e * e for e in v]))
        old = capture(lambda v: [max(e + 1.0, 0.0) for e in v])
        try:
            tg.update(old, capture(lambda v: [e * e for e in v]), driver_version=11010)
            refused = "allowed"
        except tg.GraphUpdateError as exc:
            refused = f"refused ({exc.result})"
        return (f"Allowed: the update succeeds ({len(result.functions_changed)} kernel's function changed) and "
                f"the next replay gives {exe.replay().tolist()}. Since CUDA 11.2 a kernel node may switch to "
                f"another function within limits (same context, among others); with a driver older than 11.2 "
                f"(driver_version=11010) the toy's update is {refused}, as cudaGraphExecUpdate was.")
    if "[9, 1]" in item:
        from toygraph.conditional import while_node

        dev = tg.ToyDevice()
        tokens = dev.tensor([9, 1], name="tokens")
        running = dev.tensor([2], name="running")

        def decode(v: list) -> list:
            return [max(t - 2, 0) if t % 2 else max(t - 1, 0) for t in v]

        def body() -> None:
            tg.launch(decode, tokens, out=tokens)
            tg.launch(lambda v: [sum(t != 0 for t in v)], tokens, out=running)

        g = tg.ToyGraph(dev)
        with tg.graph(g):
            node = while_node(running, body)
        tokens.copy_([9, 1])
        running.copy_([2])
        g.replay()
        return (f"{node.iterations[-1]} iterations: the loop runs until the last sequence ends (9 counts down "
                f"by 2 while odd: 9, 7, 5, 3, 1, 0), however early the other one (1) does; one replay, no sync.")
    if "n1.launch(...)` twice" in item:
        data, _ = recorded("below_torch")
        chain = ((data or {}).get("three_ways") or {}).get("explicit_nodes") or {}
        return (f"The recorded chain has {chain.get('nodes', '?')} nodes and {chain.get('edges', '?')} edges, "
                f"scale -> shift -> relu. Yours also has 3 nodes and 2 edges, but both leave scale: shift and "
                f"relu are siblings, and nothing orders relu after shift. relu reads z while shift may still be "
                f"writing it (or before it starts), so its result is a race: right or wrong by the luck of "
                f"scheduling, never guaranteed. An edge is a dependency; leaving one out is a bug the result "
                f"may not show.")
    return None
