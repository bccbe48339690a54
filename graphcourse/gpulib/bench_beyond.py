"""Lesson 10's benchmark: two streams in one graph, random numbers, capture modes, a graphed training step, two GPUs.

``python -m graphcourse.gpulib.bench_beyond --out data/gpu_reference.json [--sections beyond two_gpu] [--quick]``

It UPDATES only its own sections of the JSON file: ``beyond`` (one GPU) and ``two_gpu`` (NCCL across two
GPUs, skipped with a message, and the file's old ``two_gpu`` kept, where fewer than two GPUs are present).
Each section carries its own ``provenance``. The file is read, the sections replaced, and written
atomically (a temporary file renamed over it), so an interrupted run loses nothing. Figures are medians
over interleaved repeats with their spread: ``key``, ``key_min``, ``key_max``; times are torch.cuda.Event
timings of back-to-back calls (see graphcourse.gpulib.bench's method). Set ``NCCL_NVLS_ENABLE=0`` on the course's
machines (the benchmark sets it when unset).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, Sequence

SECTIONS = ("beyond", "two_gpu")


from .bench import summarise  # the course's one summary of repeats: median, min and max
from . import bench_cli
from .bench_cli import NO_CUDA_EXIT, update_json  # noqa: F401  (the exit code tests read here)


def ratio_summary(prefix: str, num: Sequence[float], den: Sequence[float]) -> dict[str, float]:
    """Spread of the per-repeat ratio num/den (each repeat timed both, one after the other)."""
    return summarise(prefix, [a / b for a, b in zip(num, den)])


def provenance(argv: Sequence[str], gpus: int | None = None) -> dict[str, Any]:
    """Which GPUs, how many, torch, CUDA, driver, NCCL, date and the command (no host name)."""
    import torch

    count = torch.cuda.device_count() if gpus is None else gpus
    try:
        nccl = ".".join(str(v) for v in torch.cuda.nccl.version())
    except Exception:
        nccl = None
    return bench_cli.provenance(
        "graphcourse.gpulib.bench_beyond", argv,
        gpu_names=[torch.cuda.get_device_name(i) for i in range(count)], gpu_count=count, nccl=nccl,
        nccl_nvls_enable=os.environ.get("NCCL_NVLS_ENABLE"),
        timing="per repeat: mean µs per call of back-to-back calls between two torch.cuda.Event records "
               "(CPU launch cost included), after warm-up; the paths compared are timed in turn in every repeat")


def _guard(name: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Run one part; on failure record the error instead of losing the rest of the section."""
    start = time.perf_counter()
    try:
        out = fn(*args, **kwargs)
    except Exception as exc:
        out = {"error": f"{type(exc).__name__}: {exc}".splitlines()[0]}
    print(f"  {name}: {time.perf_counter() - start:.1f} s", flush=True)
    return out


def bench_streams(repeats: int) -> dict[str, Any]:
    """Two chains captured on two streams (fork/join) against the same chains on one stream: shape and replay time."""
    from .graphs import cuda_time_us
    from .beyond import fork_join

    two = fork_join(two_streams=True, debug=False)      # timed graphs: no debug mode
    one = fork_join(two_streams=False, debug=False)
    samples: dict[str, list[float]] = {"two_streams": [], "one_stream": []}
    for _ in range(repeats):
        samples["two_streams"].append(cuda_time_us(two["graph"].replay, iters=200, warmup=10))
        samples["one_stream"].append(cuda_time_us(one["graph"].replay, iters=200, warmup=10))
    return {
        "work": "tanh, then two chains of 4 x (256x256 matmul, tanh), then their sum; float32",
        "two_streams": {"shape": _shape_in_child(True), "matches_eager": two["matches_eager"],
                        **summarise("replay_us", samples["two_streams"])},
        "one_stream": {"shape": _shape_in_child(False), "matches_eager": one["matches_eager"],
                       **summarise("replay_us", samples["one_stream"])},
        **ratio_summary("one_over_two", samples["one_stream"], samples["two_streams"]),
        "repeats": repeats,
    }


def streams_shape(two_streams: bool) -> Any:
    """The fork/join graph's shape from its DOT dump (debug mode), for the child of _shape_in_child."""
    from .beyond import fork_join

    return fork_join(two_streams=two_streams, debug=True)["shape"]


def _shape_in_child(two_streams: bool) -> Any:
    """The shape, read in its own process: the dump is the one debug-mode step, kept apart from the timing."""
    try:
        return _in_child(f"bench_beyond:streams_shape({two_streams})", timeout_s=120)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}".splitlines()[0]}


