"""The live GPU demonstrations lessons 03 and 06 show, and the recording of them for machines without CUDA.

Each demonstration runs on a CUDA GPU (captures meant to fail run in a child Python, since a
failed capture can leave the process's CUDA context unusable). The lessons call them live on a
GPU (:mod:`graphcourse.lessons.compare`, :mod:`graphcourse.lessons.mistakes`); the benchmark
(``python -m graphcourse.gpulib.bench``) stores what :func:`record_facts` returns in the 'facts'
section of data/gpu_reference.json, which the lessons show, labelled, on a CPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.child import ChildResult, run_snippet

SNIPPETS: dict[str, str] = {
    'item_in_capture': '\nimport torch\nlogits = torch.randn(1, 1024, device="cuda")\ng = torch.cuda.CUDAGraph()\nwith torch.cuda.graph(g):\n    token = logits.argmax(-1)\n    token.item()                       # a sync inside capture\n',
    'default_stream': '\nimport torch\nx = torch.ones(1024, device="cuda")\nok = torch.cuda.CUDAGraph()\nwith torch.cuda.graph(ok):             # the context manager captures on its own side stream\n    y = x * 2\nprint("torch.cuda.graph: captured fine")\ng = torch.cuda.CUDAGraph()\ng.capture_begin()                      # by hand, on the current stream: the default stream\ny = x * 2\ng.capture_end()\n',
    'cold_cublas': '\nimport torch\nx = torch.randn(64, 64, device="cuda")\ng = torch.cuda.CUDAGraph()\nwith torch.cuda.graph(g):              # the first matmul of this process, captured without warm-up\n    y = x @ x\ng.replay(); torch.cuda.synchronize()\nprint("captured cold without an error; replay matches eager:", torch.allclose(y, x @ x))\n',
    'lazy_init_sync': '\nimport torch\nclass Decoder:\n    def __init__(self):\n        self.weights, self.scale = torch.randn(256, 256, device="cuda"), None\n    def __call__(self, x):\n        if self.scale is None:                             # lazy one-time set-up...\n            self.scale = self.weights.abs().max().item()   # ...with a sync\n        return (x @ self.weights) / self.scale\nx = torch.randn(8, 256, device="cuda")\nwarm, cold = Decoder(), Decoder()\nside = torch.cuda.Stream(); side.wait_stream(torch.cuda.current_stream())\nwith torch.cuda.stream(side):\n    for _ in range(3):\n        warm(x)                                            # warm-up on a side stream\ntorch.cuda.current_stream().wait_stream(side)\nwith torch.cuda.graph(torch.cuda.CUDAGraph(), stream=side):  # captured on the warm-up stream\n    warm(x)\nprint("warmed up first: captured fine")\nwith torch.cuda.graph(torch.cuda.CUDAGraph()):\n    # no warm-up: the lazy .item() runs inside capture\n    cold(x)\n',
    'branch_on_data': '\nimport torch\nx = torch.tensor([5.0, 6.0], device="cuda")\nwith torch.cuda.graph(torch.cuda.CUDAGraph()):\n    y = x * 2 if x[0] > 0 else -x      # `if tensor` reads the value on the CPU: a sync\n',
}
"""The GPU mistakes lesson 06 runs in a child process, by name (the benchmark records what each did on its GPU)."""


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

    from .graphs import require_cuda

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

    from .graphs import require_cuda

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
    from .graphs import require_cuda

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

def record_facts() -> dict[str, Any]:
    """On a GPU: every live demonstration lessons 03 and 06 show, for the benchmark to store (section 'facts')."""
    return {
        "shared_pool": shared_pool_lines(),
        "graphed_alias": graphed_alias_lines(),
        "warmup_stream": warmup_stream_demo(),
        "cond": cond_lines(),
        "item_in_capture_errors": run_failing_capture(ITEM_IN_CAPTURE).errors,
        "mistakes": record_mistakes(),
    }


def record_mistakes(timeout_s: float = 300.0) -> dict[str, dict[str, Any]]:
    """On a GPU: run every SNIPPETS entry in a child process; what each did, for the benchmark to record."""
    out = {}
    for name, code in SNIPPETS.items():
        result = run_snippet(code, timeout_s)
        out[name] = {"returncode": result.returncode, "errors": result.errors, "summary": result.summary()}
    return out
