"""Lesson 09's GPU benchmark: capture cost of capture-size lists, padded replay, piecewise against one full graph.

Run on a CUDA machine: ``python -m graphcourse.gpulib.bench_serving [--out data/gpu_reference.json] [--quick]``.
It UPDATES only the section "serving" of that JSON (read, replace the section, write to a
temporary file, rename it over the old one); every other section and the top-level provenance
stay as they were. The section carries its own provenance. Without CUDA it measures nothing and
exits with status 2. Lessons read the section through ``graphcourse.lessons.reference.serving_section``.
About one to two minutes on an H200, never much above three (a repeat of the lists that would start
after 150 s is skipped); ``--quick``: a few seconds.
"""

from __future__ import annotations

import gc
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

SECTION = "serving"
MAX_BATCH = 256
POSITION = 16
PIECEWISE_BATCHES = (1, 8)
REPEATS = 3
LISTS_BUDGET_S = 150.0  # no new repeat of the lists starts after this: the benchmark stays under 4 minutes
TIMING_REPEATS = 5
MODES = (("shared", True, "largest_first"), ("private", False, "largest_first"),
         ("shared_smallest_first", True, "smallest_first"))

METHOD = {
    "capture": "each list captured on the tiny GPT's decode step (d=256, 4 layers, float32), a KV cache of "
               f"{MAX_BATCH} sequences plus a scratch slot; per size: 2 eager warm-ups on the capture stream, "
               "then torch.cuda.graph; capture_s is the wall time of the whole list (warm-ups included), as an "
               "engine's 'Graph capturing finished in' log line",
    "memory": "free_drop_bytes: fall of torch.cuda.mem_get_info() free memory over the list (vLLM logs the same "
              "difference); reserved_bytes: growth of torch.cuda.memory_reserved(); pool_reserved_bytes: segments "
              "owned by the graphs' pools (memory_snapshot); each read after torch.cuda.empty_cache() before and after "
              "the list (so the warm-ups' cached blocks are not counted, the graphs' pools are), one-time costs "
              "paid first",
    "modes": "shared: one pool, largest size first (vLLM, SGLang); private: a pool per graph, largest first; "
             "shared_smallest_first: one pool, smallest first",
    "repeats": "lists x modes interleaved, repeated; every figure is the median with _min and _max over repeats",
    "piecewise": "per decode step, mean µs of back-to-back steps between two torch.cuda.Event records (CPU cost "
                 "included); eager, one full graph and piecewise (n_layers+1 graphs, attention eager) interleaved "
                 "in every repeat",
}


def provenance(argv: Sequence[str], quick: bool) -> dict[str, Any]:
    """Where and how the section was measured (no host name)."""
    return bench_cli.provenance("graphcourse.gpulib.bench_serving", argv, quick=quick)


from . import bench_cli
from .bench import spread, summarise as flat  # the course's one summary of repeats: median, min and max
from .bench_cli import NO_CUDA_EXIT  # noqa: F401  (the exit code tests read here)


def update_section(path: Path, section: dict[str, Any], name: str = SECTION) -> dict[str, Any]:
    """Replace one section of a JSON results file, keep every other key, write atomically; returns the new data.

    A missing file is created with the section's provenance at the top level too (the readers
    require one). A file that is not a JSON object is refused, never overwritten.
    """
    return bench_cli.update_json(path, {name: section}, new_file={"provenance": dict(
        section.get("provenance", {}), note=f"file created by the '{name}' benchmark")})


