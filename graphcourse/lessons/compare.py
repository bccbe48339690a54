"""Lesson 03's helpers: a toy result beside the real one, live GPU demonstrations, and captures meant to fail in a child.

Every demonstration runs live on a CUDA GPU; on a CPU the lessons show what the course's own
benchmark run recorded of it (``python -m graphcourse.gpulib.bench`` stores them in the 'facts'
section of data/gpu_reference.json, with the run's provenance), never hand-typed text.

A failed CUDA-graph capture can leave the CUDA context unusable for the rest of the process, so
:func:`run_failing_capture` runs the capture in a fresh Python and hands back only the error lines.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..core.child import CAPTURE_ERROR_MARKERS, ChildResult, error_lines, run_snippet  # noqa: F401  (lesson 03 imports them here)
from ..gpulib.demos import (  # noqa: F401  (the live demonstrations, under the names lesson 03 uses)
    ITEM_IN_CAPTURE,
    PLAIN_COND_IN_CAPTURE,
    TwoGraphs,
    WARMUP_STREAM_SNIPPET,
    cond_capture_demo,
    cond_lines,
    graphed_alias_lines,
    run_failing_capture,
    shared_pool_lines,
    two_graphs_one_pool,
    warmup_stream_demo,
)

def as_values(x: Any) -> list[float]:
    """A plain list of floats from a toy buffer, a list or a tensor (copied to the CPU)."""
    if hasattr(x, "detach"):
        x = x.detach().cpu().reshape(-1).tolist()
    elif hasattr(x, "tolist"):  # a toy buffer: one read of all its values (iterating it would give views)
        x = x.tolist()
    return [float(v) for v in x]


def same_values(a: Any, b: Any, tol: float = 1e-5) -> bool:
    """True when both hold the same number of values, each equal within `tol` (relative to its size)."""
    va, vb = as_values(a), as_values(b)
    return len(va) == len(vb) and all(abs(x - y) <= tol * max(1.0, abs(x), abs(y)) for x, y in zip(va, vb))


def side_by_side(toy: Any, real: Any, real_name: str = "torch.cuda.graph") -> str:
    """Two aligned lines, the toy's values and the real ones, and whether they agree."""
    width = max(len("toygraph"), len(real_name))
    fmt = lambda xs: "[" + ", ".join(f"{v:g}" for v in as_values(xs)) + "]"  # noqa: E731
    return (f"{'toygraph':<{width}} : {fmt(toy)}\n{real_name:<{width}} : {fmt(real)}\n"
            f"{'same':<{width}} : {same_values(toy, real)}")


def memory_per_bucket_live(buckets: Sequence[int] = (1, 2, 4, 8, 16, 32, 64)) -> dict[str, Any]:
    """On a GPU: the tiny GPT's decode step, memory added by each bucket's capture (graphcourse.gpulib.graphs.capture_memory)."""
    import torch

    from ..gpulib.graphs import TinyGPT, as_device_position, capture_memory

    model = TinyGPT().cuda()
    cache = model.new_cache(max(buckets))
    pos = as_device_position(16, "cuda")

    def step(tok: "torch.Tensor") -> "torch.Tensor":
        return model.decode_step(tok, pos, cache.batch_view(tok.shape[0]))

    memory = capture_memory(step, torch.zeros(max(buckets), dtype=torch.long, device="cuda"), buckets)
    return {"buckets": list(buckets), "memory_per_bucket": memory.as_json_rows(),
            "memory_one_time_bytes": memory.one_time_bytes, "kv_cache_bytes": cache.nbytes}


# --------------------------------------------------------------------------- lesson 03's live demonstrations (and tests/test_cuda_facts.py)


def recorded_fact(name: str, data: dict[str, Any] | None = None) -> Any:
    """One live demonstration as the course's own benchmark run recorded it (data/gpu_reference.json, section 'facts')."""
    from ..errors import ReferenceDataError
    from .reference import section

    facts = section("facts", data)
    if name not in facts:
        raise ReferenceDataError(
            f"the recorded facts have no {name!r} (they have: {', '.join(facts)}): re-run "
            f"`python -m graphcourse.gpulib.bench` on a GPU to record it."
        )
    return facts[name]


def live_or_recorded_text(live: Any, fact: str, what: str, show: Any = str) -> None:
    """Print `live()` on a CUDA GPU; elsewhere print the recorded fact `fact` through `show`, labelled with its run."""
    from ..errors import GraphCourseError
    from .reference import load_reference, recorded_label
    from .teaching import cuda_here

    if cuda_here():
        import torch

        print(f"live on {torch.cuda.get_device_name(0)}, torch {torch.__version__}:")
        print(live())
        return
    try:
        data = load_reference()
        value = recorded_fact(fact, data)
    except GraphCourseError as exc:
        print(f"No CUDA GPU here, and no recorded result to show: {exc}")
        return
    print(f"No CUDA GPU here: {what}, {recorded_label(data)} (the course's benchmark run):")
    print(show(value))


def warmup_lines(result: dict[str, int]) -> str:
    """Lesson 03: the graph pools' sizes after warm-up on another stream and on the capture stream."""
    mib = 2**20
    return (f"warm-up and capture on different streams: "
            f"{result['other_stream_pool_allocated_bytes'] / mib:6.2f} MiB allocated in the graph's pool\n"
            f"warm-up and capture on one stream      : "
            f"{result['same_stream_pool_allocated_bytes'] / mib:6.2f} MiB allocated in the graph's pool")


def recorded_item_in_capture(data: dict[str, Any] | None = None) -> str:
    """The error lines the course's benchmark run recorded for ITEM_IN_CAPTURE (a sync inside capture)."""
    return "\n".join(recorded_fact("item_in_capture_errors", data))


def pool_table_lines(memory_per_bucket: Sequence[dict[str, int]]) -> str:
    """Memory each bucket's capture added, per kind of pool: bytes allocated to its tensors, and segments reserved.

    Allocated bytes are the graph's own tensors (each block rounded to 512 bytes); reserved bytes
    are whole segments the pool took from the driver (2 MiB segments for requests of at most
    1 MiB, 20 MiB for up to 10 MiB, larger ones rounded up to 2 MiB), so small graphs show 0 or 2.
    """
    mib = 2**20
    rows = sorted(memory_per_bucket, key=lambda m: m["bucket"])
    has_alloc = all("private_pool_allocated_bytes" in m for m in rows)
    lines = ["MiB a capture added: allocated to its tensors / reserved in segments" if has_alloc
             else "MiB a capture added: reserved in segments (this recording has no allocated bytes)"]
    for m in rows:
        parts = []
        for kind in ("private", "shared"):
            res = m[f"{kind}_pool_reserved_bytes"] / mib
            text = f"{m[f'{kind}_pool_allocated_bytes'] / mib:6.3f} / {res:4.1f}" if has_alloc else f"{res:4.1f}"
            parts.append(f"{'own private pool' if kind == 'private' else 'one shared pool'} {text}")
        lines.append(f"bucket {m['bucket']:>2}: " + ", ".join(parts))
    for kind in ("private", "shared"):
        res = sum(m[f"{kind}_pool_reserved_bytes"] for m in rows) / mib
        alloc = (f"{sum(m[f'{kind}_pool_allocated_bytes'] for m in rows) / mib:.3f} MiB allocated, "
                 if has_alloc else "")
        where = "private pools" if kind == "private" else "one shared pool"
        lines.append(f"all {len(rows)} graphs, {where}: {alloc}{res:.1f} MiB reserved")
    return "\n".join(lines)
