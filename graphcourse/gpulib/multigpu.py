"""Two GPUs: an all-reduce captured in a CUDA graph (NCCL), and the side-stream trap of pytorch/pytorch#87794.

:func:`run_allreduce` starts ``world`` processes with ``torch.multiprocessing.spawn``; each joins a
process group, checks that an all-reduce (eager, then replayed from a graph) gives the right sum, and
times all-reduces of a few sizes eagerly and replayed from a graph. With ``backend="gloo"`` the same
plumbing runs on CPU tensors (no graph: gloo runs on the host), which is how it is tested without GPUs.

Sources: ``docs/source/notes/cuda.md``, "Usage with DistributedDataParallel" (NCCL 2.9.6 or later allows
collectives in a graph); ``torch/cuda/graphs.py``, ``graph.__init__`` (without ``stream=`` a capture
uses ``graph.default_capture_stream``, a ``torch.cuda.Stream()`` made once per process on the device
that is current at the first such capture); pytorch/pytorch#87794 ("CUDA error: operation not permitted
when stream is capturing (2 GPUs)"). Keep NVLink multicast off on the course's machines:
``NCCL_NVLS_ENABLE=0`` (set here before NCCL starts unless the caller set it).
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import tempfile
import time
from typing import Any, Sequence

from ..core.child import run_snippet

__all__ = ["ALLREDUCE_SIZES", "TRAP_SNIPPETS", "free_port", "run_allreduce", "side_stream_trap", "trap_snippet"]

ALLREDUCE_SIZES = (256, 4096, 65536, 1 << 20)
"""float32 elements per all-reduce: 1 KiB, 16 KiB, 256 KiB, 4 MiB."""


def free_port() -> int:
    """A free TCP port on this host for the process group's rendezvous."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _time_us(fn: Any, iters: int, device: Any) -> float:
    import time

    if device.type == "cuda":
        from .timing import events_us

        return events_us(fn, iters)
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - t0) * 1e6 / iters


def capture_all_reduce(buf: Any, side: Any, ops: int = 1, warm: Any = None) -> Any:
    """A CUDA graph of `ops` all_reduces of `buf`, captured on the stream `side`.

    Three eager all_reduces of `warm` (default `buf`) run on `side` first, so that NCCL has set itself up before
    the capture: warm-up on a side stream, as in the CUDA-graphs section of PyTorch's CUDA semantics notes."""
    import torch
    import torch.distributed as dist

    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            dist.all_reduce(buf if warm is None else warm)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        for _ in range(ops):
            dist.all_reduce(buf)
    return graph


