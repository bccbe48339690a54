"""Lesson 10's helpers: toy twins drawn (DAG and stream lanes), and readers and plots of the recorded figures.

No GPU and no torch needed: the recorded figures come from ``data/gpu_reference.json`` (sections
``beyond`` and ``two_gpu`` written by ``graphcourse.gpulib.bench_beyond``); a section not recorded yet
gives a one-line "not recorded yet" instead of a figure.
"""

from __future__ import annotations

import textwrap
from typing import Any, Callable

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from toygraph import ToyDevice
from toygraph.streams import StreamGraph

from ..errors import ReferenceDataError, ReferenceDataMissingError
from .palette import COLORS, install_alt_text
from .plots import finish
from .reference import BEYOND_COMMAND, beyond_label, beyond_section, load_reference

install_alt_text()

__all__ = [
    "allreduce_lines",
    "capture_mode_lines",
    "capture_mode_summary",
    "allreduce_summary",
    "stream_summary",
    "training_summary",
    "draw_stream_graph",
    "generator_lines",
    "plot_allreduce",
    "plot_losses",
    "recorded",
    "stream_lines",
    "toy_fork_join",
    "training_lines",
    "trap_lines",
]


def recorded(name: str, data: dict[str, Any] | None = None) -> tuple[dict[str, Any] | None, str]:
    """``(section, label)``: the recorded section and where it was measured, or ``(None, 'not recorded yet ...')``."""
    try:
        found = beyond_section(name, data if data is not None else load_reference())
    except (ReferenceDataError, ReferenceDataMissingError) as exc:
        return None, f"not recorded yet: {exc}"
    return found, beyond_label(found)


def _part(section: dict[str, Any] | None, key: str) -> tuple[dict[str, Any] | None, str | None]:
    """One part of a section, or the reason it is absent (not recorded, or the error the benchmark wrote down)."""
    if section is None:
        return None, f"not recorded yet (run `{BEYOND_COMMAND}` on a GPU machine)"
    part = section.get(key)
    if part is None:
        return None, f"not recorded yet: the section has no {key!r} part"
    if isinstance(part, dict) and set(part) == {"error"}:
        return None, f"the benchmark could not record it: {part['error']}"
    return part, None


def _reads(key: str, label: str) -> Callable[[Callable[[Any], str]], Callable[[dict[str, Any] | None], str]]:
    """Make a text builder of one part of the recorded section take the whole section: it is handed the part, and
    where the part is absent the text is one line instead, ``label: why`` (not recorded yet, or the error the
    benchmark wrote down)."""

    def wrap(build: Callable[[Any], str]) -> Callable[[dict[str, Any] | None], str]:
        def from_section(section: dict[str, Any] | None) -> str:
            part, why = _part(section, key)
            return f"{label}: {why}" if part is None else build(part)

        # the builder's name and docstring, but the signature callers use: (section)
        from_section.__name__, from_section.__qualname__ = build.__name__, build.__qualname__
        from_section.__doc__, from_section.__module__ = build.__doc__, build.__module__
        return from_section

    return wrap


# --------------------------------------------------------------------------- toy twin: two streams


def toy_fork_join(join: bool = True, left_us: tuple[float, ...] = (6.0, 6.0), right_us: tuple[float, ...] = (9.0,),
                  device: ToyDevice | None = None) -> tuple[StreamGraph, Any]:
    """The toy twin of a fork/join capture: embed -> (left on main, right on side) -> sum on main.

    With ``join=False`` the capture ends without ``main.wait_stream(side)``, and the toy raises as CUDA does
    (cudaErrorStreamCaptureUnjoined).
    """
    dev = device or ToyDevice()
    sg = StreamGraph(dev, name="fork/join" if join else "no join")
    x = dev.tensor([1.0, 2.0, 3.0])
    main, side = sg.main, sg.stream("side")
    with sg.capture():
        h = main.launch(lambda v: [a * 2 for a in v], x, name="embed", kernel_us=2.0)
        side.wait_stream(main)                               # fork
        a = b = h
        for i, us in enumerate(left_us):
            a = main.launch(lambda v: [t + 1 for t in v], a, name=f"left{i}", kernel_us=us)
        for i, us in enumerate(right_us):
            b = side.launch(lambda v: [t * 3 for t in v], b, name=f"right{i}", kernel_us=us)
        if join:
            main.wait_stream(side)                           # join
            out = main.launch(lambda p, q: [i + j for i, j in zip(p, q)], a, b, name="sum", kernel_us=2.0)
        else:
            out = b
    return sg, out


