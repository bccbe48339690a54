"""The course's GPU benchmark: eager against CUDA graph replay, written to data/gpu_reference.json.

Run on a CUDA machine: ``python -m graphcourse.bench [--out data/gpu_reference.json] [--quick]``.
Without CUDA it measures nothing and exits with status 2 and a one-line reason. Lessons on a CPU
read what it wrote through :mod:`graphcourse.reference`.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import platform
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

CHAIN_KERNELS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
DECODE_BATCHES = (1, 2, 4, 8, 16, 32, 64)
CHAIN_ELEMENTS = 1024
STREAM_BATCHES = 400
STREAM_SEED = 0
ITEM_TOKENS = 100
NO_CUDA_EXIT = 2
DEVICE = "cuda"

TARGETS = {
    "decode_b1_graph_over_kernel_time_max": 1.05,
    "decode_b1_eager_over_graph_min": 7.0,
    "chain_1000_graph_us_per_node_max": 1.5,
    "bucketed_speedup_min": 3.0,
}


def _driver_version() -> str | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20, check=True,
        ).stdout
        return out.strip().splitlines()[0] if out.strip() else None
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


def provenance(argv: Sequence[str], quick: bool) -> dict[str, Any]:
    """Where and how the figures were measured (no host name)."""
    import torch

    props = torch.cuda.get_device_properties(0)
    return {
        "gpu_name": torch.cuda.get_device_name(0),
        "gpu_memory_bytes": props.total_memory,
        "multiprocessors": props.multi_processor_count,
        "driver": _driver_version(),
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "date_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": shlex.join(["python", "-m", "graphcourse.bench", *argv]),
        "quick": quick,
        "timing": "mean over back-to-back calls between two torch.cuda.Event records after warm-up; "
        "kernel time summed from torch.profiler (CUPTI) kernel records",
    }


def bench_chain(kernel_counts: Sequence[int], quick: bool, progress: bool | None = None) -> dict[str, Any]:
    """A chain of N tiny in-place adds on 1024 floats: eager launches against one graph replay."""
    import torch
    from tqdm.auto import tqdm

    from .gpu import capture, cuda_time_us, show_progress

    x = torch.zeros(CHAIN_ELEMENTS, device=DEVICE)
    scale = 4 if quick else 1
    rows = []
    for n in tqdm(kernel_counts, desc="chain of N kernels", unit="N", disable=not show_progress(progress)):

        def chain(n: int = n) -> None:
            for _ in range(n):
                x.add_(1.0)

        eager_us = cuda_time_us(chain, iters=max(5, min(200, 20_000 // n) // scale), warmup=3)
        graph = capture(chain, warmup_iters=1)
        graph_us = cuda_time_us(graph.replay, iters=max(50, min(2000, 200_000 // n) // scale), warmup=10)
        rows.append({
            "kernels": n,
            "eager_step_us": eager_us,
            "graph_step_us": graph_us,
            "eager_us_per_kernel": eager_us / n,
            "graph_us_per_node": graph_us / n,
            "speedup": eager_us / graph_us,
            "capture_s": graph.capture_s,
        })
        del graph
    return {"elements": CHAIN_ELEMENTS, "dtype": "float32", "op": "x.add_(1.0)", "rows": rows}


def _model(config: Any = None) -> Any:
    from .gpu import GPTConfig, TinyGPT

    return TinyGPT(config or GPTConfig()).to(DEVICE)


def bench_decode(batches: Sequence[int], quick: bool, progress: bool | None = None) -> dict[str, Any]:
    """One decode step of the tiny GPT per batch size: eager, graph replay, kernels and their summed GPU time."""
    import dataclasses

    import torch
    from tqdm.auto import tqdm

    from .gpu import as_device_position, capture, cuda_time_us, kernel_profile, show_progress

    model = _model()
    cache = model.new_cache(max(batches))
    pos = as_device_position(16, DEVICE)
    scale = 4 if quick else 1
    rows = []
    for b in tqdm(batches, desc="decode step eager vs graph", unit="batch", disable=not show_progress(progress)):
        view = cache.batch_view(b)
        tokens = torch.randint(0, model.config.vocab_size, (b,), device=DEVICE)

        def step(tok: torch.Tensor, view: Any = view) -> torch.Tensor:
            return model.decode_step(tok, pos, view)

        eager_us = cuda_time_us(lambda: step(tokens), iters=200 // scale, warmup=20)
        graph = capture(step, tokens)
        graph_us = cuda_time_us(graph.replay, iters=500 // scale, warmup=20)
        matches = bool(torch.equal(graph.replay().clone(), step(tokens)))
        eager_prof = kernel_profile(lambda: step(tokens), iters=5)
        graph_prof = kernel_profile(graph.replay, iters=20)
        floor_us = graph_prof.kernel_time_us if graph_prof.kernels_per_call else eager_prof.kernel_time_us
        rows.append({
            "batch": b,
            "kernels": eager_prof.kernels_per_call,
            "kernel_time_us": eager_prof.kernel_time_us,
            "graph_kernels": graph_prof.kernels_per_call,
            "graph_kernel_time_us": graph_prof.kernel_time_us,
            "eager_step_us": eager_us,
            "graph_step_us": graph_us,
            "speedup": eager_us / graph_us,
            "graph_over_kernel_time": graph_us / floor_us if floor_us else None,
            "graph_memory_reserved_bytes": graph.memory.reserved_bytes,
            "replay_matches_eager": matches,
            "top_kernels_us": [[name, us] for name, us in graph_prof.top_kernels or eager_prof.top_kernels],
        })
        del graph
    return {"config": dataclasses.asdict(model.config), "dtype": "float32", "position": 16, "rows": rows}


def bench_bucketed(quick: bool, progress: bool | None = None) -> dict[str, Any]:
    """The bucketed runner on a seeded mixed stream of batch sizes 1..64 against eager decode steps; memory added per capture."""
    import torch

    from toygraph.buckets import padding_report, powers_of_two

    from .gpu import BucketedRunner, as_device_position, batch_sizes_stream, capture_memory

    model = _model()
    max_batch = 64
    buckets = powers_of_two(max_batch)
    stream = batch_sizes_stream(STREAM_BATCHES // (4 if quick else 1), max_batch, seed=STREAM_SEED)
    cache = model.new_cache(max_batch)
    pos = as_device_position(16, DEVICE)
    tokens = torch.randint(0, model.config.vocab_size, (max_batch,), device=DEVICE)

    def step(tok: torch.Tensor) -> torch.Tensor:
        return model.decode_step(tok, pos, cache.batch_view(tok.shape[0]))

    memory = capture_memory(step, tokens, buckets)  # before the runner's graphs exist; fair in any order
    t0 = time.perf_counter()
    runner = BucketedRunner(step, tokens, buckets, share_pool=True, progress=progress)
    capture_s = time.perf_counter() - t0
    # Padded replay and eager give the same next tokens (up to float ties: compared, not asserted).
    sizes = range(1, max_batch + 1)
    matching = sum(int((runner(tokens[:n]) == step(tokens[:n])).sum()) for n in sizes)

    def run(fn: Callable[[torch.Tensor], Any]) -> float:
        torch.cuda.synchronize()
        start = time.perf_counter()
        for n in stream:
            fn(tokens[:n])
        torch.cuda.synchronize()
        return time.perf_counter() - start

    run(step), run(runner)  # warm-up: cuBLAS heuristics for every eager shape, first replays
    eager_s = min(run(step) for _ in range(2))
    graph_s = min(run(runner) for _ in range(2))
    rows = sum(stream)
    pad = padding_report(stream, buckets)
    return {
        "buckets": list(buckets),
        "stream": {"n_batches": len(stream), "seed": STREAM_SEED, "min": 1, "max": max_batch, "rows": rows},
        "eager_s": eager_s,
        "graph_s": graph_s,
        "eager_rows_per_s": rows / eager_s,
        "graph_rows_per_s": rows / graph_s,
        "speedup": eager_s / graph_s,
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
        "note": "memory_per_bucket: bytes reserved by each capture (graphcourse.gpu.capture_memory), after one-time "
        "costs were paid by throwaway captures; largest bucket captured first, so with a shared pool smaller buckets "
        "reuse its memory",
    }


def bench_item_sync(quick: bool) -> dict[str, Any]:
    """Greedy decoding at batch 1, one graph per token, with and without one .item() per token (a host sync)."""
    import torch

    from .gpu import as_device_position, capture

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
    repeats = 3 if quick else 7
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
    median = {name: statistics.median(values) for name, values in runs.items()}
    same = tokens["graph_us_per_token"] == tokens["eager_us_per_token"] == tokens["graph_item_us_per_token"]
    return {
        "batch": 1,
        "tokens": n_tokens,
        **median,
        **{name.replace("_us_per_token", "_spread_us"): max(v) - min(v) for name, v in runs.items()},
        "repeats": repeats,
        "item_cost_us": median["graph_item_us_per_token"] - median["graph_us_per_token"],
        "graph_tokens_match_eager": same,
        "note": "each token's step (decode, write token, advance position) is one graph; the four loops run "
                "interleaved, `repeats` times each; figures are medians, spreads are max - min over the repeats",
    }


def check_targets(data: dict[str, Any]) -> dict[str, Any]:
    """The issue's performance targets, each with the measured figure and whether it was met."""
    b1 = next(r for r in data["decode"]["rows"] if r["batch"] == 1)
    chain = {r["kernels"]: r for r in data["chain"]["rows"]}
    out: dict[str, Any] = {}
    ratio = b1["graph_over_kernel_time"]
    out["decode_b1_graph_over_kernel_time"] = {"value": ratio, "max": TARGETS["decode_b1_graph_over_kernel_time_max"],
                                               "met": ratio is not None and ratio <= TARGETS["decode_b1_graph_over_kernel_time_max"]}
    out["decode_b1_eager_over_graph"] = {"value": b1["speedup"], "min": TARGETS["decode_b1_eager_over_graph_min"],
                                         "met": b1["speedup"] >= TARGETS["decode_b1_eager_over_graph_min"]}
    if 1000 in chain:
        v = chain[1000]["graph_us_per_node"]
        out["chain_1000_graph_us_per_node"] = {"value": v, "max": TARGETS["chain_1000_graph_us_per_node_max"],
                                               "met": v <= TARGETS["chain_1000_graph_us_per_node_max"]}
    s = data["bucketed"]["speedup"]
    out["bucketed_speedup"] = {"value": s, "min": TARGETS["bucketed_speedup_min"], "met": s >= TARGETS["bucketed_speedup_min"]}
    return out


