"""Lesson 03's helpers: a toy result beside the real one, live GPU demonstrations, and captures meant to fail in a child.

Every demonstration runs live on a CUDA GPU; on a CPU the lessons show what the course's own
benchmark run recorded of it (``python -m graphcourse.gpulib.bench`` stores them in the 'facts'
section of data/gpu_reference.json, with the run's provenance), never hand-typed text.

A failed CUDA-graph capture can leave the CUDA context unusable for the rest of the process, so
:func:`run_failing_capture` runs the capture in a fresh Python and hands back only the error lines.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from .child import CAPTURE_ERROR_MARKERS, ChildResult, error_lines, run_snippet  # noqa: F401  (lesson 03 imports them here)

ITEM_IN_CAPTURE = '''import torch
x = torch.ones(4, device="cuda")
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    token = (x * 2).sum().item()   # a sync: the CPU asks for a value the GPU has not computed
'''
"""A capture that reads a value on the CPU: CUDA refuses it."""

def run_failing_capture(code: str = ITEM_IN_CAPTURE, timeout_s: float = 120) -> ChildResult:
    """Run `code` in a child Python (a failed capture can poison this process's CUDA context) and report how it failed."""
    return run_snippet(code, timeout_s)


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


@dataclass
class TwoGraphs:
    """Two graphs captured one after the other, g1 then g2, with their static inputs and outputs."""

    g1: Any
    g2: Any
    x1: Any
    x2: Any
    out1: Any
    out2: Any
    intermediate_ptr: int  # where g1's intermediate x1 * 2 lived during capture (freed when the capture ended)
    shared: bool


def two_graphs_one_pool(n: int = 4096, share_pool: bool = True) -> TwoGraphs:
    """g1: out1 = (x1 * 2) + 1 through an intermediate it frees; g2, captured next (into g1's pool if shared): out2 = x2 * 3.

    In a shared pool g2's capture may reuse the block g1's intermediate freed, so each replay
    of g1 writes into memory that is also g2's output: safe in any replay order, as long as
    g2's output is read or cloned before g1 replays (pytorch/pytorch#166975).
    """
    import torch

    from ..gpulib.graphs import require_cuda

    require_cuda("capturing two graphs")
    x1, x2 = torch.zeros(n, device="cuda"), torch.zeros(n, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up on the stream the captures use
        (x1 * 2 + 1, x2 * 3)
    g1, g2 = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    with torch.cuda.graph(g1, stream=side):
        h = x1 * 2
        intermediate_ptr = h.data_ptr()
        out1 = h + 1
        del h  # freed back to g1's pool when the capture ends: g1 still writes there on every replay
    with torch.cuda.graph(g2, pool=g1.pool() if share_pool else None, stream=side):
        out2 = x2 * 3
    torch.cuda.synchronize()
    return TwoGraphs(g1, g2, x1, x2, out1, out2, intermediate_ptr, share_pool)


def shared_pool_lines(n: int = 4096) -> str:
    """Lesson 03: both halves of the shared-pool rule, live (any replay order is fine; an output kept across another graph's replay is not)."""
    import torch

    demo = two_graphs_one_pool(n)
    x1, x2 = torch.full((n,), 1.0, device="cuda"), torch.full((n,), 10.0, device="cuda")
    demo.x1.copy_(x1)
    demo.x2.copy_(x2)
    demo.g2.replay()  # reverse of capture order
    read2 = demo.out2[0].item()
    demo.g1.replay()
    read1 = demo.out1[0].item()
    lines = [f"replayed g2 then g1 (reverse of capture order), each output read at once: g2 gave {read2:g} "
             f"(x2 * 3 = 30), g1 gave {read1:g} (x1 * 2 + 1 = 3): correct"]
    demo.g2.replay()
    kept = demo.out2  # kept, not cloned
    demo.g1.replay()
    same_block = demo.out2.data_ptr() == demo.intermediate_ptr
    lines.append(f"g2's output kept (not cloned) across g1's replay now reads {kept[0].item():g} "
                 f"(it should be 30): g1 wrote its intermediate x1 * 2 = 2 there")
    lines.append(f"g2's output sits in the block g1's intermediate freed at capture: {same_block}")
    return "\n".join(lines)


def graphed_alias_lines() -> str:
    """Lesson 03: make_graphed_callables returns detached aliases of one static output, and runs eagerly when .training differs."""
    import torch

    from ..gpulib.graphs import require_cuda

    require_cuda("make_graphed_callables")
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).cuda()
    graphed = torch.cuda.make_graphed_callables(mlp, (torch.randn(8, 16, device="cuda"),))  # captured in train mode
    x1, x2 = torch.randn(8, 16, device="cuda"), torch.randn(8, 16, device="cuda")
    y1 = graphed(x1)
    first = y1.clone()
    y2 = graphed(x2)
    graphed.eval()
    e1, e2 = graphed(x1), graphed(x1)
    return "\n".join([
        f"y1 = graphed(x1); y2 = graphed(x2): same buffer: {y1.data_ptr() == y2.data_ptr()}; "
        f"y1 still holds graphed(x1): {torch.equal(y1, first)}; y1 now equals y2: {torch.equal(y1, y2)}",
        f"after .eval() (captured in train mode): the eager forward runs, a new tensor each call: "
        f"{e1.data_ptr() != e2.data_ptr() and e1.data_ptr() != y1.data_ptr()}",
    ])


WARMUP_STREAM_SNIPPET = '''
import torch
from graphcourse.gpulib.graphs import pool_memory
w = torch.randn(512, 512, device="cuda")
x = torch.randn(64, 512, device="cuda")

def pool_bytes(warm_on, capture_on):
    warm_on.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(warm_on):
        for _ in range(3):
            x @ w
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=capture_on):
        y = x @ w
    return pool_memory(g.pool()).allocated_bytes

other = pool_bytes(torch.cuda.Stream(), torch.cuda.Stream())
s = torch.cuda.Stream()
same = pool_bytes(s, s)
print(f"RESULT {other} {same}")
'''
"""Warm up a matmul on one stream and capture it on another, then warm up and capture on one stream: the graph pools' bytes."""


def warmup_stream_demo(timeout_s: float = 300) -> dict[str, int]:
    """In a fresh child process: the graph pool's allocated bytes when warm-up and capture used other streams, and one stream."""
    result = run_snippet(WARMUP_STREAM_SNIPPET, timeout_s)
    line = next((ln for ln in result.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"the warm-up demonstration failed in its child process:\n{result.summary()}")
    other, same = (int(v) for v in line.split()[1:])
    return {"other_stream_pool_allocated_bytes": other, "same_stream_pool_allocated_bytes": same}


def cond_capture_demo() -> dict[str, Any]:
    """Capture ``torch.cond`` into a CUDA conditional node where this torch can; replay with the predicate true and false."""
    import torch

    info: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.version.cuda}
    try:
        from torch._higher_order_ops.cudagraph_conditional_nodes import (
            ControlFlowOpWarmupDispatchMode, CUDAGraphCaptureControlFlowOpDispatchMode)
    except ImportError as exc:
        return {**info, "supported": False, "reason": f"no torch._higher_order_ops.cudagraph_conditional_nodes ({exc})"}
    if not hasattr(torch.cuda.CUDAGraph, "begin_capture_to_if_node"):
        return {**info, "supported": False, "reason": "torch.cuda.CUDAGraph has no begin_capture_to_if_node"}
    from ..gpulib.graphs import require_cuda

    require_cuda("capturing torch.cond")
    x = torch.ones(4, device="cuda")
    flag = torch.tensor(True, device="cuda")

    def step(flag: Any, x: Any) -> Any:
        return torch.cond(flag, lambda v: v * 2, lambda v: v - 2, (x,))

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), ControlFlowOpWarmupDispatchMode():
        step(flag, x)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=side), CUDAGraphCaptureControlFlowOpDispatchMode():
        out = step(flag, x)
    flag.fill_(True)
    g.replay()
    when_true = out[0].item()
    flag.fill_(False)
    g.replay()
    when_false = out[0].item()
    return {**info, "supported": True, "when_true": when_true, "when_false": when_false}


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