def draw_stream_graph(sg: StreamGraph, title: str = "") -> Figure:
    """The toy graph's DAG (left: nodes by depth, one row per stream) and its last replay's GPU lanes (right)."""
    nodes = sg.graph.nodes
    ancestors_depth: dict[int, int] = {}
    for node in nodes:
        deps = sg.deps.get(id(node), ())
        ancestors_depth[id(node)] = 1 + max((ancestors_depth[d] for d in deps), default=0)
    streams = sorted({sg.stream_of.get(id(n), sg.main_name) for n in nodes}, key=lambda s: s != sg.main_name)
    row = {s: -i for i, s in enumerate(streams)}
    pos = {id(n): (ancestors_depth[id(n)], row[sg.stream_of.get(id(n), sg.main_name)]) for n in nodes}
    fig, (dag, lanes) = plt.subplots(1, 2, figsize=(11, 2.6), gridspec_kw={"width_ratios": [1, 1.3]})
    for node in nodes:
        x1, y1 = pos[id(node)]
        for d in sg.deps.get(id(node), ()):
            x0, y0 = pos[d]
            dag.annotate("", (x1 - 0.18, y1), (x0 + 0.18, y0),
                         arrowprops={"arrowstyle": "->", "color": "#555555", "lw": 1.0})
    for node in nodes:
        x, y = pos[id(node)]
        dag.text(x, y, node.name, ha="center", va="center", fontsize=8,
                 bbox={"boxstyle": "round", "facecolor": COLORS["kernel"], "alpha": 0.35, "edgecolor": "#333333"})
    dag.set_yticks(list(row.values()), [f"stream {s}" for s in row])
    dag.set_xticks([])
    dag.set_xlim(0.4, max((p[0] for p in pos.values()), default=1) + 0.6)
    dag.set_ylim(min(row.values()) - 0.6, 0.6)
    dag.set_title(f"{title}: {len(nodes)} nodes, {sum(len(v) for v in sg.deps.values())} edges", fontsize=10,
                  loc="left")
    events = [e for e in sg.device.timeline.events if e.lane.startswith("gpu:")]
    lane_names = sorted({e.lane for e in events}, key=lambda s: s != f"gpu:{sg.main_name}")
    for i, lane in enumerate(lane_names):
        bars = [(e.start_us, e.duration_us) for e in events if e.lane == lane]
        lanes.broken_barh(bars, (-i - 0.35, 0.7), facecolors=COLORS["kernel"], edgecolors="white")
        for e in events:
            if e.lane == lane:
                lanes.text(e.start_us + e.duration_us / 2, -i, e.label, ha="center", va="center", fontsize=7)
    lanes.set_yticks([-i for i in range(len(lane_names))], lane_names)
    lanes.set_xlabel("time (µs, toy prices)")
    lanes.set_title(f"last replay: {sg.last_replay_us:.0f} µs of GPU time, {sg.serial_us:.0f} µs one after another",
                    fontsize=10, loc="left")
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- recorded figures, as lines


def _pm(row: dict[str, Any], key: str, fmt: str = ".1f") -> str:
    lo, hi = row.get(f"{key}_min"), row.get(f"{key}_max")
    spread = f" ({lo:{fmt}}–{hi:{fmt}})" if lo is not None and hi is not None else ""
    return f"{row[key]:{fmt}}{spread}"


