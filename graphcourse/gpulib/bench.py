"""The course's GPU benchmark: eager against CUDA graph replay, written to data/gpu_reference.json.

Run on a CUDA machine: ``python -m graphcourse.gpulib.bench [--out data/gpu_reference.json] [--quick]``.
Without CUDA it measures nothing and exits with status 2 and a one-line reason. Lessons on a CPU
read what it wrote through :mod:`graphcourse.lessons.reference`.
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Any, Callable, Sequence
from . import bench_cli
from .bench_cli import NO_CUDA_EXIT  # noqa: F401  (the exit code tests read here)

CHAIN_KERNELS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
DECODE_BATCHES = (1, 2, 4, 8, 16, 32, 64)
CHAIN_ELEMENTS = 1024
STREAM_BATCHES = 400
STREAM_SEED = 0
ITEM_TOKENS = 100
DEVICE = "cuda"

TARGETS = {
    "decode_b1_graph_over_kernel_time_max": 1.05,
    "decode_b1_eager_over_graph_min": 7.0,
    "chain_1000_graph_us_per_node_max": 1.5,
    "bucketed_speedup_min": 3.0,
}


REPEATS = 7
"""Interleaved repeats of every timed pair: each repeat times eager, then graph, so a slow spell hits both."""


def spread(values: Sequence[float]) -> dict[str, float]:
    """Median, minimum and maximum of repeated measurements (the spread is min..max across repeats)."""
    vals = sorted(float(v) for v in values)
    if not vals:
        raise ValueError("no measurements to summarise: time at least one repeat.")
    return {"median": statistics.median(vals), "min": vals[0], "max": vals[-1], "n": len(vals)}


def _flat(prefix: str, stats: dict[str, float]) -> dict[str, float]:
    """``{prefix: median, prefix_min: ..., prefix_max: ...}``: the flat keys lessons read."""
    return {prefix: stats["median"], f"{prefix}_min": stats["min"], f"{prefix}_max": stats["max"]}


def summarise(prefix: str, values: Sequence[float]) -> dict[str, float]:
    """The flat keys of repeated measurements: ``{prefix: median, prefix_min, prefix_max}``."""
    return _flat(prefix, spread(values))


def provenance(argv: Sequence[str], quick: bool) -> dict[str, Any]:
    """Where and how the figures were measured (no host name)."""
    return bench_cli.provenance("graphcourse.gpulib.bench", argv, quick=quick, timing=METHOD["timing"])


METHOD = {
    "timing": "per repeat: mean µs per call of back-to-back calls between two torch.cuda.Event records (CPU launch "
              "cost included), after warm-up; eager and graph timed alternately in every repeat",
    "repeats": REPEATS,
    "summary": "median over repeats; spread = min..max over repeats (keys ending _min and _max)",
    "replay": "graph replay is timed as CapturedGraph.replay(*inputs): the copy of new inputs into the static "
              "inputs included",
    "floor": "kernel_time_us: the GPU time of one eager decode step's kernels, summed from torch.profiler (CUPTI) "
             "kernel records, median of the profiled steps; profiled inside a replay the same kernels read a "
             "little longer (graph_kernel_time_us, shown for comparison, not used as the floor)",
    "memory": "graph memory from the graph pool's own allocator statistics (torch.cuda.memory_snapshot segments "
              "whose segment_pool_id is the graph's pool): allocated = blocks in use, reserved = segments held",
}


def _alternate(pairs: Sequence[tuple[str, Callable[[], float]]], repeats: int) -> dict[str, list[float]]:
    """Call each named timer once per repeat, in turn, `repeats` times: their samples, interleaved."""
    samples: dict[str, list[float]] = {name: [] for name, _ in pairs}
    for _ in range(repeats):
        for name, timer in pairs:
            samples[name].append(timer())
    return samples


def _ratio_spread(num: Sequence[float], den: Sequence[float]) -> dict[str, float]:
    """Spread of the per-repeat ratio num/den (each repeat timed both back to back)."""
    return spread([a / b for a, b in zip(num, den)])


def bench_chain(kernel_counts: Sequence[int], quick: bool, progress: bool | None = None) -> dict[str, Any]:
    """A chain of N tiny in-place adds on 1024 floats: eager launches against one graph replay, interleaved repeats."""
    import torch
    from tqdm.auto import tqdm

    from .graphs import capture, cuda_time_us, show_progress

    x = torch.zeros(CHAIN_ELEMENTS, device=DEVICE)
    scale = 4 if quick else 1
    repeats = 3 if quick else REPEATS
    rows = []
    for n in tqdm(kernel_counts, desc="chain of N kernels", unit="N", disable=not show_progress(progress)):

        def chain(n: int = n) -> None:
            for _ in range(n):
                x.add_(1.0)

        graph = capture(chain, warmup_iters=1)
        eager_iters = max(5, min(200, 20_000 // n) // scale)
        graph_iters = max(50, min(2000, 200_000 // n) // scale)
        t = _alternate([("eager", lambda: cuda_time_us(chain, iters=eager_iters, warmup=3)),
                        ("graph", lambda: cuda_time_us(graph.replay, iters=graph_iters, warmup=10))], repeats)
        eager, replay, ratio = spread(t["eager"]), spread(t["graph"]), _ratio_spread(t["eager"], t["graph"])
        rows.append({
            "kernels": n,
            **_flat("eager_step_us", eager),
            **_flat("graph_step_us", replay),
            **_flat("eager_us_per_kernel", {k: v / n for k, v in eager.items() if k != "n"}),
            **_flat("graph_us_per_node", {k: v / n for k, v in replay.items() if k != "n"}),
            **_flat("speedup", ratio),
            "repeats": repeats,
            "capture_s": graph.capture_s,
        })
        del graph
    return {"elements": CHAIN_ELEMENTS, "dtype": "float32", "op": "x.add_(1.0)", "rows": rows}


def _model(config: Any = None) -> Any:
    from .graphs import GPTConfig, TinyGPT

    return TinyGPT(config or GPTConfig()).to(DEVICE)


def bench_decode(batches: Sequence[int], quick: bool, progress: bool | None = None) -> dict[str, Any]:
    """One decode step of the tiny GPT per batch size: eager and graph replay interleaved, the kernel floor, pool memory."""
    import dataclasses

    import torch
    from tqdm.auto import tqdm

    from .graphs import as_device_position, capture, cuda_time_us, kernel_profile, show_progress

    model = _model()
    cache = model.new_cache(max(batches))
    pos = as_device_position(16, DEVICE)
    scale = 4 if quick else 1
    repeats = 3 if quick else REPEATS
    rows = []
    for b in tqdm(batches, desc="decode step eager vs graph", unit="batch", disable=not show_progress(progress)):
        view = cache.batch_view(b)
        tokens = torch.randint(0, model.config.vocab_size, (b,), device=DEVICE)

        def step(tok: torch.Tensor, view: Any = view) -> torch.Tensor:
            return model.decode_step(tok, pos, view)

        graph = capture(step, tokens)
        t = _alternate([("eager", lambda: cuda_time_us(lambda: step(tokens), iters=100 // scale, warmup=10)),
                        ("graph", lambda: cuda_time_us(lambda: graph.replay(tokens), iters=300 // scale,
                                                       warmup=10))], repeats)
        matches = bool(torch.equal(graph.replay(tokens).clone(), step(tokens)))
        eager_prof = kernel_profile(lambda: step(tokens), iters=5)
        graph_prof = kernel_profile(lambda: graph.replay(tokens), iters=20)
        floor_us = eager_prof.kernel_time_us
        eager, replay = spread(t["eager"]), spread(t["graph"])
        rows.append({
            "batch": b,
            "kernels": eager_prof.kernels_per_call,
            "kernel_time_us": floor_us,
            "graph_kernels": graph_prof.kernels_per_call,
            "graph_kernel_time_us": graph_prof.kernel_time_us,
            **_flat("eager_step_us", eager),
            **_flat("graph_step_us", replay),
            **_flat("speedup", _ratio_spread(t["eager"], t["graph"])),
            **_flat("graph_over_kernel_time", {k: v / floor_us for k, v in replay.items() if k != "n"}),
            "repeats": repeats,
            "graph_memory_allocated_bytes": graph.memory.allocated_bytes,
            "graph_memory_reserved_bytes": graph.memory.reserved_bytes,
            "graph_memory_requested_bytes": graph.memory.requested_bytes,
            "replay_matches_eager": matches,
            "top_kernels_us": [[name, us] for name, us in eager_prof.top_kernels],
        })
        del graph
    return {"config": dataclasses.asdict(model.config), "dtype": "float32", "position": 16, "rows": rows}


def bench_bucketed(quick: bool, progress: bool | None = None) -> dict[str, Any]:
    """The bucketed decode runner on a seeded mixed stream of batch sizes 1..64 against eager steps; memory per capture."""
    import torch

    from toygraph.buckets import padding_report, powers_of_two

    from .graphs import as_device_position, batch_sizes_stream, capture_memory, decode_runner

    model = _model()
    max_batch = 64
    buckets = powers_of_two(max_batch)
    stream = batch_sizes_stream(STREAM_BATCHES // (4 if quick else 1), max_batch, seed=STREAM_SEED)
    cache = model.new_cache(max_batch)
    pos = as_device_position(16, DEVICE)
    tokens = torch.randint(0, model.config.vocab_size, (max_batch,), device=DEVICE)
    slots = torch.arange(max_batch, device=DEVICE)

    def step(tok: torch.Tensor, slot: torch.Tensor) -> torch.Tensor:
        return model.decode_step(tok, pos, cache, slots=slot)

    memory = capture_memory(lambda tok: model.decode_step(tok, pos, cache, slots=slots[: tok.shape[0]]),
                            tokens, buckets)  # before the runner's graphs exist; fair in any order
    t0 = time.perf_counter()
    runner = decode_runner(model, cache, pos, buckets, share_pool=True, progress=progress)
    capture_s = time.perf_counter() - t0
    # Padded replay and eager give the same next tokens (up to float ties: compared, not asserted).
    sizes = range(1, max_batch + 1)
    matching = sum(int((runner(tokens[:n], slots[:n]) == step(tokens[:n], slots[:n])).sum()) for n in sizes)

    def run(fn: Callable[..., Any]) -> float:
        torch.cuda.synchronize()
        start = time.perf_counter()
        for n in stream:
            fn(tokens[:n], slots[:n])
        torch.cuda.synchronize()
        return time.perf_counter() - start

    run(step), run(runner)  # warm-up: cuBLAS heuristics for every eager shape, first replays
    repeats = 2 if quick else 5
    t = _alternate([("eager", lambda: run(step)), ("graph", lambda: run(runner))], repeats)
    rows = sum(stream)
    eager, graph = spread(t["eager"]), spread(t["graph"])
    pad = padding_report(stream, buckets)
    return {
        "buckets": list(buckets),
        "stream": {"n_batches": len(stream), "seed": STREAM_SEED, "min": 1, "max": max_batch, "rows": rows},
        **_flat("eager_s", eager),
        **_flat("graph_s", graph),
        "eager_rows_per_s": rows / eager["median"],
        "graph_rows_per_s": rows / graph["median"],
        **_flat("speedup", _ratio_spread(t["eager"], t["graph"])),
        "repeats": repeats,
        "capture_s": capture_s,
        "padding": {
            "useful_rows": pad.useful_rows,
            "padded_rows": pad.padded_rows,
            "waste_fraction": pad.waste_fraction,
            "eager_batches": pad.eager_batches,
        },
        "memory_per_bucket": memory.as_json_rows(),
        "memory_one_time_bytes": memory.one_time_bytes,
        "kv_cache_bytes": cache.nbytes,
        "rows_matching_eager": matching / sum(sizes),
        "note": "padded rows write the KV cache's scratch slot (graphcourse.gpulib.graphs.decode_runner); memory_per_bucket: "
        "bytes each capture added to its graph pool (the pool's own allocator statistics) after one-time costs "
        "were paid by throwaway captures; largest bucket captured first, so with a shared pool smaller buckets "
        "reuse its memory",
    }


def bench_item_sync(quick: bool) -> dict[str, Any]:
    """Greedy decoding at batch 1, one graph per token, with and without one .item() per token (a host sync)."""
    import torch

    from .graphs import as_device_position, capture

    model = _model()
    cache = model.new_cache(1)
    pos = as_device_position(0, DEVICE)
    start_token = torch.zeros(1, dtype=torch.long, device=DEVICE)

    def loop_step(tok: torch.Tensor) -> torch.Tensor:
        nxt = model.decode_step(tok, pos, cache)
        tok.copy_(nxt)  # the next step reads its token and position from the same addresses
        pos.add_(1)
        return nxt

    graph = capture(loop_step, start_token)
    n_tokens = ITEM_TOKENS

    def generate(step: Callable[[], torch.Tensor], sync_each: bool) -> tuple[float, list[int]]:
        cache.reset_()
        pos.fill_(0)
        graph.static_inputs[0].fill_(0)
        eager_tok.fill_(0)
        torch.cuda.synchronize()
        seen: list[int] = []
        start = time.perf_counter()
        outs = []
        for _ in range(n_tokens):
            nxt = step()
            if sync_each:
                seen.append(nxt.item())
            else:
                outs.append(nxt.clone())
        torch.cuda.synchronize()
        us = (time.perf_counter() - start) * 1e6 / n_tokens
        return us, seen or torch.cat(outs).tolist()

    eager_tok = torch.zeros(1, dtype=torch.long, device=DEVICE)
    eager = lambda: loop_step(eager_tok)  # noqa: E731
    repeats = 3 if quick else REPEATS
    variants = [
        ("graph_us_per_token", graph.replay, False),
        ("graph_item_us_per_token", graph.replay, True),
        ("eager_us_per_token", eager, False),
        ("eager_item_us_per_token", eager, True),
    ]
    for _, step, sync in variants:
        generate(step, sync)  # warm-up
    runs: dict[str, list[float]] = {name: [] for name, _, _ in variants}
    tokens: dict[str, list[int]] = {}
    for _ in range(repeats):  # interleaved, so a slow spell of the machine hits every variant alike
        for name, step, sync in variants:
            us, seen = generate(step, sync)
            runs[name].append(us)
            tokens.setdefault(name, seen)
    same = tokens["graph_us_per_token"] == tokens["eager_us_per_token"] == tokens["graph_item_us_per_token"]
    out: dict[str, Any] = {"batch": 1, "tokens": n_tokens}
    for name, values in runs.items():
        stats = spread(values)
        out.update(_flat(name, stats))
        out[name.replace("_us_per_token", "_spread_us")] = stats["max"] - stats["min"]
    item = spread([a - b for a, b in zip(runs["graph_item_us_per_token"], runs["graph_us_per_token"])])
    eager_item = spread([a - b for a, b in zip(runs["eager_item_us_per_token"], runs["eager_us_per_token"])])
    return {
        **out,
        "repeats": repeats,
        **_flat("item_cost_us", item),
        **_flat("eager_item_cost_us", eager_item),
        "graph_tokens_match_eager": same,
        "note": "each token's step (decode, write token, advance position) is one graph; the four loops run "
                "interleaved, `repeats` times each; figures are medians, _min/_max the range over the repeats; "
                "item_cost_us is the per-repeat difference with and without the sync",
    }


def toy_costs(data: dict[str, Any]) -> dict[str, Any]:
    """The four prices the toy derives from this benchmark (median, min, max each, and where each comes from)."""
    chain = {r["kernels"]: r for r in data["chain"]["rows"]}
    b1 = next(r for r in data["decode"]["rows"] if r["batch"] == 1)
    item = data["item_sync"]
    n_eager = 100 if 100 in chain else max(chain)
    n_graph = 1000 if 1000 in chain else max(chain)

    def pick(row: dict[str, Any], key: str, scale: float = 1.0) -> dict[str, float]:
        return {"median": row[key] / scale, "min": row[f"{key}_min"] / scale, "max": row[f"{key}_max"] / scale}

    return {
        "eager_launch_us": {**pick(chain[n_eager], "eager_us_per_kernel"),
                            "from": f"chain of {n_eager} x.add_(1.0), eager, µs per kernel"},
        "kernel_in_model_us": {**pick(b1, "eager_step_us", b1["kernels"]),
                               "from": f"tiny GPT decode step, batch 1, eager step time / {b1['kernels']:.0f} kernels"},
        "graph_node_us": {**pick(chain[n_graph], "graph_us_per_node"),
                          "from": f"chain of {n_graph} x.add_(1.0), graph replay, µs per node"},
        "graph_launch_us": {**pick(chain[min(chain)], "graph_step_us"),
                            "from": f"chain of {min(chain)} kernel, one graph replay (launch and its one kernel)"},
        "item_sync_us": {**pick(item, "item_cost_us"),
                         "from": "greedy decode at batch 1, graph replay per token, with minus without one .item()"},
        "kernel_floor_b1_us": {"median": b1["kernel_time_us"], "min": b1["kernel_time_us"],
                               "max": b1["kernel_time_us"], "from": METHOD["floor"]},
    }


def check_targets(data: dict[str, Any]) -> dict[str, Any]:
    """The issue's performance targets, each with the measured figure (median, min, max) and whether the median met it."""
    b1 = next(r for r in data["decode"]["rows"] if r["batch"] == 1)
    chain = {r["kernels"]: r for r in data["chain"]["rows"]}
    out: dict[str, Any] = {}

    def target(name: str, row: dict[str, Any], key: str, bound: str, value: float) -> None:
        stats = {"value": row[key], "min": row.get(f"{key}_min"), "max": row.get(f"{key}_max")}
        met = row[key] <= value if bound == "max" else row[key] >= value
        out[name] = {**stats, bound + "_target": value, "met": met}

    target("decode_b1_graph_over_kernel_time", b1, "graph_over_kernel_time", "max",
           TARGETS["decode_b1_graph_over_kernel_time_max"])
    target("decode_b1_eager_over_graph", b1, "speedup", "min", TARGETS["decode_b1_eager_over_graph_min"])
    if 1000 in chain:
        target("chain_1000_graph_us_per_node", chain[1000], "graph_us_per_node", "max",
               TARGETS["chain_1000_graph_us_per_node_max"])
    target("bucketed_speedup", data["bucketed"], "speedup", "min", TARGETS["bucketed_speedup_min"])
    return out