PLAIN_COND_IN_CAPTURE = '''import torch
x = torch.ones(4, device="cuda")
flag = torch.tensor(True, device="cuda")
step = lambda flag, x: torch.cond(flag, lambda v: v * 2, lambda v: v - 2, (x,))
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    step(flag, x)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g, stream=s):
    out = step(flag, x)
flag.fill_(False)
g.replay()
print("replayed:", out.tolist())
'''
"""torch.cond captured with no dispatch mode: without conditional-node support its predicate is read on the host."""


def cond_lines() -> str:
    """Lesson 06: can this torch capture torch.cond into a conditional node, and what a plain torch.cond in capture does."""
    demo = cond_capture_demo()
    if demo["supported"]:
        first = (f"torch {demo['torch']} (CUDA {demo['cuda']}) captured torch.cond into a conditional node: replayed "
                 f"with the predicate true it gave {demo['when_true']:g}, false {demo['when_false']:g}")
    else:
        first = f"torch {demo['torch']} (CUDA {demo['cuda']}) cannot capture torch.cond into a conditional node: {demo['reason']}"
    plain = run_snippet(PLAIN_COND_IN_CAPTURE, 300)
    lines = [first, "a plain torch.cond inside torch.cuda.graph, in a child process:", plain.summary()]
    return "\n".join(lines)


def recorded_item_in_capture(data: dict[str, Any] | None = None) -> str:
    """The error lines the course's benchmark run recorded for ITEM_IN_CAPTURE (a sync inside capture)."""
    return "\n".join(recorded_fact("item_in_capture_errors", data))


def record_facts() -> dict[str, Any]:
    """On a GPU: every live demonstration lessons 03 and 06 show, for the benchmark to store (section 'facts')."""
    from .mistakes import record_mistakes

    return {
        "shared_pool": shared_pool_lines(),
        "graphed_alias": graphed_alias_lines(),
        "warmup_stream": warmup_stream_demo(),
        "cond": cond_lines(),
        "item_in_capture_errors": run_failing_capture(ITEM_IN_CAPTURE).errors,
        "mistakes": record_mistakes(),
    }


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