def _wrap(text: str, indent: int = 4, width: int = 100) -> str:
    """A message whole, wrapped at `width` (never cut), later lines indented."""
    return textwrap.fill(str(text), width=width, subsequent_indent=" " * indent, break_long_words=False,
                         break_on_hyphens=False)


def _child_line(label: str, part: dict[str, Any] | None, why: str | None) -> str:
    """What a recorded child process did: its exit code, the first error (the cause) and, under it, the error the
    later calls returned when it differs (an invalidated capture answers every later call with its own), whole."""
    if part is None:
        return f"{label}: {why}"
    errors = part.get("errors") or []
    if part.get("returncode") == 0 and not errors:
        return f"{label}: exit 0, the capture did not fail ({part.get('result')})"
    lines = [_wrap(f"{label}: exit {part.get('returncode')}, " + (errors[0] if errors else "no error line"))]
    if errors and errors[-1] != errors[0]:
        lines.append(_wrap(f"    then: {errors[-1]}", indent=10))
    return "\n".join(lines)


def stream_lines(section: dict[str, Any] | None) -> str:
    """The recorded fork/join graph: its shape, its replay time against one stream, and the two child runs
    (a fork never joined; a join to a stream never forked), each printed whether or not the graph part was recorded."""
    part, why = _part(section, "streams")
    out = []
    if part is None:
        out.append(_wrap(f"fork/join graph: {why}"))
    else:
        out.append(f"work: {part['work']}")
        for key, label in (("two_streams", "two streams (fork/join)"), ("one_stream", "one stream")):
            row, shape = part[key], part[key]["shape"] or {}
            where = (f"{shape.get('nodes')} nodes, {shape.get('edges')} edges, {shape.get('kernels')} kernels, "
                     f"longest chain {shape.get('longest_path')}, widest level {shape.get('widest_level')}"
                     if "nodes" in shape else f"shape not read: {shape.get('error', 'no dump')}")
            out.append(_wrap(f"{label:<24} replay {_pm(row, 'replay_us')} µs; {where}"))
        out.append(f"one stream / two streams: {_pm(part, 'one_over_two', '.2f')}x (median, min–max over repeats)")
    for key, label in (("unjoined", "fork without join"), ("unforked_join", "join without fork")):
        found, why = _part(section, key)
        out.append(_child_line(label, found, why))
    return "\n".join(out)


def _overlaps_one(row: dict[str, Any], key: str) -> bool:
    return row[f"{key}_min"] <= 1.0 <= row[f"{key}_max"]


def stream_summary(section: dict[str, Any] | None) -> str:
    """What the recorded fork/join part shows, in sentences made from the data (nothing where nothing is recorded)."""
    part, why = _part(section, "streams")
    if part is None:
        return _wrap("No shape and no replay time of the real fork/join graph is recorded, so this lesson "
                     f"compares none (streams part: {why}). The comparison appears here once it is recorded.",
                     indent=0)
    two, one = part["two_streams"]["shape"] or {}, part["one_stream"]["shape"] or {}
    out = []
    if "nodes" in two and "nodes" in one:
        out.append(f"Recorded shapes: {two['kernels']} kernels with two streams, {one['kernels']} with one; "
                   f"widest level {two['widest_level']} against {one['widest_level']}; longest chain "
                   f"{two['longest_path']} against {one['longest_path']} nodes; {two['edges']} edges against "
                   f"{one['edges']}. Node kinds, two streams: {two.get('kinds')}.")
    else:
        out.append(f"The graphs' shapes were not read (two streams: {two.get('error', 'no dump')}).")
    lo, hi, med = part["one_over_two_min"], part["one_over_two_max"], part["one_over_two"]
    if lo <= 1.0 <= hi:
        out.append(f"Replay time: one stream / two streams {med:.2f}x ({lo:.2f}–{hi:.2f}): the range includes 1, "
                   f"so there is no difference within the spread.")
    elif lo > 1.0:
        out.append(f"Replay time: two streams are faster, one stream / two streams {med:.2f}x ({lo:.2f}–{hi:.2f}), "
                   f"every repeat above 1.")
    else:
        out.append(f"Replay time: two streams are slower, one stream / two streams {med:.2f}x ({lo:.2f}–{hi:.2f}), "
                   f"every repeat below 1.")
    return _wrap(" ".join(out), indent=0)


