"""Derive the toy's default prices from the course's recorded GPU benchmark: `python -m graphcourse.authoring.toy_prices`.

The toy model (``toygraph.timeline.CostModel``) prices five actions: an eager launch, a tiny
kernel, a graph launch, each node of a graph launch, and a sync. This tool reads
``data/gpu_reference.json`` (written on a GPU by ``python -m graphcourse.gpulib.bench``), derives
each price from one named measurement, and writes ``toygraph/prices.py``: a generated,
standard-library-only module holding the figures with their provenance (GPU, torch, date,
which measurement, median and spread). ``--check`` fails when that module is stale, so a
re-recorded benchmark cannot leave the toy's prices behind.

Run from the repository root::

    python -m graphcourse.authoring.toy_prices            # (re)write toygraph/prices.py
    python -m graphcourse.authoring.toy_prices --check    # exit 1 if it is out of date
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..core.paths import ROOT
from ..errors import ReferenceDataError, ReferenceDataMissingError
from ..lessons.reference import default_reference_path, load_reference

PRICES_MODULE = ROOT / "toygraph" / "prices.py"

NVIDIA_NODE_US = 0.001
"""CPU time per node of a repeat graph launch, from NVIDIA's technical blog post "Constant Time Launch
for Straight-Line Graphs and Other Performance Enhancements" (CUDA 12.6: about 2.5 µs plus about 1 ns
per node). The course's
benchmark cannot see it: the replays it times are bound by the GPU long before 1 ns a node shows."""
NVIDIA_NODE_SOURCE = ("published, not measured by the course: NVIDIA technical blog, 'Constant Time Launch for "
                      "Straight-Line Graphs and Other Performance Enhancements' (CUDA 12.6, about 1 ns per node "
                      "of a repeat launch)")
ONE_FIGURE = "not recorded (one figure): a loose price"
"""What a price resting on a single figure, with no spread, is called: loose, like one with a wide spread."""


@dataclass(frozen=True)
class Price:
    """One price of the toy: its value in µs, its spread, and the measurement it comes from."""

    value: float
    spread: float | None
    spread_kind: str
    measurement: str
    samples: int


def _rounded(x: float) -> float:
    return round(float(x), 3)


def _median_and_range(values: list[float]) -> tuple[float, float]:
    return statistics.median(values), max(values) - min(values)


def _need(data: dict[str, Any], *path: str) -> Any:
    node: Any = data
    for i, key in enumerate(path):
        if not isinstance(node, dict) or key not in node:
            raise ReferenceDataError(
                f"the recorded results have no {'.'.join(path[: i + 1])!r}, which the toy's prices are derived from: "
                f"re-record them with `python -m graphcourse.gpulib.bench` on a GPU, or restore data/gpu_reference.json "
                f"from git."
            )
        node = node[key]
    return node


def _chain_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    rows = _need(data, "chain", "rows")
    if not isinstance(rows, list) or not rows:
        raise ReferenceDataError("the recorded 'chain' section has no rows: re-run `python -m graphcourse.gpulib.bench` on a GPU.")
    return rows


def _field(row: dict[str, Any], *names: str) -> float:
    """The first of `names` the row has (a schema's median field first, then the older mean)."""
    for name in names:
        if isinstance(row.get(name), (int, float)) and not isinstance(row.get(name), bool):
            return float(row[name])
    raise ReferenceDataError(f"a recorded row lacks every one of {names}: {sorted(row)}. Re-record the benchmark.")


def _cost(costs: dict[str, Any], key: str) -> tuple[float, float | None, str]:
    entry = costs.get(key)
    if not isinstance(entry, dict) or not isinstance(entry.get("median"), (int, float)):
        raise ReferenceDataError(
            f"the recorded results' 'costs' section has no {key!r} with a median, which the toy's prices are "
            f"derived from: re-record them with `python -m graphcourse.gpulib.bench` on a GPU."
        )
    low, high = entry.get("min"), entry.get("max")
    spread = float(high) - float(low) if isinstance(low, (int, float)) and isinstance(high, (int, float)) else None
    return float(entry["median"]), spread, str(entry.get("from", key))


def _derive_from_costs(data: dict[str, Any]) -> dict[str, Price]:
    """Schema 2: the benchmark's own `costs` section, each a median over interleaved repeats with its min and max."""
    costs = data["costs"]
    repeats = data.get("method", {}).get("repeats") if isinstance(data.get("method"), dict) else None
    kind = f"max - min over {repeats} repeats" if repeats else "max - min over repeats"
    samples = int(repeats) if isinstance(repeats, int) else 1

    def price(key: str, what: str, value: float | None = None) -> Price:
        median, spread, source = _cost(costs, key)
        return Price(_rounded(median if value is None else value), None if spread is None else _rounded(spread),
                     kind if spread is not None else ONE_FIGURE, f"{what}: {source}", samples)

    prices = {
        "launch_us": price("eager_launch_us", "bare eager launch, CPU time per kernel"),
        "kernel_us": price("graph_node_us", "GPU time per replayed node"),
        "graph_launch_us": price("graph_launch_us", "one replay of a one-kernel graph, back to back (a throughput: "
                                 "at most the CPU's cost of one replay call, an upper bound)"),
        "graph_node_us": Price(NVIDIA_NODE_US, None, "not measured", NVIDIA_NODE_SOURCE, 0),
    }
    item, _, _ = _cost(costs, "item_sync_us")
    decode_rows = data.get("decode", {}).get("rows") or [{}]
    row1 = next((r for r in decode_rows if r.get("batch") == 1), decode_rows[0])
    nodes = int(row1.get("graph_kernels", row1.get("kernels", 0)) or 0)
    exposed = prices["graph_launch_us"].value + nodes * NVIDIA_NODE_US
    prices["sync_us"] = price(
        "item_sync_us", f"one .item() per token ({item:.1f} µs, graph loop with minus without), less the graph "
        f"launch a sync leaves exposed ({exposed:.1f} µs), so the toy charges the recorded cost; measured as",
        value=item - exposed)
    prices["launch_in_model_us"] = price(
        "kernel_in_model_us", "a kernel inside the tiny GPT, eager CPU time per kernel (not a default: lesson 02 "
        "says why it costs more than a bare launch)")
    return prices


def derive_prices(data: dict[str, Any]) -> dict[str, Price]:
    """The toy's prices from the recorded benchmark, each with the measurement it was taken from."""
    if isinstance(data.get("costs"), dict):
        return _derive_from_costs(data)
    chain = _chain_rows(data)
    op = data.get("chain", {}).get("op", "a tiny element-wise op")
    per_call = "median of repeats" if data.get("schema", 1) >= 2 else "mean of back-to-back calls"

    steady = [r for r in chain if r.get("kernels", 0) >= 10]
    if not steady:
        raise ReferenceDataError("the recorded chain has no row of 10 kernels or more: re-record the benchmark.")
    launch, launch_range = _median_and_range([_field(r, "eager_us_per_kernel_median", "eager_us_per_kernel")
                                              for r in steady])
    Ns = [r["kernels"] for r in steady]
    prices = {
        "launch_us": Price(
            _rounded(launch), _rounded(launch_range), f"max - min over chains of N = {min(Ns)}..{max(Ns)}",
            f"eager: CPU time per kernel of a chain of N `{op}` launches (N = {min(Ns)}..{max(Ns)}; "
            f"each figure a {per_call}), median over N", len(steady)),
    }

    long = [r for r in chain if r.get("kernels", 0) >= 100] or steady
    node, node_range = _median_and_range([_field(r, "graph_us_per_node_median", "graph_us_per_node") for r in long])
    Ns = [r["kernels"] for r in long]
    prices["kernel_us"] = Price(
        _rounded(node), _rounded(node_range), f"max - min over chains of N = {min(Ns)}..{max(Ns)}",
        f"graph replay: GPU time per node of a replayed chain of N `{op}` kernels (N = {min(Ns)}..{max(Ns)}, "
        f"where the GPU, not the launch, sets the pace), median over N", len(long))

    one = min(chain, key=lambda r: r.get("kernels", 10**9))
    graph_launch = _field(one, "graph_step_us_median", "graph_step_us")
    spread = one.get("graph_step_spread_us")
    prices["graph_launch_us"] = Price(
        _rounded(graph_launch), None if spread is None else _rounded(spread),
        "max - min over repeats" if spread is not None else ONE_FIGURE,
        f"graph replay of a chain of {one['kernels']} kernel: time per replay, back to back. A throughput, so at "
        f"most the CPU's cost of one replay call (an upper bound; the CPU's replay call sets the pace when the "
        f"graph is this small)", 1)

    prices["graph_node_us"] = Price(NVIDIA_NODE_US, None, "not measured", NVIDIA_NODE_SOURCE, 0)

    item = _need(data, "item_sync")
    item_cost = _field(item, "item_cost_us_median", "item_cost_us")
    spread = sum(float(item[k]) for k in ("graph_item_spread_us", "graph_spread_us") if k in item) or None
    decode_rows = _need(data, "decode", "rows")
    row1 = next((r for r in decode_rows if r.get("batch") == item.get("batch", 1)), decode_rows[0])
    nodes = int(_field(row1, "graph_kernels", "kernels"))
    exposed = graph_launch + nodes * NVIDIA_NODE_US
    prices["sync_us"] = Price(
        _rounded(item_cost - exposed), None if spread is None else _rounded(spread),
        "spread of the graph loop with .item() plus that of the loop without (max - min over repeats each)",
        f"decode loop of the tiny GPT at batch {item.get('batch', 1)}, graph replay with and without one .item() "
        f"per token: the difference ({item_cost:.1f} µs per token, a median over {item.get('repeats', '?')} "
        f"interleaved repeats), less the graph launch a sync leaves exposed ({exposed:.1f} µs), so that the toy's "
        f"cost of one .item() per token equals the recorded one", int(item.get("repeats", 1)))

    eager_in_model = _field(row1, "eager_step_us_median", "eager_step_us") / _field(row1, "kernels")
    prices["launch_in_model_us"] = Price(
        _rounded(eager_in_model), None, ONE_FIGURE,
        f"eager decode step of the tiny GPT at batch {row1.get('batch', 1)}: CPU time per kernel launched "
        f"({_field(row1, 'eager_step_us_median', 'eager_step_us'):.0f} µs for {int(_field(row1, 'kernels'))} "
        f"kernels). One figure with no spread, while eager decode times have varied widely from one recording "
        f"to the next: a rough price. Not a default: a kernel inside a model costs more than a "
        f"bare launch (lesson 02 says why)", 1)
    return prices


def provenance(data: dict[str, Any]) -> dict[str, Any]:
    """Where and when the recorded figures were measured."""
    p = _need(data, "provenance")
    return {
        "file": "data/gpu_reference.json",
        "schema": data.get("schema", 1),
        "gpu": p.get("gpu_name", "unknown GPU"),
        "torch": p.get("torch", "?"),
        "cuda": p.get("cuda", "?"),
        "date_utc": p.get("date_utc", "?"),
        "command": p.get("command", "python -m graphcourse.gpulib.bench"),
        "timing": p.get("timing", "?"),
    }


HEADER = '''"""The toy's default prices, derived from the course's own GPU benchmark, with their provenance.

GENERATED by `python -m graphcourse.authoring.toy_prices` from data/gpu_reference.json: do not edit by
hand. `python -m graphcourse.authoring.toy_prices --check` fails when this file is stale.

Each entry of PRICES is one price in µs: its value (a median), its spread, what the spread is,
the measurement it was taken from, and how many figures went into it. SOURCE says which GPU,
torch and date the benchmark ran with. toygraph.timeline.CostModel takes its defaults from here.
"""

'''


def _table(mapping: dict[str, Any], indent: int = 4) -> str:
    pad = " " * indent
    lines = ["{"]
    for key, value in mapping.items():
        text = _table(value, indent + 4) if isinstance(value, dict) else repr(value)
        lines.append(f"{pad}{key!r}: {text},")
    return "\n".join(lines) + "\n" + " " * (indent - 4) + "}"


def render(data: dict[str, Any]) -> str:
    """The text of toygraph/prices.py for these recorded results."""
    prices = {name: asdict(p) for name, p in derive_prices(data).items()}
    return HEADER + "SOURCE = " + _table(provenance(data)) + "\n\nPRICES = " + _table(prices) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Command line: write toygraph/prices.py from the recorded data, or --check that it is current."""
    parser = argparse.ArgumentParser(prog="python -m graphcourse.authoring.toy_prices", description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=None, help="recorded results (default data/gpu_reference.json)")
    parser.add_argument("--out", type=Path, default=PRICES_MODULE, help="module to write (default toygraph/prices.py)")
    parser.add_argument("--check", action="store_true", help="do not write; exit 1 if the module is out of date")
    args = parser.parse_args(argv)
    try:
        text = render(load_reference(args.data if args.data is not None else default_reference_path()))
    except (ReferenceDataError, ReferenceDataMissingError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    current = args.out.read_text(encoding="utf-8") if args.out.is_file() else None
    if args.check:
        if current == text:
            print(f"ok: {args.out} matches the recorded data")
            return 0
        print(f"error: {args.out} is {'missing' if current is None else 'stale'}: the recorded data changed since it "
              f"was generated. Regenerate it with `python -m graphcourse.authoring.toy_prices` and commit it.", file=sys.stderr)
        return 1
    if current == text:
        print(f"unchanged: {args.out}")
        return 0
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
