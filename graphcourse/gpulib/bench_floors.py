"""What graphs don't fix (lesson 13), measured on a GPU and written to data/floors.json.

Run on a CUDA machine: ``python -m graphcourse.gpulib.bench_floors [--out data/floors.json] [--quick]``.
Three sections, each recorded even when another fails:

- ``device``: the floors' denominators, measured here, not read from a data sheet: HBM bandwidth
  (a copy of 1 GiB: bytes read plus bytes written over the time), an L2 copy rate (copies between
  two buffers that fit in L2 together, replayed from a graph so that launches do not count: each
  copy is a short kernel with its own start and tail, so this is a lower bound on L2 bandwidth) and float32
  matmul throughput (8192 x 8192, TF32 off as PyTorch leaves it). Medians and spreads.
- ``anatomy``: one decode step of the tiny GPT replayed from a CUDA graph under torch.profiler,
  per path and batch: the kernels, their durations, the gaps between them inside the replay and
  the replay's span (first kernel's start to last kernel's end), with the bytes and FLOPs the
  step must move (:func:`step_budget`) and the floors they give.
- ``levers``: greedy decoding timed per token along the paths of lesson 13, interleaved, 7
  repeats, medians and spreads, the tokens compared with eager's: the plain graph (one per
  step), reduce-overhead (the reference), torch.compile's kernels in a hand-captured graph, the
  MLP as two Triton kernels (:mod:`.fused_mlp`), the attention as one (:mod:`.fused_attention`),
  both, each in a hand-captured graph, and the MLP's kernels with programmatic dependent launch
  where the installed Triton has it.

Without CUDA it measures nothing and exits with status 2 and a one-line reason.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from ..core.paths import DATA_DIR
from .bench import spread
from .bench_decode_paths import _decoder_path, _loop_path, _time_run
from . import bench_cli
from .bench_cli import NO_CUDA_EXIT, write_json  # noqa: F401  (NO_CUDA_EXIT: the exit code tests read here)

DATA_FILE = "floors.json"
BATCHES = (1, 8)
TOKENS = 96
REPEATS = 7
TARGET_RATIO_MAX = 0.5  # issue 23: best path at or below 0.5x reduce-overhead's per-token time (reported)
SECTIONS = ("device", "anatomy", "levers")


def default_path() -> Path:
    return DATA_DIR / DATA_FILE


def step_budget(config: Any, batch: int, bytes_per_value: int = 4) -> dict[str, int]:
    """Bytes one decode step of the tiny GPT must read, and the FLOPs it must do, at least (counted, not timed).

    Weights: every block's layer norms and linear layers, the final norm and the head, read once
    per step whatever the batch; one token-embedding row per sequence and one position row (every
    sequence is at the same position). KV cache: the course's
    step attends over the whole preallocated cache (``max_len`` positions, later ones masked),
    so it reads ``layers x batch x heads x max_len x head_dim`` keys and as many values. FLOPs:
    two per weight of every linear layer and row, plus the attention's two matrix products over
    ``max_len`` positions.
    """
    d, hdim, layers, vocab = config.d_model, config.head_dim, config.n_layers, config.vocab_size
    linear = layers * (d * 3 * d + 3 * d + d * d + d + d * 4 * d + 4 * d + 4 * d * d + d) + d * vocab
    norms = layers * 2 * 2 * d + 2 * d
    weights = (linear + norms + batch * d + d) * bytes_per_value  # a token row per sequence, one position row
    kv = layers * batch * config.n_heads * config.max_len * hdim * 2 * bytes_per_value
    matmul_weights = layers * (3 * d * d + d * d + 8 * d * d) + d * vocab
    flops = 2 * batch * matmul_weights + layers * batch * config.n_heads * 2 * 2 * config.max_len * hdim
    return {"weight_bytes": weights, "kv_bytes": kv, "bytes": weights + kv, "flops": flops}


def floors_us(budget: dict[str, int], device: dict[str, Any]) -> dict[str, float]:
    """Each floor in µs per step: bytes over HBM bandwidth, bytes over L2 bandwidth, FLOPs over fp32 matmul peak."""
    return {"hbm_us": budget["bytes"] / (device["hbm_gbps"]["median"] * 1e3),
            "l2_us": budget["bytes"] / (device["l2_gbps"]["median"] * 1e3),
            "flops_us": budget["flops"] / (device["fp32_tflops"]["median"] * 1e6)}


# --------------------------------------------------------------------------- device


def bench_device(repeats: int = REPEATS) -> dict[str, Any]:
    """HBM copy bandwidth, an L2 copy rate and float32 matmul throughput, medians and spreads over `repeats`."""
    import torch

    from .timing import events_us

    props = torch.cuda.get_device_properties(0)
    l2 = int(getattr(props, "L2_cache_size", 0))
    big = torch.empty(1 << 28, device="cuda")  # 1 GiB of float32
    dst = torch.empty_like(big)
    dst.copy_(big)  # first touch outside the timing
    hbm = [2 * big.numel() * 4 / events_us(lambda: dst.copy_(big), 10) / 1e3 for _ in range(repeats)]
    del big, dst
    # L2: copies between two buffers that fit in L2 together, 50 in one graph so launches do not count
    src = torch.ones(max(l2 // 6, 1 << 20) // 4, device="cuda")
    dst = torch.empty_like(src)
    copies = 50
    for _ in range(3):
        dst.copy_(src)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(copies):
            dst.copy_(src)
    g.replay()
    l2_gbps = [copies * 2 * src.numel() * 4 / events_us(g.replay, 5) / 1e3 for _ in range(repeats)]
    l2_buffer = src.numel() * 4
    del g, src, dst
    n = 8192
    a, b = torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")
    torch.mm(a, b)
    tflops = [2 * n ** 3 / events_us(lambda: torch.mm(a, b), 5) / 1e6 for _ in range(repeats)]
    return {"l2_cache_bytes": l2, "sms": props.multi_processor_count,
            "allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
            "hbm_gbps": spread(hbm), "l2_gbps": spread(l2_gbps), "fp32_tflops": spread(tflops),
            "l2_buffer_bytes": l2_buffer,
            "how": "hbm: dst.copy_(src) of 1 GiB, (read + written bytes) / time; l2: 50 copies between two "
                   "buffers of a sixth of L2 each captured in one graph, (read + written bytes) / replay time; fp32: torch.mm "
                   "of 8192 x 8192 float32; CUDA events, medians and spreads over the repeats"}


# --------------------------------------------------------------------------- the decode paths


def _quiet_tf32_advice() -> None:
    """float32 stays float32 here (eager's tokens are the reference): inductor's advice to enable TF32 is noise."""
    import warnings

    warnings.filterwarnings("ignore", message="TensorFloat32 tensor cores")


def _compiled_step(model: Any) -> Callable[..., Any]:
    """torch.compile's default-mode kernels of one decode step, one compiled function per KV cache."""
    from .compiled import compiled_decode_step

    _quiet_tf32_advice()
    return compiled_decode_step(model)


def _fused_step(model: Any, mlp: bool, attention: bool, pdl: bool = False) -> Callable[..., Any]:
    """The plain step with the MLP block and/or the attention swapped for Triton kernels."""
    from .fused_attention import decode_attention
    from .fused_mlp import fused_mlp_residual

    mlp_residual = (lambda blk, x: fused_mlp_residual(blk, x, pdl)) if mlp else None
    attend = decode_attention if attention else None

    def step(tok: Any, pos: Any, cache: Any) -> Any:
        return model.decode_step(tok, pos, cache, mlp_residual=mlp_residual, attend=attend)

    return step


def graphed_steps(model: Any) -> dict[str, Callable[..., Any] | None]:
    """The steps lesson 13 captures one per graph, by path name (None: not available with this Triton)."""
    from .fused_mlp import pdl_support

    pdl = pdl_support()["gdc"]
    return {"graph_k1": None, "compiled_graph_k1": _compiled_step(model),
            "fused_mlp_graph_k1": _fused_step(model, True, False),
            "fused_mlp_pdl_graph_k1": _fused_step(model, True, False, pdl=True) if pdl else None,
            "fused_attention_graph_k1": _fused_step(model, False, True),
            "fused_both_graph_k1": _fused_step(model, True, True),
            "fused_both_pdl_graph_k1": _fused_step(model, True, True, pdl=True) if pdl else None}


def bench_anatomy(batch: int, steps: int = 5) -> dict[str, Any]:
    """Per path: the kernels of one graph replay (name, start, duration), the gaps between them, totals."""
    import torch

    from .device_loop import MultiStepDecoder
    from .graphs import TinyGPT
    from .real_trace import profile_steps

    torch._dynamo.reset()
    model = TinyGPT().cuda()
    budget = step_budget(model.config, batch)
    out: dict[str, Any] = {"batch": batch, "budget": budget, "paths": {}}
    for name, step in graphed_steps(model).items():
        if name.endswith("_pdl_graph_k1") and step is None:
            continue
        try:
            dec = MultiStepDecoder(model, batch, 1, step=step)
            dec.reset()

            def replay(dec: Any = dec) -> None:
                dec.graph.replay()
                torch.cuda.synchronize()  # each replay alone on the GPU, so its kernels are its own

            trace = profile_steps(replay, steps=steps, warmup=3)
        except Exception as exc:
            out["paths"][name] = {"error": f"{type(exc).__name__}: {exc}"[:1500]}
            continue
        kernels = sorted((r for r in trace["rows"] if r[0] == "gpu"), key=lambda r: r[1])
        if len(kernels) % steps:
            out["paths"][name] = {"error": f"{len(kernels)} kernels in {steps} replays: not one count per replay"}
            continue
        per = len(kernels) // steps
        replays = [kernels[i * per:(i + 1) * per] for i in range(steps)]
        spans = [r[-1][2] - r[0][1] for r in replays]
        busy = [sum(k[2] - k[1] for k in r) for r in replays]
        last = replays[-1]
        t0 = last[0][1]
        out["paths"][name] = {
            "kernels_per_replay": per,
            "span_us": spread(spans), "kernel_us": spread(busy),
            "gap_us": spread([s - b for s, b in zip(spans, busy)]),
            "median_kernel_us": sorted(k[2] - k[1] for k in last)[per // 2],
            "last_replay": [[k[3], round(k[1] - t0, 3), round(k[2] - k[1], 3)] for k in last],
        }
        del dec
        torch.cuda.synchronize()
    return out


def bench_levers(batch: int, tokens: int = TOKENS, repeats: int = REPEATS) -> dict[str, Any]:
    """Per-token time of each path, interleaved repeats, medians and spreads, tokens compared with eager's."""
    import torch
    from tqdm.auto import tqdm

    from .compiled import compiled_loop_step, eager_loop_step

    _quiet_tf32_advice()
    from .device_loop import MultiStepDecoder
    from .graphs import TinyGPT

    torch._dynamo.reset()
    torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 64)
    model = TinyGPT().cuda()
    paths, notes, errors = [], {}, {}
    paths.append(_loop_path("eager", model, batch, eager_loop_step, clone=False)[0])
    ro, ro_step = _loop_path("reduce_overhead", model, batch,
                             lambda m, c, t, p: compiled_loop_step(m, c, t, p, mode="reduce-overhead"), clone=True)
    ro_step(), ro_step(), ro_step()
    paths.append(ro)
    for name, step in graphed_steps(model).items():
        if name.endswith("_pdl_graph_k1") and step is None:
            errors[name] = "this Triton has no gdc_wait/gdc_launch_dependents"
            continue
        start = time.perf_counter()
        try:
            dec = MultiStepDecoder(model, batch, 1, step=step)
            path = _decoder_path(name, dec)
            _time_run(path, 2)
        except Exception as exc:
            errors[name] = f"{type(exc).__name__}: {exc}"[:1500]
            continue
        notes[name] = {"build_s": time.perf_counter() - start}
        paths.append(path)
    for p in paths:
        _time_run(p, tokens)  # warm-up
    per_token: dict[str, list[float]] = {p.name: [] for p in paths}
    firsts: dict[str, Any] = {}
    for _ in tqdm(range(repeats), desc=f"levers, batch {batch}", unit="repeat"):
        for p in paths:
            us, _, toks = _time_run(p, tokens)
            per_token[p.name].append(us)
            firsts.setdefault(p.name, toks.cpu())
    rows = []
    for p in paths:
        rows.append({"path": p.name, "us_per_token": spread(per_token[p.name]),
                     "runs_us_per_token": per_token[p.name],
                     "tokens_equal_to_eager": (firsts[p.name] == firsts["eager"]).float().mean().item(),
                     **notes.get(p.name, {})})
    return {"batch": batch, "tokens": tokens, "repeats": repeats, "rows": rows, "errors": errors}


def targets(levers: list[dict[str, Any]]) -> dict[str, Any]:
    """Issue 23's target, reported not tuned: the best path with eager's tokens over reduce-overhead's time."""
    out = {}
    for b in levers:
        rows = {r["path"]: r for r in b["rows"]}
        ref = rows["reduce_overhead"]["us_per_token"]
        cands = [r for r in b["rows"] if r["path"] not in ("eager", "reduce_overhead")
                 and r["tokens_equal_to_eager"] == 1.0]
        if not cands:
            continue
        best = min(cands, key=lambda r: r["us_per_token"]["median"])
        t = best["us_per_token"]
        ratio = t["median"] / ref["median"]
        out[f"batch_{b['batch']}"] = {"best_path": best["path"], "ratio_to_reduce_overhead": ratio,
                                      "ratio_range": [t["min"] / ref["max"], t["max"] / ref["min"]],
                                      "max": TARGET_RATIO_MAX, "met": ratio <= TARGET_RATIO_MAX}
    return out


TIMING = (f"levers: per path and repeat, {bench_cli.DECODE_TIMING}; paths interleaved; median and spread over the "
          "repeats. anatomy: torch.profiler (CUPTI) kernel records of single graph replays, each followed by a "
          "synchronize.")
"""How the figures are timed, as the provenance records it."""


def provenance(argv: Sequence[str], quick: bool) -> dict[str, Any]:
    from .fused_mlp import pdl_support

    return bench_cli.provenance("graphcourse.gpulib.bench_floors", argv, quick=quick, timing=TIMING, triton=pdl_support())


def run_all(argv: Sequence[str], quick: bool, sections: Sequence[str],
            after: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    start = time.perf_counter()
    data: dict[str, Any] = {"schema": 1, "provenance": provenance(argv, quick)}
    repeats = 3 if quick else REPEATS
    jobs = {"device": lambda: bench_device(repeats),
            "anatomy": lambda: [bench_anatomy(b) for b in BATCHES],
            "levers": lambda: [bench_levers(b, repeats=repeats) for b in BATCHES]}
    for name in sections:
        t = time.perf_counter()
        try:
            data[name] = jobs[name]()
        except Exception as exc:  # keep the other sections: the lesson says which one is missing and why
            data[name + "_error"] = f"{type(exc).__name__}: {exc}"[:2000]
        data.setdefault("section_s", {})[name] = time.perf_counter() - t
        print(f"section {name}: {data['section_s'][name]:.1f} s", flush=True)
        if "levers" in data:
            data["targets"] = targets(data["levers"])
        after(data)
    data["elapsed_s"] = time.perf_counter() - start
    return data


def summary_lines(data: dict[str, Any]) -> list[str]:
    """A few lines for the terminal: each path's µs per token by batch, the anatomy of each replay, the targets."""
    out = []
    for b in data.get("levers", []):
        out.append(f"batch {b['batch']}:")
        for r in b["rows"]:
            t = r["us_per_token"]
            out.append(f"  {r['path']:<24} {t['median']:8.1f} us/token ({t['min']:.1f}..{t['max']:.1f}) "
                       f"tokens equal {r['tokens_equal_to_eager']:.2f}")
        out += [f"  {k}: {v[:300]}" for k, v in b["errors"].items()]
    for b in data.get("anatomy", []):
        for name, a in b["paths"].items():
            if "error" in a:
                out.append(f"anatomy batch {b['batch']} {name}: {a['error'][:300]}")
                continue
            out.append(f"anatomy batch {b['batch']} {name}: {a['kernels_per_replay']} kernels, span "
                       f"{a['span_us']['median']:.1f} us, kernels {a['kernel_us']['median']:.1f}, gaps "
                       f"{a['gap_us']['median']:.1f}")
    out.append(json.dumps(data.get("targets", {})) + " "
               + json.dumps({k: v for k, v in data.get("device", {}).items() if k != "how"}))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: measure on the GPU and write JSON, or refuse in one line without CUDA."""
    def measure(args, argv: list[str]) -> list[str]:
        data = run_all(argv, args.quick, args.sections, after=lambda d: write_json(args.out, d))
        write_json(args.out, data)
        return [*summary_lines(data), f"wrote {args.out}"]

    return bench_cli.run("graphcourse.gpulib.bench_floors", __doc__, argv, measure, out=default_path(),
                         quick="fewer repeats (a smoke run)", sections=SECTIONS,
                         recorded=f"Lesson 13 shows data/{DATA_FILE}.")


if __name__ == "__main__":
    sys.exit(main())