def bench_unjoined() -> dict[str, Any]:
    """A fork never joined, in a child process: its exit code and its error lines, whole."""
    from ..core.child import run_snippet
    from .beyond import unjoined_fork_snippet

    done = run_snippet(unjoined_fork_snippet(), timeout_s=60)
    return {"returncode": done.returncode, "errors": done.errors[:6]}


def bench_unforked_join() -> dict[str, Any]:
    """A join to a stream that was never forked, in a child process: its exit code and error lines, whole."""
    from ..core.child import run_snippet
    from .beyond import result_line, unforked_join_snippet

    done = run_snippet(unforked_join_snippet(), timeout_s=60)
    return {"returncode": done.returncode, "errors": done.errors[:6], "result": result_line(done.stdout)}


def bench_rng() -> dict[str, Any]:
    import torch

    from .beyond import dropout_replays, generator_facts, replay_matches_eager_sequence

    return {
        "has_register_generator_state": hasattr(torch.cuda.CUDAGraph, "register_generator_state"),
        "dropout": dropout_replays(),
        "sequence": replay_matches_eager_sequence(),
        "generators": generator_facts(),
    }


def bench_training(repeats: int, quick: bool) -> dict[str, Any]:
    import dataclasses

    import torch

    from .beyond import (TrainConfig, WholeStepGraph, autocast_cache_refusal, count_kernels_per_step, noncapturable_refusal,
                         time_training,
                         train_eager, train_partial)

    config = TrainConfig()
    out: dict[str, Any] = {"config": dataclasses.asdict(config), "optimizer": "AdamW"}
    out["kernels_per_eager_step"] = count_kernels_per_step(config)
    t = time_training(config, repeats=repeats, steps_per_timing=20 if quick else 50)
    for name in ("eager", "graph", "partial", "eager_bf16", "graph_bf16"):
        out.update(summarise(f"{name}_step_us", t[name]))
    out.update(ratio_summary("graph_speedup", t["eager"], t["graph"]))
    out.update(ratio_summary("partial_speedup", t["eager"], t["partial"]))
    out.update(ratio_summary("graph_bf16_speedup", t["eager_bf16"], t["graph_bf16"]))
    out["capture_s"] = t["capture_s"][0]
    eager = train_eager(config, "cuda")
    eager_capturable = train_eager(config, "cuda", capturable=True)   # the graph's optimizer arithmetic
    graph = WholeStepGraph(config).train()
    partial = train_partial(config)
    eager_bf16 = train_eager(config, "cuda", capturable=True, autocast_dtype=torch.bfloat16)
    graph_bf16 = WholeStepGraph(config, autocast_dtype=torch.bfloat16).train()

    def rel(a: list[float], b: list[float]) -> float:
        return max(abs(x - y) / max(abs(x), 1e-12) for x, y in zip(a, b))

    def per_step(a: list[float], b: list[float]) -> list[float]:
        return [abs(x - y) / max(abs(x), 1e-12) for x, y in zip(a, b)]

    out["losses"] = {"eager": eager, "eager_capturable": eager_capturable, "graph": graph, "partial": partial,
                     "eager_bf16": eager_bf16, "graph_bf16": graph_bf16}
    # same arithmetic: the whole-step graph against eager with AdamW(capturable=True), the partial graph
    # against the default eager loop (both capturable=False); then the graph against the default AdamW
    # (bias corrections on the device in fp32 against Python floats), and the two eager optimizers
    out["max_rel_diff"] = {"graph_vs_eager_capturable": rel(eager_capturable, graph),
                           "partial_vs_eager": rel(eager, partial),
                           "graph_vs_eager_default": rel(eager, graph),
                           "eager_capturable_vs_eager_default": rel(eager, eager_capturable),
                           "graph_bf16_vs_eager_bf16": rel(eager_bf16, graph_bf16)}
    out["rel_diff_per_step"] = {"graph_vs_eager_capturable": per_step(eager_capturable, graph),
                                "graph_vs_eager_default": per_step(eager, graph),
                                "eager_capturable_vs_eager_default": per_step(eager, eager_capturable)}
    out["autocast_cache_refusal"] = autocast_cache_refusal()
    out["noncapturable_step"] = noncapturable_refusal()
    out["repeats"] = repeats
    return out


def _in_child(call: str, timeout_s: float = 240.0) -> dict[str, Any]:
    """Run ``graphcourse.gpulib.<call>`` in a fresh Python and return its JSON result.

    Each part of the one-GPU section runs in its own process: on the H200 an illegal memory access in
    one part (the first run lost the random-number and training parts to one raised in the streams part)
    leaves the CUDA context unusable for the rest of its process, so no part may share a process.
    """
    from ..core.child import run_snippet

    module, func = call.split(":")
    done = run_snippet(f"""
import json
from graphcourse.gpulib.{module} import {func.split("(")[0]}
print("RESULT " + json.dumps({func}))
""", timeout_s=timeout_s)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    if done.ok and lines:
        return json.loads(lines[-1][len("RESULT "):])
    raise RuntimeError(done.error or f"the child printed no result (exit code {done.returncode})")