def summary_lines(data: dict[str, Any]) -> list[str]:
    """A short human summary of a benchmark result."""
    p = data["provenance"]
    lines = [f"{p['gpu_name']} driver {p['driver']} CUDA {p['cuda']} torch {p['torch']} {p['date_utc']}"]
    for r in data["chain"]["rows"]:
        if r["kernels"] in (10, 100, 1000):
            lines.append(f"chain N={r['kernels']}: eager {r['eager_us_per_kernel']:.2f} us/kernel, "
                         f"graph {r['graph_us_per_node']:.2f} us/node ({r['speedup']:.1f}x)")
    for r in data["decode"]["rows"]:
        lines.append(f"decode b={r['batch']}: {r['kernels']:.0f} kernels, {r['kernel_time_us']:.0f} us kernels "
                     f"(graph {r['graph_kernel_time_us']:.0f}), eager {r['eager_step_us']:.0f} us, "
                     f"graph {r['graph_step_us']:.0f} us ({r['speedup']:.1f}x), graph/kernels "
                     f"{r['graph_over_kernel_time'] or float('nan'):.3f}, match={r['replay_matches_eager']}")
    b = data["bucketed"]
    lines.append(f"bucketed 1..64 x{b['stream']['n_batches']}: {b['speedup']:.2f}x eager throughput, "
                 f"waste {b['padding']['waste_fraction']:.1%}, shared pool {sum(m['shared_pool_reserved_bytes'] for m in b['memory_per_bucket']) / 2**20:.1f} MiB, "
                 f"private pools {sum(m['private_pool_reserved_bytes'] for m in b['memory_per_bucket']) / 2**20:.1f} MiB")
    i = data["item_sync"]
    lines.append(f"item(): graph {i['graph_us_per_token']:.0f} -> {i['graph_item_us_per_token']:.0f} us/token, "
                 f"eager {i['eager_us_per_token']:.0f} -> {i['eager_item_us_per_token']:.0f} us/token, "
                 f"tokens match={i['graph_tokens_match_eager']}")
    for name, t in data["targets"].items():
        bound = f"<= {t['max']}" if "max" in t else f">= {t['min']}"
        lines.append(f"target {name}: {t['value']:.3f} {bound}: {'met' if t['met'] else 'MISSED'}")
    lines.append(f"total {data['elapsed_s']:.0f} s")
    return lines