def _worker(rank: int, world: int, backend: str, port: int, sizes: Sequence[int], repeats: int,
            ops_per_graph: int, replays: int, out_path: str) -> None:
    import torch
    import torch.distributed as dist

    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    use_cuda = backend == "nccl"
    if use_cuda:
        torch.cuda.set_device(rank)          # before anything else: every default stream on this rank's GPU
    device = torch.device("cuda", rank) if use_cuda else torch.device("cpu")
    kwargs = {"device_id": device} if use_cuda else {}
    import datetime

    dist.init_process_group(backend, rank=rank, world_size=world, timeout=datetime.timedelta(seconds=120), **kwargs)
    result: dict[str, Any] = {"backend": backend, "world": world, "rank": rank}
    try:
        expected = world * (world + 1) / 2
        buf = torch.full((1024,), float(rank + 1), device=device)
        dist.all_reduce(buf)
        result["eager_sum_ok"] = bool(torch.all(buf == expected))
        result["eager_sum"] = float(buf[0])
        if use_cuda:
            result["nccl_version"] = ".".join(str(v) for v in torch.cuda.nccl.version())
            g = capture_all_reduce(buf, torch.cuda.Stream(device=device))
            sums = []
            for _ in range(2):
                buf.fill_(float(rank + 1))
                g.replay()
                torch.cuda.synchronize()
                sums.append(float(buf[0]))
            result["graph_sums"] = sums
            result["graph_sum_ok"] = all(s == expected for s in sums) and bool(torch.all(buf == expected))
            result["expected_sum"] = expected
            del g
        rows = []
        for n in sizes:
            x = torch.zeros(n, device=device)      # zeros: repeated sums stay 0, the values never overflow
            if use_cuda:
                graph = capture_all_reduce(x, torch.cuda.Stream(device=device), ops=ops_per_graph)
            samples: dict[str, list[float]] = {"eager": [], "graph": []}
            for _ in range(repeats):
                dist.barrier()
                samples["eager"].append(_time_us(lambda: dist.all_reduce(x), replays * ops_per_graph, device))
                if use_cuda:
                    dist.barrier()
                    per_replay = _time_us(graph.replay, replays, device)
                    samples["graph"].append(per_replay / ops_per_graph)
            row: dict[str, Any] = {"elements": n, "bytes": 4 * n, "repeats": repeats,
                                   "ops_per_graph": ops_per_graph, "replays": replays}
            for name, vals in samples.items():
                if vals:
                    row[f"{name}_us"] = statistics.median(vals)
                    row[f"{name}_us_min"], row[f"{name}_us_max"] = min(vals), max(vals)
            if samples["graph"]:
                ratios = [a / b for a, b in zip(samples["eager"], samples["graph"])]
                row["speedup"] = statistics.median(ratios)
                row["speedup_min"], row["speedup_max"] = min(ratios), max(ratios)
            rows.append(row)
            if use_cuda:
                del graph
        result["rows"] = rows
    except Exception as exc:  # recorded, so the parent can say what failed on which rank
        result["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
    finally:
        with open(f"{out_path}.{rank}", "w") as f:
            json.dump(result, f)
        try:
            dist.destroy_process_group()
        except Exception:
            pass


def run_allreduce(backend: str = "nccl", world: int = 2, sizes: Sequence[int] = ALLREDUCE_SIZES,
                  repeats: int = 5, ops_per_graph: int = 16, replays: int = 50,
                  timeout_s: float = 240.0) -> dict[str, Any]:
    """Spawn `world` processes; return every rank's findings: sums checked, µs per all-reduce eager and in a graph.

    The ranks are killed if they have not finished after `timeout_s` (a rank that failed can leave the
    other waiting in a collective); a rank that left no result is reported as such.
    """
    import torch
    import torch.multiprocessing as mp

    if backend not in ("nccl", "gloo"):
        raise ValueError(f"backend is 'nccl' (GPUs, graphs) or 'gloo' (CPU plumbing), got {backend!r}.")
    if backend == "nccl" and torch.cuda.device_count() < world:
        raise RuntimeError(
            f"an NCCL all-reduce over {world} GPUs needs {world} GPUs; this machine has "
            f"{torch.cuda.device_count()}. Lessons show the figures recorded on the two-GPU machine."
        )
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "rank")
        context = mp.spawn(_worker, args=(world, backend, free_port(), tuple(sizes), repeats, ops_per_graph,
                                          replays, out), nprocs=world, join=False)
        deadline = time.monotonic() + timeout_s
        timed_out = False
        try:
            while not context.join(timeout=2):
                if time.monotonic() > deadline:
                    timed_out = True
                    break
        finally:
            for proc in context.processes:
                if proc.is_alive():
                    proc.kill()
                    proc.join(10)
        ranks = []
        for r in range(world):
            try:
                with open(f"{out}.{r}") as f:
                    ranks.append(json.load(f))
            except (OSError, json.JSONDecodeError):
                why = f"timed out after {timeout_s:g} s" if timed_out else "the process died"
                ranks.append({"rank": r, "error": f"no result from rank {r}: {why}"})
    return {"ranks": ranks, "nccl_nvls_enable": os.environ.get("NCCL_NVLS_ENABLE"), "timed_out": timed_out}