def run_beyond(argv: Sequence[str], quick: bool) -> dict[str, Any]:
    """The one-GPU section: each part in its own child process (see _in_child)."""
    start = time.perf_counter()
    repeats = 3 if quick else 7
    data: dict[str, Any] = {"provenance": provenance(argv, gpus=1)}
    data["streams"] = _guard("streams", _in_child, f"bench_beyond:bench_streams({repeats})")
    data["unjoined"] = _guard("unjoined fork", bench_unjoined)
    data["unforked_join"] = _guard("join to an unforked stream", bench_unforked_join)
    data["rng"] = _guard("random numbers", _in_child, "bench_beyond:bench_rng()")
    data["capture_modes"] = _guard("capture modes", _in_child, "beyond:capture_mode_matrix()")
    data["training"] = _guard("training step", _in_child,
                              f"bench_beyond:bench_training({3 if quick else 5}, {quick})")
    data["elapsed_s"] = time.perf_counter() - start
    return data


def run_two_gpu(argv: Sequence[str], quick: bool) -> dict[str, Any]:
    """The two-GPU section (the caller checks there are two GPUs)."""
    from .multigpu import run_allreduce, side_stream_trap

    start = time.perf_counter()
    data: dict[str, Any] = {"provenance": provenance(argv, gpus=2)}
    data["allreduce"] = _guard("all-reduce, eager and in a graph", run_allreduce, "nccl", 2,
                               repeats=3 if quick else 5, replays=20 if quick else 50, timeout_s=150)
    data["trap"] = _guard("side-stream trap", side_stream_trap)
    data["elapsed_s"] = time.perf_counter() - start
    return data


def summary_lines(sections: dict[str, Any]) -> list[str]:
    """A few readable lines per section for the terminal."""
    lines = []
    b = sections.get("beyond")
    if b:
        s = b.get("streams", {})
        if "two_streams" in s:
            lines.append(f"streams: two {s['two_streams']['replay_us']:.1f} µs, one {s['one_stream']['replay_us']:.1f} µs"
                         f" per replay; shape {s['two_streams']['shape']}")
        lines.append(f"unjoined fork: {b.get('unjoined')}")
        lines.append(f"join to an unforked stream: {b.get('unforked_join')}")
        r = b.get("rng", {})
        lines.append(f"rng: {json.dumps(r)[:400]}")
        lines.append(f"capture modes: {json.dumps(b.get('capture_modes'))[:600]}")
        t = b.get("training", {})
        if "eager_step_us" in t:
            lines.append(f"training: eager {t['eager_step_us']:.0f}, graph {t['graph_step_us']:.0f}, partial "
                         f"{t['partial_step_us']:.0f} µs/step; max rel diff {t['max_rel_diff']}")
        else:
            lines.append(f"training: {t}")
    g = sections.get("two_gpu")
    if g:
        lines.append(f"two_gpu: {json.dumps(g)[:1200]}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: measure on the GPU and update the sections, or refuse in one line without CUDA."""
    from ..core.paths import reference_path

    def measure(args, argv: list[str]) -> list[str]:
        import torch

        os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
        start = time.perf_counter()
        new: dict[str, Any] = {}
        if "beyond" in args.sections:
            print("section beyond (one GPU):", flush=True)
            new["beyond"] = run_beyond(argv, args.quick)
            update_json(args.out, {"beyond": new["beyond"]})      # written now: a later failure cannot lose it
        if "two_gpu" in args.sections:
            if torch.cuda.device_count() < 2:
                print(f"section two_gpu skipped: it needs two GPUs and this machine has {torch.cuda.device_count()}; "
                      f"the file's two_gpu section (if any) is kept as it was.", flush=True)
            else:
                print("section two_gpu:", flush=True)
                new["two_gpu"] = run_two_gpu(argv, args.quick)
                update_json(args.out, {"two_gpu": new["two_gpu"]})
        if not new:
            return []
        return [*summary_lines(new), f"updated {sorted(new)} in {args.out} in {time.perf_counter() - start:.0f} s"]

    return bench_cli.run("graphcourse.gpulib.bench_beyond", __doc__, argv, measure, out=reference_path(),
                         out_help="JSON file to update", quick="fewer repeats (a smoke run)", sections=SECTIONS,
                         recorded="Lesson 10 shows what data/gpu_reference.json holds.")


if __name__ == "__main__":
    sys.exit(main())