@_reads("rng", "random numbers in a graph")
def generator_lines(part: dict[str, Any]) -> str:
    """Dropout replays, replay-vs-eager sequence, and registered vs unregistered generators as recorded."""
    d, seq = part["dropout"], part["sequence"]
    out = [f"register_generator_state present: {part['has_register_generator_state']}",
           f"dropout p={d['p']} on {d['n']:,} ones, {d['replays']} replays: dropped fractions "
           f"{[round(f, 4) for f in d['dropped_fraction']]} (eager: {[round(f, 4) for f in d['eager_dropped_fraction']]}),"
           f" kept values {d['values']}, replays all differ: {d['replays_differ']}",
           f"after the same manual_seed, replay k equals eager call k: {seq['replay_equals_eager']}; "
           f"offsets eager {seq['eager_offsets']}, replay {seq['replay_offsets']}"]
    for name, g in part["generators"].items():
        res = g.get("result")
        what = (f"replays differ: {res['replays_differ']}, offset after 3 replays {res['offset_after']}" if res
                else "error: " + (g["errors"][-1] if g["errors"] else f"exit {g['returncode']}"))
        out.append(f"{name + ' generator:':<24} {what}")
    return "\n".join(out)


@_reads("capture_modes", "capture_error_mode")
def capture_mode_lines(part: dict[str, Any]) -> str:
    """The recorded matrix: capture_error_mode x where the unsafe cudaMalloc happened; messages whole, wrapped."""
    out = []
    for mode, row in part.items():
        for where, cell in row.items():
            out.append(_wrap(f"{mode:<13} {where:<13} cudaMalloc: {cell['unsafe_call']}", indent=40))
            out.append(_wrap(f"{'':<27} capture:    {cell['capture']}", indent=40))
    return "\n".join(out)


CAPTURE_MODE_PREDICTION = {("global", "other thread"): False, ("global", "same thread"): False,
                           ("thread_local", "other thread"): True, ("thread_local", "same thread"): False,
                           ("relaxed", "other thread"): True, ("relaxed", "same thread"): True}
"""What cudaStreamCaptureMode's documentation predicts: is the extra cudaMalloc allowed (True) or refused?"""


@_reads("capture_modes", "capture_error_mode")
def capture_mode_summary(part: dict[str, Any]) -> str:
    """Whether each recorded cell matches the documented prediction, as a sentence made from the data."""
    matches, differ = 0, []
    for (mode, where), allowed in CAPTURE_MODE_PREDICTION.items():
        cell = part.get(mode, {}).get(where)
        if cell is None:
            differ.append(f"{mode}/{where} not recorded")
            continue
        ok = cell["unsafe_call"].startswith("ok") and cell["capture"].startswith("ok")
        if ok == allowed:
            matches += 1
        else:
            differ.append(f"{mode}/{where}: predicted {'allowed' if allowed else 'refused'}, recorded "
                          f"{'allowed' if ok else 'refused'}")
    if not differ:
        return _wrap(f"All {matches} recorded cells match the prediction: \"global\" refused the call in both "
                     f"threads, \"thread_local\" only in the capturing thread, \"relaxed\" in neither.", indent=0)
    return _wrap(f"{matches} of {len(CAPTURE_MODE_PREDICTION)} cells match the prediction; the recorded driver "
                 f"differs in: " + "; ".join(differ) + ".", indent=0)


FIRST_STEPS_ROUNDOFF = 1e-6
"""Relative loss difference of a step that is float32 round-off: a few units in the last place (2**-23 ≈ 1.2e-7)."""