def run_all(argv: Sequence[str], quick: bool) -> dict[str, Any]:
    """Every section of the benchmark, in one dictionary ready for JSON."""
    start = time.perf_counter()
    data: dict[str, Any] = {"schema": 1, "provenance": provenance(argv, quick)}
    data["chain"] = bench_chain(CHAIN_KERNELS, quick)
    data["decode"] = bench_decode(DECODE_BATCHES, quick)
    data["bucketed"] = bench_bucketed(quick)
    data["item_sync"] = bench_item_sync(quick)
    data["targets"] = check_targets(data)
    data["elapsed_s"] = time.perf_counter() - start
    return data


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: measure on the GPU and write JSON, or refuse in one line without CUDA."""
    argv = list(sys.argv[1:] if argv is None else argv)
    from .reference import default_reference_path

    parser = argparse.ArgumentParser(prog="python -m graphcourse.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=default_reference_path(), help="JSON file to write")
    parser.add_argument("--quick", action="store_true", help="fewer timed iterations (a smoke run)")
    args = parser.parse_args(argv)

    import torch

    if not torch.cuda.is_available():
        print(
            "graphcourse.bench: no CUDA GPU here (torch.cuda.is_available() is False), so nothing was measured; "
            "run it on a GPU machine; lessons show the results recorded in data/gpu_reference.json",
            file=sys.stderr,
        )
        return NO_CUDA_EXIT
    data = run_all(argv, args.quick)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    for line in summary_lines(data):
        print(line)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