def bench_lists(lists: dict[str, tuple[int, ...]], repeats: int, progress: bool | None = None, *,
                device: str = "cuda", capture_list: Callable[..., Any] | None = None,
                budget_s: float = LISTS_BUDGET_S) -> dict[str, Any]:
    """Capture every list in every mode, interleaved, `repeats` times: wall time and memory, medians and spreads.

    A repeat that would start after `budget_s` seconds is skipped (``repeats_done`` says how many ran),
    so the whole benchmark stays within its time on a slow machine. Per-size rows come from the list
    with the most sizes, captured with a pool per graph. `capture_list` defaults to
    :func:`graphcourse.gpulib.serving.capture_list` (tests pass a fake, with ``device="cpu"``).
    """
    from tqdm.auto import tqdm

    from .graphs import GPTConfig, TinyGPT, as_device_position, show_progress

    real = capture_list is None
    if real:
        from .serving import capture_list, memory_now
    model = TinyGPT(GPTConfig()).to(device)
    cache = model.new_cache(MAX_BATCH)
    pos = as_device_position(POSITION, device)
    # one-time costs (cuBLAS workspaces of the capture stream, allocator warm-up) paid before measuring
    for _ in range(2):
        capture_list(model, cache, pos, (1, 8, MAX_BATCH), measure_memory=False).release()
    if real:
        memory_now()
    samples: dict[tuple[str, str], list[Any]] = {(n, m): [] for n in lists for m, _, _ in MODES}
    per_size_ms: dict[int, list[float]] = {}
    per_size_pool: dict[int, int] = {}
    densest = max(lists, key=lambda n: len(lists[n]))
    jobs = [(r, n, m) for r in range(repeats) for n in lists for m in MODES]
    start, repeats_done = time.perf_counter(), 0
    for r, name, (mode, shared, order) in tqdm(jobs, desc="capturing lists", unit="list",
                                               disable=not show_progress(progress)):
        if r >= repeats_done:  # the first job of a new repeat
            if r > 0 and time.perf_counter() - start > budget_s:
                break
            repeats_done = r + 1
        got = capture_list(model, cache, pos, lists[name], order=order, shared_pool=shared)
        samples[(name, mode)].append(got)
        if name == densest and mode == "private":
            for b, s in got.per_size_s.items():
                per_size_ms.setdefault(b, []).append(1000.0 * s)
            per_size_pool.update(got.per_size_pool_bytes)
        got.release()
        samples[(name, mode)][-1] = (got.capture_s, got.memory)
        del got
        if real:
            import torch

            gc.collect()
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
    rows = []
    for name, sizes in lists.items():
        row: dict[str, Any] = {"name": name, "sizes": list(sizes), "n_sizes": len(sizes)}
        for mode, _, _ in MODES:
            got = samples[(name, mode)]
            entry: dict[str, Any] = {}
            entry.update(flat("capture_s", [s for s, _ in got]))
            for key in ("free_drop_bytes", "reserved_bytes", "pool_reserved_bytes", "allocated_bytes"):
                entry.update(flat(key, [getattr(m, key) for _, m in got]))
            row[mode] = entry
        rows.append(row)
    per_size = [{"size": b, "capture_ms": spread(v)["median"], "private_pool_bytes": per_size_pool.get(b, 0)}
                for b, v in sorted(per_size_ms.items())]
    return {"max_batch": MAX_BATCH, "repeats": repeats, "repeats_done": repeats_done, "lists": rows,
            "per_size": per_size, "per_size_from": densest}


def _timed(fn: Callable[[], Any], iters: int) -> float:
    from .graphs import cuda_time_us

    return cuda_time_us(fn, iters=iters, warmup=10)


def bench_piecewise(repeats: int, iters: int, *, device: str = "cuda", capture: bool = True,
                    timer: Callable[[Callable[[], Any], int], float] | None = None) -> dict[str, Any]:
    """Eager, one full graph and piecewise (attention eager) per decode step at batch 1 and 8; tokens compared.

    ``device="cpu", capture=False`` with a fake `timer` runs the same code without a GPU (tests).
    """
    import torch

    from .graphs import EagerStep, GPTConfig, TinyGPT, as_device_position
    from .serving import PiecewiseDecoder, _example, decode_step_fn, full_graph_step

    timer = timer or _timed
    model = TinyGPT(GPTConfig()).to(device)
    pos = as_device_position(POSITION, device)
    rows = []
    for b in PIECEWISE_BATCHES:
        cache = model.new_cache(b)
        tokens = torch.randint(0, model.config.vocab_size, (b,), device=device,
                               generator=torch.Generator(device=device).manual_seed(b))
        slots = torch.arange(b, device=device)
        if capture:
            full = full_graph_step(model, cache, pos, b)
        else:
            full = EagerStep.build(decode_step_fn(model, cache, pos), *_example(b, cache))
        pw = PiecewiseDecoder(model, cache, pos, b, capture=capture)
        eager_tokens = model.decode_step(tokens, pos, cache, slots=slots).clone()
        full_tokens = full.replay(tokens, slots).clone()
        pw_tokens = pw(tokens, slots)
        t: dict[str, list[float]] = {"eager": [], "full_graph": [], "piecewise": []}
        for _ in range(repeats):
            t["eager"].append(timer(lambda: model.decode_step(tokens, pos, cache, slots=slots), iters))
            t["full_graph"].append(timer(lambda: full.replay(tokens, slots), iters))
            t["piecewise"].append(timer(lambda: pw(tokens, slots), iters))
        row: dict[str, Any] = {"batch": b, "graphs_per_step_piecewise": pw.graph_count,
                               "eager_attention_calls_per_step": model.config.n_layers,
                               "full_matches_eager": bool(torch.equal(full_tokens, eager_tokens)),
                               "piecewise_matches_eager": bool(torch.equal(pw_tokens, eager_tokens))}
        for k, v in t.items():
            row.update(flat(f"{k}_us", v))
        row.update(flat("piecewise_over_full", [p / f for p, f in zip(t["piecewise"], t["full_graph"])]))
        rows.append(row)
        del full, pw
    return {"rows": rows, "repeats": repeats, "iters": iters}