def _pm(row: dict[str, Any], key: str, fmt: str = ".0f") -> str:
    """'median [min..max]' of one measured key."""
    return f"{row[key]:{fmt}} [{row[key + '_min']:{fmt}}..{row[key + '_max']:{fmt}}]"


def summary_lines(data: dict[str, Any]) -> list[str]:
    """A short human summary of a benchmark result: medians with [min..max] over the repeats."""
    p = data["provenance"]
    lines = [f"{p['gpu_name']} driver {p['driver']} CUDA {p['cuda']} torch {p['torch']} {p['date_utc']}",
             "medians over interleaved repeats, [min..max] across repeats"]
    for r in data["chain"]["rows"]:
        if r["kernels"] in (1, 10, 100, 1000):
            lines.append(f"chain N={r['kernels']}: eager {_pm(r, 'eager_us_per_kernel', '.2f')} us/kernel, "
                         f"graph {_pm(r, 'graph_us_per_node', '.2f')} us/node, {_pm(r, 'speedup', '.1f')}x")
    for r in data["decode"]["rows"]:
        lines.append(f"decode b={r['batch']}: {r['kernels']:.0f} kernels, floor {r['kernel_time_us']:.0f} us, "
                     f"eager {_pm(r, 'eager_step_us')} us, graph {_pm(r, 'graph_step_us')} us, "
                     f"{_pm(r, 'speedup', '.1f')}x, graph/floor {_pm(r, 'graph_over_kernel_time', '.3f')}, "
                     f"pool {r['graph_memory_allocated_bytes'] / 2**20:.2f} MiB allocated, match={r['replay_matches_eager']}")
    b = data["bucketed"]
    lines.append(f"bucketed 1..64 x{b['stream']['n_batches']}: {_pm(b, 'speedup', '.2f')}x eager throughput, "
                 f"waste {b['padding']['waste_fraction']:.1%}, shared pool "
                 f"{sum(m['shared_pool_reserved_bytes'] for m in b['memory_per_bucket']) / 2**20:.1f} MiB reserved, "
                 f"private pools {sum(m['private_pool_reserved_bytes'] for m in b['memory_per_bucket']) / 2**20:.1f} MiB")
    i = data["item_sync"]
    lines.append(f"item(): graph {_pm(i, 'graph_us_per_token')} -> {_pm(i, 'graph_item_us_per_token')} us/token "
                 f"(cost {_pm(i, 'item_cost_us')}), eager {_pm(i, 'eager_us_per_token')} -> "
                 f"{_pm(i, 'eager_item_us_per_token')} us/token, tokens match={i['graph_tokens_match_eager']}")
    for name, c in data["costs"].items():
        lines.append(f"cost {name}: {c['median']:.2f} [{c['min']:.2f}..{c['max']:.2f}] us ({c['from']})")
    for name, t in data["targets"].items():
        bound = f"<= {t['max_target']}" if "max_target" in t else f">= {t['min_target']}"
        lines.append(f"target {name}: {t['value']:.3f} [{t['min']:.3f}..{t['max']:.3f}] {bound}: "
                     f"{'met' if t['met'] else 'MISSED'} (median)")
    for name, fact in data.get("facts", {}).items():
        if name == "mistakes":
            for key, m in fact.items():
                lines.append(f"fact mistakes.{key}: exit {m['returncode']}, {m['errors'][-1] if m['errors'] else 'no error'}")
        else:
            lines.append(f"fact {name}: {str(fact)[:300]}")
    lines.append(f"total {data['elapsed_s']:.0f} s")
    return lines