@_reads("training", "training step")
def training_lines(t: dict[str, Any]) -> str:
    """Per-step times, speed-ups and loss agreement of the recorded training step."""
    c = t["config"]
    out = [f"MLP {c['depth']} x {c['width']}, batch {c['batch']}, dropout {c['dropout']}, AdamW; "
           f"{t.get('kernels_per_eager_step')} kernels per eager step",
           f"eager                  {_pm(t, 'eager_step_us')} µs/step",
           f"whole step as a graph  {_pm(t, 'graph_step_us')} µs/step  speed-up {_pm(t, 'graph_speedup', '.2f')}x",
           f"make_graphed_callables {_pm(t, 'partial_step_us')} µs/step  speed-up {_pm(t, 'partial_speedup', '.2f')}x",
           f"bf16 autocast: eager {_pm(t, 'eager_bf16_step_us')}, graph {_pm(t, 'graph_bf16_step_us')} µs/step, "
           f"speed-up {_pm(t, 'graph_bf16_speedup', '.2f')}x",
           f"largest relative loss difference over {c['steps']} steps:"]
    labels = {"graph_vs_eager_capturable": "whole-step graph vs eager, same AdamW (capturable=True)",
              "partial_vs_eager": "make_graphed_callables vs eager, same AdamW (default)",
              "graph_vs_eager_default": "whole-step graph vs eager with the default AdamW",
              "eager_capturable_vs_eager_default": "eager capturable=True vs eager default AdamW",
              "graph_bf16_vs_eager_bf16": "bf16 whole-step graph vs bf16 eager, same AdamW",
              "graph": "whole-step graph vs eager (default AdamW)", "partial": "make_graphed_callables vs eager",
              "graph_bf16": "bf16 whole-step graph vs bf16 eager"}
    for key, value in t["max_rel_diff"].items():
        out.append(f"  {labels.get(key, key):<58} {value:.1e}")
    out.append(_wrap(f"make_graphed_callables under autocast with its cache on: {t['autocast_cache_refusal']}"))
    step = t.get("noncapturable_step")
    if step:
        out.append(_wrap("AdamW without capturable=True, step() captured: "
                         + (f"exit {step['returncode']}, {step['errors'][-1]}" if step["errors"] else "captured")))
    return "\n".join(out)


@_reads("training", "training step")
def training_summary(t: dict[str, Any]) -> str:
    """Is the whole-step graph the same run as eager? Sentences from the recorded data, with the criterion."""
    diffs = t["max_rel_diff"]
    per_step = t.get("rel_diff_per_step")
    if per_step is None or "graph_vs_eager_capturable" not in diffs:
        return _wrap("This recording compares the whole-step graph only with eager under the default AdamW "
                     f"(largest relative difference {diffs.get('graph', float('nan')):.1e}), a different optimizer "
                     "arithmetic; the same-arithmetic comparison appears once the benchmark is re-run.", indent=0)
    same = per_step["graph_vs_eager_capturable"]
    default = per_step["graph_vs_eager_default"]
    optimizers = diffs["eager_capturable_vs_eager_default"]
    first = max(same[:2]) if same else float("nan")
    verdict = ("meets" if first <= FIRST_STEPS_ROUNDOFF and diffs["graph_vs_eager_capturable"] <= optimizers
               else "does not meet")
    out = [f"With the same optimizer arithmetic the whole-step graph's first two losses differ from eager's by "
           f"at most {first:.1e} (round-off is up to {FIRST_STEPS_ROUNDOFF:.0e}), and over {len(same)} steps by at "
           f"most {diffs['graph_vs_eager_capturable']:.1e}, against {optimizers:.1e} between the two eager "
           f"optimizers: the recording {verdict} the criterion.",
           f"Against the default AdamW the graph's curve starts at {max(default[:2]):.1e} and drifts to "
           f"{max(default):.1e}: the default computes the bias corrections as Python floats, capturable=True "
           f"computes them on the device in float32, and training amplifies that round-off step by step."]
    return _wrap(" ".join(out), indent=0)