def padded_replay_fact(device: str = "cuda", capture: bool = True) -> dict[str, Any]:
    """A batch of 5 replayed through the graph of 8: real rows equal eager, padded rows write only the scratch slot."""
    import torch

    from .graphs import GPTConfig, TinyGPT
    from .serving import ServingDecoder, clone_cache, kv_rows_touched

    model = TinyGPT(GPTConfig()).to(device)
    server = ServingDecoder(model, (1, 2, 4, 8), max_batch=8, position=POSITION, capture=capture)
    server.cache.k.normal_()  # live sequences' rows hold something a stray write would change
    server.cache.v.normal_()
    tokens = torch.tensor([5, 17, 99, 3, 42], device=device)
    slots = torch.tensor([0, 1, 2, 3, 4], device=device)
    reference = clone_cache(server.cache)
    expected = model.decode_step(tokens, server.pos, clone_cache(server.cache), slots=slots)  # unpadded, 5 rows
    pad = server.cache.pad_slot
    padded = model.decode_step(torch.cat([tokens, torch.zeros(3, dtype=torch.long, device=device)]), server.pos,
                               reference, slots=torch.cat([slots, torch.full((3,), pad, device=device)]))[:5]
    before = clone_cache(server.cache)
    got = server(tokens, slots)
    touched = kv_rows_touched(before, server.cache)
    diff = max(float((server.cache.k[:, :5] - reference.k[:, :5]).abs().max()),
               float((server.cache.v[:, :5] - reference.v[:, :5]).abs().max()))
    return {"batch": 5, "padded_to": server.dispatched[-1][2], "pad_slot": server.cache.pad_slot,
            "tokens_match_eager": bool(torch.equal(got, expected)),
            "tokens_match_eager_padded_batch": bool(torch.equal(got, padded)), "kv_rows_max_abs_diff": diff,
            "kv_rows_match_eager": diff <= 1e-5,
            "slots_written": touched, "live_slots_untouched": [s for s in (5, 6, 7) if s not in touched]}


def run_section(argv: Sequence[str], quick: bool) -> dict[str, Any]:
    """The whole "serving" section."""
    from .graphs import GPTConfig
    import dataclasses

    from .capture_sizes import SOURCES, candidate_lists

    start = time.perf_counter()
    lists = candidate_lists(MAX_BATCH)
    if quick:
        lists = {k: v for k, v in lists.items() if k in ("powers of two", "every 16", "vLLM default")}
    sec: dict[str, Any] = {"schema": 1, "provenance": provenance(argv, quick), "method": METHOD,
                           "model": dataclasses.asdict(GPTConfig()), "position": POSITION, "sources": SOURCES}
    sec["padded_replay"] = padded_replay_fact()
    sec["piecewise"] = bench_piecewise(3 if quick else TIMING_REPEATS, 50 if quick else 200)
    sec.update(bench_lists(lists, 1 if quick else REPEATS))
    sec["elapsed_s"] = time.perf_counter() - start
    return sec


def summary_lines(sec: dict[str, Any]) -> list[str]:
    """A few lines for the terminal."""
    out = [f"padded replay: {sec['padded_replay']}"]
    for r in sec["piecewise"]["rows"]:
        out.append(f"batch {r['batch']}: eager {r['eager_us']:.0f} µs, full graph {r['full_graph_us']:.0f} µs, "
                   f"piecewise {r['piecewise_us']:.0f} µs ({r['piecewise_over_full']:.2f}x full)")
    for r in sec["lists"]:
        s, p = r["shared"], r["private"]
        out.append(f"{r['name']:<15} {r['n_sizes']:>4} sizes: {s['capture_s']:.2f} s, shared "
                   f"{s['free_drop_bytes'] / 2**20:.0f} MiB, private {p['free_drop_bytes'] / 2**20:.0f} MiB")
    out.append(f"total {sec['elapsed_s']:.0f} s")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: measure on the GPU and update the section, or refuse in one line without CUDA."""
    from ..core.paths import reference_path

    def measure(args, argv: list[str]) -> list[str]:
        sec = run_section(argv, args.quick)
        update_section(args.out, sec)
        return [*summary_lines(sec), f"updated section '{SECTION}' of {args.out}"]

    return bench_cli.run("graphcourse.gpulib.bench_serving", __doc__, argv, measure, out=reference_path(),
                         out_help="JSON file to update", quick="fewer lists and repeats (a smoke run)",
                         recorded="Lesson 09 shows the section recorded in data/gpu_reference.json.")


if __name__ == "__main__":
    sys.exit(main())
