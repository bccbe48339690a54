"""Decode paths of lessons 07 and 08 on a GPU, written to data/decode_paths.json.

Run on a CUDA machine: ``python -m graphcourse.gpulib.bench_decode_paths [--out data/decode_paths.json] [--quick]``.
For each batch size it greedy-decodes the same run of tokens with the course's tiny GPT along
every path: eager; one graph per step (K = 1); K steps per graph; torch.compile default mode
(fused kernels, launched one by one); reduce-overhead (fused kernels in CUDAGraph Trees); the
default-mode kernels captured K steps per graph by hand. Paths run interleaved, ``repeats``
times each, so a slow spell of the machine hits them alike; each figure is the median over
the repeats, with its spread (max - min). It also records compile and capture times, graph
memory, an IF-node loop that skips finished sequences, profiler traces of a few steps
(drawn by lessons as the toy's timeline) and the failure demos of lesson 07 run in a child.
Without CUDA it measures nothing and exits with status 2 and a one-line reason.

Sections (``--sections``): paths (this process), compiled_graphs (a child process, so that a crash
there cannot poison the rest), traces (a child process too), demos (GRAPHCOURSE_DEMO_PARTS=1,5
re-records some parts only),
if_node (last: a refused conditional capture could leave the CUDA context unusable). A section that
fails is recorded as ``<section>_error`` and the others go on.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from ..core.paths import DECODE_PATHS_FILE as DATA_FILE, decode_paths_path
from . import bench_cli
from .bench_cli import NO_CUDA_EXIT  # noqa: F401  (the exit code tests read here)

BATCHES = (1, 8)
KS = (1, 4, 16, 32)
COMPILED_KS = (1, 16)
TOKENS = 96
REPEATS = 5
DEVICE = "cuda"  # tests set "cpu" to run the same code without graphs
TARGET_RATIO_MAX = 0.9  # issue 12: best path at or below 0.9x reduce-overhead's per-token time (reported)


def default_path() -> Path:
    """data/decode_paths.json of the course folder."""
    return decode_paths_path()


TIMING = (f"per path and repeat: {bench_cli.DECODE_TIMING}; issue_us_per_token = wall time until the CPU had issued "
          "every launch (before that synchronize), over tokens. Paths interleaved; median and spread (max - min) over "
          "the repeats.")
"""How the figures are timed, as the provenance records it."""


def provenance(argv: Sequence[str], quick: bool) -> dict[str, Any]:
    """Where and how the figures were measured (no host name)."""
    return bench_cli.provenance("graphcourse.gpulib.bench_decode_paths", argv, quick=quick, timing=TIMING)


def _allow_recompiles() -> None:
    """Each path compiles the step for its own cache: raise dynamo's per-function limit so none falls back to eager."""
    import torch

    for name in ("cache_size_limit", "recompile_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, 64)


class Path_:
    """One decode path: how to reset it and how to issue `n` tokens (returns the tokens, on the device)."""

    def __init__(self, name: str, reset: Callable[[], None], issue: Callable[[int], Any]) -> None:
        self.name, self.reset, self.issue = name, reset, issue


def _sync() -> None:
    import torch

    if DEVICE == "cuda":
        torch.cuda.synchronize()


def _time_run(path: Path_, n: int) -> tuple[float, float, Any]:
    path.reset()
    _sync()
    start = time.perf_counter()
    tokens = path.issue(n)
    issued = time.perf_counter()
    _sync()
    done = time.perf_counter()
    return (done - start) * 1e6 / n, (issued - start) * 1e6 / n, tokens


@contextlib.contextmanager
def _stage(what: str) -> Iterator[None]:
    """Name the stage in any error raised inside it (each stage ends in a synchronize, so an
    asynchronous CUDA error surfaces in the stage that caused it, not in a later one)."""
    try:
        yield
    except Exception as exc:
        raise RuntimeError(f"during {what}: {type(exc).__name__}: {exc}") from exc


def _stats(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "spread": max(values) - min(values),
            "min": min(values), "max": max(values)}


def _loop_path(name: str, model: Any, batch: int, make_step: Callable[..., Callable[[], Any]],
               clone: bool) -> tuple[Path_, Any]:
    import torch

    from .graphs import as_device_position

    cache = model.new_cache(batch)
    tokens = torch.zeros(batch, dtype=torch.long, device=DEVICE)
    pos = as_device_position(0, DEVICE)
    step = make_step(model, cache, tokens, pos)

    def reset() -> None:
        cache.reset_()
        tokens.zero_()
        pos.zero_()

    def issue(n: int) -> Any:
        outs = [step().clone() if clone else step() for _ in range(n)]
        return torch.stack(outs, dim=1)

    return Path_(name, reset, issue), step


def _decoder_path(name: str, decoder: Any) -> Path_:
    def reset() -> None:
        decoder.reset()

    return Path_(name, reset, decoder.generate)


def build_paths(model: Any, batch: int, ks: Sequence[int], compiled_ks: Sequence[int],
                notes: dict[str, Any], core: bool = True) -> list[Path_]:
    """The decode paths at one batch size, compiled and captured (their one-time costs written into `notes`).

    `core`: eager, K steps per graph for each K in `ks`, default mode and reduce-overhead; without
    it only one graph per step and reduce-overhead, as references for the compiled graphs. Then the
    default-mode kernels captured K steps per graph for each K in `compiled_ks`. Each path runs once
    and synchronises as it is built, so an error names the path that caused it.
    """
    from .compiled import compiled_decode_step, compiled_loop_step, eager_loop_step, timed_first_call
    from .device_loop import MultiStepDecoder, graph_pool_bytes

    paths: list[Path_] = []

    def checked(path: Path_) -> Path_:
        try:
            _time_run(path, 2)
        except Exception as exc:
            raise RuntimeError(f"while building path {path.name!r} at batch {batch}: "
                               f"{type(exc).__name__}: {exc}") from exc
        paths.append(path)
        return path

    if core:
        checked(_loop_path("eager", model, batch, eager_loop_step, clone=False)[0])
    for k in ks if core else (1,):
        dec = MultiStepDecoder(model, batch, k)
        notes[f"graph_k{k}"] = {"capture_s": dec.capture_s, **dec.memory}
        checked(_decoder_path(f"graph_k{k}", dec))

    if core:  # torch.compile, default mode: fused kernels, launched one by one
        default, step = _loop_path("compiled_default", model, batch,
                                   lambda m, c, t, p: compiled_loop_step(m, c, t, p, mode="default"),
                                   clone=False)
        _, seconds = timed_first_call(step, _sync)
        notes["compiled_default"] = {"compile_s": seconds}
        checked(default)

    # torch.compile, reduce-overhead: the same kernels inside CUDAGraph Trees
    reduce, step = _loop_path("reduce_overhead", model, batch,
                              lambda m, c, t, p: compiled_loop_step(m, c, t, p, mode="reduce-overhead"),
                              clone=True)
    skips_before = _cudagraph_skips()
    _, seconds = timed_first_call(step, _sync)
    _, record_s = timed_first_call(lambda: (step(), step()), _sync)
    notes["reduce_overhead"] = {"compile_s": seconds, "warmup_and_record_s": record_s,
                                "cudagraph_skips": _cudagraph_skips() - skips_before,
                                **(_trees_pool_bytes(graph_pool_bytes) if DEVICE == "cuda" else {})}
    checked(reduce)

    # the default-mode kernels captured K steps per graph by hand
    compiled_decode = compiled_decode_step(model)

    for k in compiled_ks:
        start = time.perf_counter()
        try:
            dec = MultiStepDecoder(model, batch, k, step=compiled_decode)
        except Exception as exc:
            raise RuntimeError(f"while capturing path 'compiled_graph_k{k}' at batch {batch}: "
                               f"{type(exc).__name__}: {exc}") from exc
        notes[f"compiled_graph_k{k}"] = {"capture_s": dec.capture_s, "compile_and_capture_s":
                                         time.perf_counter() - start, **dec.memory}
        checked(_decoder_path(f"compiled_graph_k{k}", dec))
    return paths


def _cudagraph_skips() -> int:
    import torch

    return int(torch._dynamo.utils.counters["inductor"]["cudagraph_skips"])


def _trees_pool_bytes(graph_pool_bytes: Callable[[Any], dict[str, int]]) -> dict[str, Any]:
    """Memory of CUDAGraph Trees' one pool (an internal of torch._inductor.cudagraph_trees, read only)."""
    try:
        from torch._inductor import cudagraph_trees

        manager = cudagraph_trees.get_manager(0, create_if_none_exists=False)
        if manager is None:
            return {}
        pool = getattr(manager, "cuda_graphs_thread_pool", None)  # its name in torch 2.4 to 2.13
        if pool is None:
            return {"pool_bytes_error": "CUDAGraphTreeManager has no cuda_graphs_thread_pool in this torch"}
        return graph_pool_bytes(pool)
    except Exception as exc:  # an internal that moved: say so in the data rather than fail the run
        return {"pool_bytes_error": f"{type(exc).__name__}: {exc}"[:200]}


def bench_batch(batch: int, ks: Sequence[int], compiled_ks: Sequence[int], tokens: int, repeats: int,
                progress: bool | None = None, core: bool = True) -> dict[str, Any]:
    """Every path at one batch size: median and spread of µs per token and CPU issue µs per token."""
    import torch
    from tqdm.auto import tqdm

    from .graphs import TinyGPT, kernel_profile, show_progress

    torch._dynamo.reset()
    _allow_recompiles()
    model = TinyGPT().to(DEVICE)
    notes: dict[str, Any] = {}
    paths = build_paths(model, batch, ks, compiled_ks, notes, core=core)
    for p in paths:
        with _stage(f"the {tokens}-token warm-up of path {p.name!r} at batch {batch}"):
            _time_run(p, tokens)  # warm-up: first replays, allocator, cuBLAS heuristics
    import torch._dynamo.utils as dynamo_utils

    graphs_before = sum(dynamo_utils.counters["stats"].values())
    per_token: dict[str, list[float]] = {p.name: [] for p in paths}
    issue: dict[str, list[float]] = {p.name: [] for p in paths}
    firsts: dict[str, Any] = {}
    for _ in tqdm(range(repeats), desc=f"batch {batch}", unit="repeat", disable=not show_progress(progress)):
        for p in paths:  # interleaved
            with _stage(f"timing path {p.name!r} at batch {batch}"):
                us, issue_us, toks = _time_run(p, tokens)
            per_token[p.name].append(us)
            issue[p.name].append(issue_us)
            firsts.setdefault(p.name, toks.cpu())
    compiles_while_timing = sum(dynamo_utils.counters["stats"].values()) - graphs_before
    reference = firsts["eager" if core else "graph_k1"]
    rows = []
    for p in paths:
        same = (firsts[p.name] == reference).float().mean().item()
        rows.append({"path": p.name, "us_per_token": _stats(per_token[p.name]),
                     "issue_us_per_token": _stats(issue[p.name]),
                     "tokens_equal_to_eager" if core else "tokens_equal_to_graph_k1": same,
                     "runs_us_per_token": per_token[p.name], "runs_issue_us_per_token": issue[p.name],
                     **notes.get(p.name, {})})
    with _stage(f"counting kernels at batch {batch}"):
        kernels = _kernel_counts(model, batch, kernel_profile) if DEVICE == "cuda" and core else {}
    return {"batch": batch, "tokens": tokens, "repeats": repeats, "rows": rows, "kernels": kernels,
            "dynamo_stats_change_while_timing": compiles_while_timing}


def _kernel_counts(model: Any, batch: int, kernel_profile: Callable[..., Any]) -> dict[str, Any]:
    """Kernels per step and their summed GPU time, eager against the default-mode compiled step."""
    import torch

    from .compiled import compiled_loop_step, eager_loop_step
    from .graphs import as_device_position

    out = {}
    for name, make in (("eager", eager_loop_step),
                       ("compiled_default", lambda m, c, t, p: compiled_loop_step(m, c, t, p, mode="default"))):
        cache = model.new_cache(batch)
        tokens = torch.zeros(batch, dtype=torch.long, device=DEVICE)
        pos = as_device_position(0, DEVICE)
        step = make(model, cache, tokens, pos)

        def one() -> None:
            pos.fill_(8)  # stay inside the cache however many times the profiler calls it
            step()

        prof = kernel_profile(one, iters=5)
        out[name] = {"kernels_per_step": prof.kernels_per_call, "kernel_us_per_step": prof.kernel_time_us}
    return out


def bench_if_node(batch: int = 8, k: int = 16, replays: int = 30) -> dict[str, Any]:
    """A K-step graph whose steps sit in IF nodes: replay time with sequences running against all finished."""
    import torch

    from .device_loop import MultiStepDecoder, conditional_nodes_supported
    from .graphs import TinyGPT, cuda_time_us

    if not conditional_nodes_supported():
        return {"supported": False, "reason": f"torch {torch.__version__}, CUDA {torch.version.cuda}: "
                "no CUDAGraph.begin_capture_to_if_node or CUDA < 12.4"}
    model = TinyGPT().cuda()
    eos = model.config.vocab_size - 1
    plain = MultiStepDecoder(model, batch, k, eos_id=eos)
    guarded = MultiStepDecoder(model, batch, k, eos_id=eos, skip_done_steps=True)

    def replay_us(dec: Any, done: bool) -> list[float]:
        values = []
        for _ in range(5):
            dec.reset()
            dec.state.done.fill_(done)

            def go() -> None:
                dec.state.pos.zero_()
                dec.graph.replay()

            values.append(cuda_time_us(go, iters=replays, warmup=2))
        return values

    result: dict[str, Any] = {"supported": True, "batch": batch, "k": k, "eos_id": eos}
    for name, dec, done in (("plain_running", plain, False), ("guarded_running", guarded, False),
                            ("plain_all_done", plain, True), ("guarded_all_done", guarded, True)):
        result[name + "_us_per_launch"] = _stats(replay_us(dec, done))
    guarded.reset()
    guarded.state.done.fill_(True)
    guarded.state.pos.fill_(5)
    guarded.graph.replay()
    result["guarded_all_done_pos_after"] = int(guarded.state.pos.item())
    result["guarded_all_done_out_all_eos"] = bool((guarded.state.out == eos).all().item())
    result["capture_s"] = {"plain": plain.capture_s, "guarded": guarded.capture_s}
    result["memory"] = {"plain": plain.memory, "guarded": guarded.memory}
    return result


def bench_traces(steps: int = 2) -> dict[str, Any]:
    """Profiler traces of `steps` decode steps at batch 1: eager, one graph per step, reduce-overhead."""
    import torch

    from .compiled import compiled_loop_step, eager_loop_step
    from .device_loop import MultiStepDecoder
    from .graphs import TinyGPT, as_device_position
    from .real_trace import profile_steps, trace_summary

    torch._dynamo.reset()
    _allow_recompiles()
    model = TinyGPT().cuda()
    out = {}
    for name, make in (("eager", eager_loop_step),
                       ("reduce_overhead", lambda m, c, t, p: compiled_loop_step(m, c, t, p))):
        cache = model.new_cache(1)
        tokens = torch.zeros(1, dtype=torch.long, device=DEVICE)
        pos = as_device_position(0, DEVICE)
        step = make(model, cache, tokens, pos)

        def one(step: Callable[[], Any] = step, pos: Any = pos) -> None:
            pos.fill_(8)
            step()

        out[name] = profile_steps(one, steps=steps, warmup=4)
    dec = MultiStepDecoder(model, 1, 1)

    def replay() -> None:
        dec.state.pos.fill_(8)
        dec.launch()
        dec.host_pos = 0

    out["graph_k1"] = profile_steps(replay, steps=steps, warmup=3)
    for trace in out.values():
        trace["summary"] = trace_summary(trace)
    return out


def summary_lines(data: dict[str, Any]) -> list[str]:
    """A short human summary."""
    p = data["provenance"]
    lines = [f"{p['gpu_name']} CUDA {p['cuda']} torch {p['torch']} {p['date_utc']}"]
    for b in [*(data.get("batches") or []), *(data.get("compiled_graphs") or [])]:
        lines.append(f"batch {b['batch']} ({b['tokens']} tokens x {b['repeats']} repeats):")
        for r in b["rows"]:
            t, i = r["us_per_token"], r["issue_us_per_token"]
            lines.append(f"  {r['path']:<20} {t['median']:8.1f} us/token (spread {t['spread']:6.1f})  "
                         f"CPU issue {i['median']:8.1f} (spread {i['spread']:6.1f})  "
                         f"tokens equal {r.get('tokens_equal_to_eager', r.get('tokens_equal_to_graph_k1')):.2f}")
    for name, t in data.get("targets", {}).items():
        lines.append(f"target {name}: {t}")
    return lines


def targets(data: dict[str, Any]) -> dict[str, Any]:
    """Issue 12's target, reported not tuned: the best path's per-token time over reduce-overhead's, per batch.

    Each section ('batches', 'compiled_graphs') is compared with the reduce-overhead path timed in
    the same process and the same interleaved repeats; the best ratio of all sections is reported.
    """
    out: dict[str, Any] = {}
    for section in ("batches", "compiled_graphs"):
        for b in data.get(section) or []:
            rows = {r["path"]: r for r in b["rows"]}
            if "reduce_overhead" not in rows:
                continue
            ref = rows["reduce_overhead"]["us_per_token"]
            for best in (r for r in b["rows"] if r["path"] not in ("reduce_overhead", "eager")):
                t = best["us_per_token"]
                ratio = t["median"] / ref["median"]
                key = f"batch_{b['batch']}"
                if key in out and out[key]["ratio_to_reduce_overhead"] <= ratio:
                    continue
                out[key] = {"best_path": best["path"], "section": section, "ratio_to_reduce_overhead": ratio,
                            "ratio_range": [t["min"] / ref["max"], t["max"] / ref["min"]],
                            "max": TARGET_RATIO_MAX, "met": ratio <= TARGET_RATIO_MAX}
    return out


DEFAULT_SECTIONS = ("paths", "compiled_graphs", "traces", "demos", "if_node")
ALL_SECTIONS = (*DEFAULT_SECTIONS, "compiled_graphs_here", "traces_here")


def _section_in_child(here: str, key: str, quick: bool, timeout_s: float = 600.0) -> Any:
    """Section `here` run by a child Python (its own CUDA context, so an illegal memory access in this
    process cannot touch it, nor one in it this process); its result under `key`, or its error."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / f"{key}.json"
        cmd = [sys.executable, "-m", "graphcourse.gpulib.bench_decode_paths", "--sections", here,
               "--out", str(out), *(["--quick"] if quick else [])]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        if not out.is_file():
            raise RuntimeError(f"the child exited {done.returncode} without results: {done.stderr[-1500:]}")
        child = json.loads(out.read_text())
    if key not in child:
        raise RuntimeError(child.get(f"{key}_error", f"the child recorded no {key} section"))
    return child[key]


def _compiled_graphs_in_child(quick: bool, timeout_s: float = 600.0) -> list[dict[str, Any]]:
    """The compiled-graphs section run by a child Python (its own CUDA context); its rows, or its error."""
    return _section_in_child("compiled_graphs_here", "compiled_graphs", quick, timeout_s)


def run_all(argv: Sequence[str], quick: bool, sections: Sequence[str],
            after_section: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Every section asked for, in one dictionary ready for JSON; a failing section is recorded, not fatal.

    `after_section` gets the data so far after each section (main writes it out, so a run cut short
    by a time limit still leaves the sections it finished).
    """
    from .device_loop import torch_features

    start = time.perf_counter()
    data: dict[str, Any] = {"schema": 1, "provenance": provenance(argv, quick), "features": torch_features()}
    repeats = 3 if quick else REPEATS
    jobs: list[tuple[str, Callable[[], Any]]] = []
    if "paths" in sections:
        jobs.append(("batches", lambda: [bench_batch(b, KS, (), TOKENS, repeats) for b in BATCHES]))
    if "compiled_graphs" in sections:  # in a child: a failure there cannot poison this process's CUDA context
        jobs.append(("compiled_graphs", lambda: _compiled_graphs_in_child(quick)))
    if "compiled_graphs_here" in sections:
        jobs.append(("compiled_graphs", lambda: [bench_batch(b, (), COMPILED_KS, TOKENS, repeats, core=False)
                                                 for b in BATCHES]))
    if "traces" in sections:  # in a child too: the first GPU runs lost it to the paths' illegal memory access
        jobs.append(("traces", lambda: _section_in_child("traces_here", "traces", quick, timeout_s=300.0)))
    if "traces_here" in sections:
        jobs.append(("traces", bench_traces))
    if "demos" in sections:
        from .compiled import run_demos

        from .device_loop import run_conditional_demo

        import os

        parts = os.environ.get("GRAPHCOURSE_DEMO_PARTS")  # e.g. "1,5": re-record some parts only
        jobs.append(("demos", lambda: run_demos(parts=parts.split(",") if parts else None)))
        if not os.environ.get("GRAPHCOURSE_DEMO_PARTS"):
            jobs.append(("conditional_demo", run_conditional_demo))
    if "if_node" in sections:  # last: a refused conditional capture could leave this process's CUDA unusable
        jobs.append(("if_node", bench_if_node))
    for name, job in jobs:
        t = time.perf_counter()
        try:
            data[name] = job()
        except Exception as exc:  # keep the other sections: the lesson says which one is missing and why
            data[name + "_error"] = f"{type(exc).__name__}: {exc}"[:2000]
        data.setdefault("section_s", {})[name] = time.perf_counter() - t
        print(f"section {name}: {data['section_s'][name]:.1f} s", flush=True)
        if after_section is not None:
            after_section({**data, "targets": targets(data), "elapsed_s": time.perf_counter() - start})
    data["targets"] = targets(data)
    data["elapsed_s"] = time.perf_counter() - start
    return data


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: measure on the GPU and write JSON, or refuse in one line without CUDA."""
    def measure(args, argv: list[str]) -> list[str]:
        data = run_all(argv, args.quick, args.sections, after_section=lambda d: bench_cli.write_json(args.out, d))
        bench_cli.write_json(args.out, data)
        return [*summary_lines(data), f"wrote {args.out}"]

    return bench_cli.run("graphcourse.gpulib.bench_decode_paths", __doc__, argv, measure, out=default_path(),
                         quick="fewer repeats (a smoke run)", sections=ALL_SECTIONS, default_sections=DEFAULT_SECTIONS,
                         recorded=f"Lessons 07 and 08 show data/{DATA_FILE}.")


if __name__ == "__main__":
    sys.exit(main())