def plot_losses(section: dict[str, Any] | None, live: dict[str, list[float]] | None = None) -> Figure | None:
    """Loss per step: recorded eager / whole-step graph / partial graph, plus any live curves; None without any."""
    t, _ = _part(section, "training")
    curves = dict(t["losses"]) if t else {}
    for name, values in (live or {}).items():
        curves[f"{name} (live, this machine)"] = values
    if not curves:
        return None
    fig, ax = plt.subplots(figsize=(8, 3))
    styles = ["-", "--", ":", "-.", (0, (1, 3)), (0, (5, 1))]
    for i, (name, values) in enumerate(curves.items()):
        ax.plot(range(1, len(values) + 1), values, linestyle=styles[i % len(styles)], label=name, linewidth=1.4)
    return finish(fig, ax, "training step", "MSE loss", "the same training run, eager and graphed")


@_reads("allreduce", "all-reduce on two GPUs")
def allreduce_lines(part: dict[str, Any]) -> str:
    """Sums checked on both ranks and µs per all-reduce, eager and replayed from a graph, per size."""
    out = []
    for r in part["ranks"]:
        if "error" in r:
            out.append(f"rank {r['rank']}: error {r['error']}")
        else:
            out.append(f"rank {r['rank']}: eager sum right: {r.get('eager_sum_ok')}, sum replayed from a graph "
                       f"right: {r.get('graph_sum_ok')} (got {r.get('graph_sums')}, expected {r.get('expected_sum')})")
    for row in part["ranks"][0].get("rows", []):
        out.append(f"{row['bytes'] / 1024:8.0f} KiB: eager {_pm(row, 'eager_us')} µs, in a graph "
                   f"{_pm(row, 'graph_us')} µs, ratio {_pm(row, 'speedup', '.2f')}x")
    return "\n".join(out)


@_reads("allreduce", "all-reduce on two GPUs")
def allreduce_summary(part: dict[str, Any]) -> str:
    """Per size, whether the graph was faster, slower or no different within the spread (the ratio's range)."""
    rows = part["ranks"][0].get("rows", [])
    if not rows or "speedup" not in rows[0]:
        return "all-reduce on two GPUs: no timed sizes recorded."
    faster, same, slower = [], [], []
    for r in rows:
        size = f"{r['bytes'] / 1024:.0f} KiB"
        if r["speedup_min"] > 1.0:
            faster.append(f"{size} ({_pm(r, 'speedup', '.2f')}x)")
        elif r["speedup_max"] < 1.0:
            slower.append(f"{size} ({_pm(r, 'speedup', '.2f')}x)")
        else:
            same.append(f"{size} ({_pm(r, 'speedup', '.2f')}x)")
    out = []
    if faster:
        out.append("The graph is faster, every repeat, at " + ", ".join(faster) + ".")
    if same:
        out.append("No difference within the spread (the ratio's range includes 1) at " + ", ".join(same) + ".")
    if slower:
        out.append("The graph is slower, every repeat, at " + ", ".join(slower) + ".")
    return _wrap(" ".join(out), indent=0)


def plot_allreduce(section: dict[str, Any] | None) -> Figure | None:
    """µs per all-reduce against message size, eager and in a graph, with min–max bars; None if not recorded."""
    part, _ = _part(section, "allreduce")
    rows = part["ranks"][0].get("rows", []) if part else []
    if not rows or "graph_us" not in rows[0]:
        return None
    fig, ax = plt.subplots(figsize=(7, 3))
    sizes = [r["bytes"] / 1024 for r in rows]
    for key, label, marker in (("eager_us", "eager all_reduce", "o"), ("graph_us", "replayed from a graph", "s")):
        mid = [r[key] for r in rows]
        err = [[m - r[f"{key}_min"] for m, r in zip(mid, rows)], [r[f"{key}_max"] - m for m, r in zip(mid, rows)]]
        ax.errorbar(sizes, mid, yerr=err, marker=marker, capsize=3, label=label)
    ax.set_xscale("log")
    return finish(fig, ax, "message size (KiB)", "µs per all-reduce",
                  "NCCL all-reduce across two GPUs (rank 0's timing)")