# --------------------------------------------------------------------------- the side-stream trap (#87794)

_TRAP_HEAD = '''
import json, torch
x = torch.randn(4096, 4096, device="cuda:1")       # 64 MiB on the second GPU; cuda:0 is current
result = {"current_device": torch.cuda.current_device(), "data_device": str(x.device)}
'''

_REPLAY_ON_DATA_GPU = '''with torch.cuda.device(x.device):
    x.fill_(1.0)
    g.replay()
    torch.cuda.synchronize()
result["replay_value"] = float(y[0, 0])
print("RESULT " + json.dumps(result))
'''

TRAP_SNIPPETS = {
    "trap": _TRAP_HEAD + '''
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):          # no stream=: its side stream is made on the current device, cuda:0
    y = x * 2                      # the new 64 MiB is allocated on cuda:1, outside the capture
print("RESULT " + json.dumps(result))
''',
    "fix_stream": _TRAP_HEAD + '''
s = torch.cuda.Stream(device=x.device)                # the capture stream on the data's GPU
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g, stream=s):
    y = x * 2
''' + _REPLAY_ON_DATA_GPU,
    "fix_device": _TRAP_HEAD + '''
with torch.cuda.device(x.device):                     # the data's GPU is current for the whole capture
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = x * 2
# the replay below runs with the data's GPU current as well, as in fix_stream
''' + _REPLAY_ON_DATA_GPU,
    "stale_default_stream": _TRAP_HEAD + '''
w = torch.ones(16, device="cuda:0")
g0 = torch.cuda.CUDAGraph()
with torch.cuda.graph(g0):                            # first capture without stream=, on cuda:0
    v = w * 2
result["default_capture_stream_device"] = str(torch.cuda.graph.default_capture_stream.device)
print("RESULT " + json.dumps(result), flush=True)
with torch.cuda.device(x.device):                     # now cuda:1 is current, but the default
    g = torch.cuda.CUDAGraph()                        # capture stream was made on cuda:0 and kept
    with torch.cuda.graph(g):
        y = x * 2
print("RESULT " + json.dumps(result))
''',
    "silent_empty_graph": '''
import json, warnings, torch
x = torch.ones(1024, device="cuda:1")              # small: its result fits the cached segment, no cudaMalloc
result = {"current_device": torch.cuda.current_device(), "data_device": str(x.device)}
g = torch.cuda.CUDAGraph()
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    with torch.cuda.graph(g):      # the capture stream is on cuda:0 again
        y = x * 2                  # runs at once on cuda:1, outside the capture
result["warnings"] = [str(w.message).splitlines()[0] for w in seen]
x.fill_(5.0)
g.replay()                         # replays an empty graph: y is not recomputed
torch.cuda.synchronize(1)
result["replay_value"] = float(y[0])
result["expected_value"] = 10.0
print("RESULT " + json.dumps(result))
''',
}
"""Child programs for a machine with two GPUs: the trap, two fixes, the fix a cached stream defeats, and the silent
variant (pytorch/pytorch#87894: no allocation is refused, so the capture records nothing and replays do nothing)."""


def trap_snippet(name: str) -> str:
    """One of :data:`TRAP_SNIPPETS` by name, with a clear error for an unknown one."""
    if name not in TRAP_SNIPPETS:
        raise KeyError(f"no trap snippet {name!r}; there are {sorted(TRAP_SNIPPETS)}.")
    return TRAP_SNIPPETS[name]


def side_stream_trap(timeout_s: float = 60.0) -> dict[str, Any]:
    """Run each trap snippet in its own child process: exit code, error lines, result."""
    from .beyond import result_line

    out = {}
    for name in TRAP_SNIPPETS:
        done = run_snippet(TRAP_SNIPPETS[name], timeout_s=timeout_s)
        out[name] = {"returncode": done.returncode, "errors": done.errors[:6], "result": result_line(done.stdout),
                     "capture_refused": done.capture_refused}
    return out