def run_all(argv: Sequence[str], quick: bool) -> dict[str, Any]:
    """Every section of the benchmark, in one dictionary ready for JSON."""
    start = time.perf_counter()
    data: dict[str, Any] = {"schema": 2, "provenance": provenance(argv, quick), "method": METHOD}
    data["chain"] = bench_chain(CHAIN_KERNELS, quick)
    data["decode"] = bench_decode(DECODE_BATCHES, quick)
    data["bucketed"] = bench_bucketed(quick)
    data["item_sync"] = bench_item_sync(quick)
    from .demos import record_facts

    data["facts"] = record_facts()  # the live demonstrations lessons 03 and 06 show, recorded for CPU machines
    data["costs"] = toy_costs(data)
    data["targets"] = check_targets(data)
    data["elapsed_s"] = time.perf_counter() - start
    return data


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: measure on the GPU and write JSON, or refuse in one line without CUDA."""
    from ..core.paths import reference_path

    def measure(args, argv: list[str]) -> list[str]:
        data = run_all(argv, args.quick)
        bench_cli.write_json(args.out, data)
        return [*summary_lines(data), f"wrote {args.out}"]

    return bench_cli.run("graphcourse.gpulib.bench", __doc__, argv, measure, out=reference_path(),
                         quick="fewer timed iterations (a smoke run)",
                         recorded="The lessons show the results recorded in data/gpu_reference.json.")


if __name__ == "__main__":
    sys.exit(main())