@_reads("trap", "two-GPU side-stream trap")
def trap_lines(part: dict[str, Any]) -> str:
    """The recorded side-stream trap, its two fixes, and the cached default capture stream."""
    out = []
    for name, r in part.items():
        res = r.get("result") or {}
        if r["returncode"] == 0:
            what = "ran, replay gives " + str(res.get("replay_value", "?")) if "replay_value" in res else "ran"
            if "expected_value" in res:
                what += f" (right answer {res['expected_value']}); warnings: {res.get('warnings') or 'none'}"
        else:
            what = "failed: " + " | ".join(r["errors"][-2:])
        out.append(_wrap(f"{name:<22} {what}", indent=23))
    return "\n".join(out)


def live_or_note(run: Callable[[], str], gpu: bool, note: str = "no CUDA GPU here: the recorded figures above stand in") -> str:
    """Run a live GPU demonstration if there is a GPU, else the note."""
    return run() if gpu else note


# --------------------------------------------------------------------------- answers to "Things to try" (instructor kit)


def try_answer(item: str) -> str | None:
    """The computed answer to one of lesson 10's "Things to try" items, or None for an item it does not know."""
    import toygraph as tg
    from toygraph.rng import ToyGenerator, rand

    if "right_us" in item:
        sg, _ = toy_fork_join(right_us=(20.0,))
        sg.replay()
        base, _ = toy_fork_join()
        base.replay()
        return (f"With the side branch at 20 µs the replay takes {sg.last_replay_us:.0f} µs (it took "
                f"{base.last_replay_us:.0f} µs with 9 µs): the longer branch sets the length, embed + 20 + sum; the "
                f"main branch's {6 + 6:.0f} µs now hide inside it. One stream would take {sg.serial_us:.0f} µs.")
    if "rand(gen, 5)" in item:
        dev = tg.ToyDevice()
        gen = ToyGenerator(dev, seed=1)
        g = tg.ToyGraph(dev)
        with tg.graph(g):
            rand(gen, 2)
            rand(gen, 5)
        offsets = []
        for _ in range(3):
            g.replay()
            offsets.append(gen.offset)
        return (f"Each replay moves the offset on by {gen.whole_graph_increment(g)} (offsets after three replays: "
                f"{offsets}): the whole-graph increment is the sum of what the captured kernels draw, 2 + 5; the "
                f"second kernel starts 2 numbers into the replay's share. (PyTorch counts per-thread Philox offsets, "
                f"each kernel's rounded up to a multiple of 4, not values.)")
    if "another graph" in item:
        dev = tg.ToyDevice()
        mine = ToyGenerator(dev, seed=3, default=False)
        g1, g2 = tg.ToyGraph(dev, name="g1"), tg.ToyGraph(dev, name="g2")
        mine.register(g1)
        with tg.graph(g1):
            rand(mine, 4)
        try:
            with tg.graph(g2):
                rand(mine, 4)
            outcome = "captured"
        except tg.CaptureError:
            outcome = "refused with CaptureError"
        g1.replay()
        return (f"The capture of g2 is {outcome}: registration is per graph (PyTorch keeps the set of registered "
                f"graphs per generator state). g1 still replays and moves the offset on by "
                f"{mine.whole_graph_increment(g1)} per replay (now {mine.offset}). Register the generator with "
                f"every graph that draws from it.")
    if "rng_seed=5" in item:
        from ..gpulib.beyond import TrainConfig, train_eager

        steps = 10
        a, b = train_eager(TrainConfig(steps=steps)), train_eager(TrainConfig(steps=steps), rng_seed=5)
        differ = sum(x != y for x, y in zip(a, b))
        worst = max(abs(x - y) for x, y in zip(a, b))
        return (f"{differ} of {steps} losses differ, from the first step on (largest difference "
                f"{worst:.4f}): the weights and data are the same, only the dropout masks change with the seed. "
                f"That is why the graphed run is compared with an eager run after the same `torch.manual_seed`.")
    return None
