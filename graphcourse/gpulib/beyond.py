"""GPU side of lesson 10: two streams in one graph, random numbers in a graph, capture modes, a graphed training step.

Every function that needs a GPU says so with :class:`graphcourse.errors.NoCudaError`; the pure parts
(:func:`parse_dot`, the child snippets, the training model and its eager loop) run on a CPU too, so they
are tested there. Sources, checked against PyTorch 2.11-era code:

- ``torch/cuda/graphs.py``: ``graph.__init__`` (``default_capture_stream`` made once per process, on the
  device current at the first capture without ``stream=``), ``CUDAGraph.capture_begin``
  (``capture_error_mode``), ``CUDAGraph.enable_debug_mode`` / ``debug_dump`` (DOT file of the graph),
  ``CUDAGraph.register_generator_state``, ``make_graphed_callables`` (refuses autocast with its cache on).
- ``aten/src/ATen/cuda/CUDAGeneratorImpl.cpp``: ``CUDAGeneratorState::register_graph`` /
  ``capture_prologue`` / ``replay_prologue`` / ``increase`` (seed and offset in device memory, the
  whole-graph increment added to the host offset at every replay; "Attempt to increase offset for a CUDA
  generator not in capture mode." for a generator the graph does not know).
- ``docs/source/notes/cuda.md`` ("CUDA Graphs": whole-network capture, partial-network capture, usage with
  multiple streams, usage with torch.cuda.amp); ``torch/optim/adamw.py`` (``capturable``).
- CUDA runtime API, ``cudaStreamBeginCapture`` / ``cudaThreadExchangeStreamCaptureMode`` (what each
  ``cudaStreamCaptureMode`` prohibits), and the programming guide's "Cross-stream Dependencies and Events".
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import Tensor, nn

from ..core.child import run_snippet
from .graphs import cuda_time_us, require_cuda

__all__ = [
    "CAPTURE_MODES",
    "GraphShape",
    "TrainConfig",
    "WholeStepGraph",
    "capture_mode_matrix",
    "capture_mode_snippet",
    "dropout_replays",
    "fork_join",
    "generator_facts",
    "graph_shape",
    "make_batches",
    "noncapturable_refusal",
    "make_model",
    "make_optimizer",
    "parse_dot",
    "partial_step",
    "replay_matches_eager_sequence",
    "result_line",
    "train_eager",
    "unforked_join_snippet",
    "unjoined_fork_snippet",
    "debug_graph",
]

RESULT = "RESULT "
"""Prefix of the one JSON line a child snippet prints: what it found, for the parent to read."""


def result_line(stdout: str) -> dict[str, Any] | None:
    """The JSON a child printed after ``RESULT `` (its last such line), or None if it printed none."""
    found = None
    for line in stdout.splitlines():
        if line.startswith(RESULT):
            found = json.loads(line[len(RESULT):])
    return found


# --------------------------------------------------------------------------- the shape of a graph


@dataclass(frozen=True)
class GraphShape:
    """Nodes and edges of a captured graph, read from CUDA's DOT dump (cudaGraphDebugDotPrint)."""

    nodes: int
    edges: int
    kernels: int
    longest_path: int
    widest_level: int
    kinds: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"nodes": self.nodes, "edges": self.edges, "kernels": self.kernels,
                "longest_path": self.longest_path, "widest_level": self.widest_level, "kinds": dict(self.kinds)}


_DOT_EDGE = re.compile(r'^\s*"([^"]+)"\s*->\s*"([^"]+)"')
_DOT_NODE = re.compile(r'^\s*"([^"]+)"\s*\[(.*)$')


def _node_kind(attrs: str) -> str:
    text = attrs.upper()
    for kind in ("KERNEL", "MEMSET", "MEMCPY", "EVENT_RECORD", "WAIT_EVENT", "EMPTY", "HOST", "MEM_ALLOC",
                 "MEM_FREE", "CONDITIONAL", "GRAPH"):
        if kind in text:
            return kind.lower()
    return "other"


def parse_dot(text: str) -> GraphShape:
    """Count the nodes and edges of a DOT graph as ``CUDAGraph.debug_dump`` writes it; depth and width of its DAG.

    A node starts on a line ``"name"[...`` (its label may go on over several lines, as CUDA's verbose dump's
    HTML tables do); an edge is a line ``"a" -> "b"``. ``longest_path`` is the number of nodes on the longest
    dependency chain; ``widest_level`` the most nodes at one depth (the most that could run at once).
    Subgraph clusters and attribute lines are not nodes.
    """
    if not isinstance(text, str) or "digraph" not in text:
        raise ValueError("parse_dot expects the text of a DOT file ('digraph ...'), as CUDAGraph.debug_dump writes.")
    texts: dict[str, list[str]] = {}
    edges: set[tuple[str, str]] = set()
    current: str | None = None
    for line in text.splitlines():
        edge = _DOT_EDGE.match(line)
        if edge:
            edges.add((edge.group(1), edge.group(2)))
            current = None
            continue
        node = _DOT_NODE.match(line)
        if node:
            current = node.group(1)
            texts.setdefault(current, []).append(node.group(2))
        elif current is not None:
            texts[current].append(line)
    kinds = {name: _node_kind(" ".join(lines)) for name, lines in texts.items()}
    for a, b in edges:
        kinds.setdefault(a, "other")
        kinds.setdefault(b, "other")
    preds: dict[str, set[str]] = {n: set() for n in kinds}
    for a, b in edges:
        preds[b].add(a)
    depth: dict[str, int] = {}

    def level(n: str, seen: frozenset = frozenset()) -> int:
        if n in depth:
            return depth[n]
        if n in seen:
            raise ValueError(f"the DOT graph has a cycle through {n!r}: a CUDA graph is a DAG.")
        depth[n] = 1 + max((level(p, seen | {n}) for p in preds[n]), default=0)
        return depth[n]

    for n in kinds:
        level(n)
    per_level: dict[int, int] = {}
    for d in depth.values():
        per_level[d] = per_level.get(d, 0) + 1
    counts: dict[str, int] = {}
    for k in kinds.values():
        counts[k] = counts.get(k, 0) + 1
    return GraphShape(len(kinds), len(edges), counts.get("kernel", 0), max(depth.values(), default=0),
                      max(per_level.values(), default=0), counts)


def graph_shape(graph: Any) -> GraphShape:
    """The shape of a captured ``torch.cuda.CUDAGraph`` made by :func:`debug_graph`, read before instantiation."""
    import warnings

    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="DEBUG: calling")   # torch's TORCH_WARN progress notes
        path = os.path.join(tmp, "graph.dot")
        try:
            graph.debug_dump(path)
        except RuntimeError:
            # newer torch routes debug_dump through the cuda-bindings package; the C++ method
            # (cudaGraphDebugDotPrint) is the one torch 2.11 calls, so try it before giving up
            torch._C._CUDAGraph.debug_dump(graph, path)
        if not os.path.exists(path):
            raise RuntimeError("debug_dump wrote no file: the cudaGraph_t was gone. Make the graph with "
                               "torch.cuda.CUDAGraph(keep_graph=True) and call enable_debug_mode() before capture "
                               "(see debug_graph).")
        with open(path) as f:
            return parse_dot(f.read())


# --------------------------------------------------------------------------- fork and join


def _branch(x: Tensor, w: Tensor, n: int) -> Tensor:
    for _ in range(n):
        x = torch.tanh(x @ w)
    return x


def debug_graph() -> tuple[Any, bool]:
    """A ``torch.cuda.CUDAGraph`` whose ``cudaGraph_t`` survives capture, so ``debug_dump`` can print it.

    ``CUDAGraph::capture_end`` (``aten/src/ATen/cuda/CUDAGraph.cpp``, 2.11-era) instantiates the graph and,
    unless it was made with ``keep_graph=True``, sets ``has_graph_ = false`` (destroying the ``cudaGraph_t``
    too unless ``enable_debug_mode()`` was called); ``CUDAGraph::debug_dump`` prints only ``if (has_graph_)``,
    so it writes no file, silently, debug mode or not. So: make the graph
    with ``keep_graph=True`` where this torch has the argument (it then instantiates at ``instantiate()`` or
    the first replay), and also ``enable_debug_mode()``. Returns ``(graph, kept)``; ``kept`` is False on a
    torch without ``keep_graph``, where the dump may be missing.
    """
    try:
        graph, kept = torch.cuda.CUDAGraph(keep_graph=True), True
    except TypeError:                                # a torch whose CUDAGraph has no keep_graph argument
        graph, kept = torch.cuda.CUDAGraph(), False
    graph.enable_debug_mode()
    return graph, kept


def fork_join(n_per_branch: int = 4, size: int = 256, two_streams: bool = True, debug: bool = True) -> dict[str, Any]:
    """Capture ``tanh(x)``, then two chains of ``n_per_branch`` (matmul, tanh) pairs, then their sum.

    With ``two_streams`` the second chain runs on a side stream between a fork (``side.wait_stream(main)``)
    and a join (``main.wait_stream(side)``), as docs/source/notes/cuda.md, "Usage with multiple streams";
    otherwise everything is captured on one stream. Returns the graph, its output, whether a replay equals
    the eager result, and (with ``debug``) the graph's shape from its DOT dump.

    The graph reads ``x``, ``w1`` and ``w2`` at the addresses it captured, so they are returned with it
    (``"inputs"``): whoever replays the graph must hold them. Dropping them hands their memory back to the
    caching allocator while the graph still reads it (PyTorch's notes: "you must maintain long-lived
    references to tensors that hold input and output data during capture").
    """
    require_cuda("capturing work on two streams")
    gen = torch.Generator(device="cpu").manual_seed(0)
    x = torch.randn(size, size, generator=gen).cuda()
    w1 = (torch.randn(size, size, generator=gen) / size ** 0.5).cuda()
    w2 = (torch.randn(size, size, generator=gen) / size ** 0.5).cuda()
    capture_stream, side = torch.cuda.Stream(), torch.cuda.Stream()

    def work() -> Tensor:
        main = torch.cuda.current_stream()
        h = torch.tanh(x)                            # before the fork: both branches depend on it
        if not two_streams:
            return _branch(h, w1, n_per_branch) + _branch(h, w2, n_per_branch)
        side.wait_stream(main)                       # fork: the side stream joins the capture
        out_a = _branch(h, w1, n_per_branch)         # branch A on the capturing stream
        with torch.cuda.stream(side):
            out_b = _branch(h, w2, n_per_branch)     # branch B on the side stream
        main.wait_stream(side)                       # join: back into the capturing stream
        return out_a + out_b                         # after the join: depends on both branches

    capture_stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(capture_stream):
        for _ in range(2):                           # warm-up (cuBLAS handles) on the capturing stream
            work()
    torch.cuda.synchronize()
    kept = False
    if debug:
        graph, kept = debug_graph()
    else:
        graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=capture_stream):
        out = work()
    shape = None
    if debug:
        try:                                         # before instantiate: the kept cudaGraph_t is printed
            shape = graph_shape(graph).as_dict()
        except Exception as exc:  # the dump needs cudaGraphDebugDotPrint through torch; say why not
            shape = {"error": f"{type(exc).__name__}: {exc}"}
        shape["keep_graph"] = kept
        if kept:
            graph.instantiate()
    graph.replay()
    torch.cuda.synchronize()
    h = torch.tanh(x)
    expected = _branch(h, w1, n_per_branch) + _branch(h, w2, n_per_branch)
    return {"graph": graph, "output": out, "inputs": (x, w1, w2), "shape": shape,
            "matches_eager": bool(torch.allclose(out, expected, atol=1e-5))}


def unjoined_fork_snippet() -> str:
    """A child process that forks a side stream into a capture and never joins it back."""
    return '''
import json, torch
x = torch.ones(1024, device="cuda")
side = torch.cuda.Stream()
g = torch.cuda.CUDAGraph()
print("capturing a fork with no join")
with torch.cuda.graph(g):
    side.wait_stream(torch.cuda.current_stream())   # fork
    with torch.cuda.stream(side):
        y = x * 2                                  # work on the side stream
    # missing: torch.cuda.current_stream().wait_stream(side)
print("RESULT " + json.dumps({"captured": True}))
'''


def unforked_join_snippet() -> str:
    """A child process that forgets the fork but keeps the join: a launch on a stream outside the capture,
    then the capturing stream waits on that stream (CUDA: cudaErrorStreamCaptureIsolation)."""
    return '''
import json, torch
x = torch.ones(1024, device="cuda")
y = torch.empty_like(x)
side = torch.cuda.Stream()
g = torch.cuda.CUDAGraph()
print("capturing a join to a stream that was never forked")
with torch.cuda.graph(g):
    # missing: side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.mul(x, 2, out=y)                     # not capturing: runs eagerly (no allocation, so
                                                   # no cudaMalloc refusal hides the join's error)
    torch.cuda.current_stream().wait_stream(side)  # join: waits on an event of uncaptured work
print("RESULT " + json.dumps({"captured": True}))
'''


# --------------------------------------------------------------------------- random numbers in a graph


def dropout_replays(p: float = 0.5, n: int = 1 << 20, replays: int = 4, seed: int = 7) -> dict[str, Any]:
    """Capture one dropout of a vector of ones; replay it: fraction dropped per replay, and whether replays differ."""
    require_cuda("dropout in a CUDA graph")
    x = torch.ones(n, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.nn.functional.dropout(x, p, training=True)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=side):
        out = torch.nn.functional.dropout(x, p, training=True)
    torch.manual_seed(seed)
    masks = []
    for _ in range(replays):
        g.replay()
        masks.append(out.clone())
    eager = [torch.nn.functional.dropout(x, p, training=True) for _ in range(replays)]
    kept_values = torch.unique(torch.stack(masks)).tolist()
    pairs = [(i, j) for i in range(replays) for j in range(i + 1, replays)]
    return {
        "p": p, "n": n, "replays": replays,
        "dropped_fraction": [float((m == 0).float().mean()) for m in masks],
        "eager_dropped_fraction": [float((m == 0).float().mean()) for m in eager],
        "values": [round(v, 6) for v in kept_values],
        "replays_differ": all(not torch.equal(masks[i], masks[j]) for i, j in pairs),
        "agreement_between_replays": float((masks[0] == masks[1]).float().mean()) if replays > 1 else None,
    }


def replay_matches_eager_sequence(p: float = 0.5, n: int = 1 << 16, steps: int = 3, seed: int = 11) -> dict[str, Any]:
    """After ``torch.manual_seed(seed)``, does replay k draw what the k-th eager call after the same seed drew?"""
    require_cuda("comparing graph replays with eager calls")
    x = torch.ones(n, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.nn.functional.dropout(x, p, training=True)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=side):
        out = torch.nn.functional.dropout(x, p, training=True)
    gen = torch.cuda.default_generators[torch.cuda.current_device()]
    torch.manual_seed(seed)
    offsets = [gen.get_offset()]
    eager = []
    for _ in range(steps):
        eager.append(torch.nn.functional.dropout(x, p, training=True))
        offsets.append(gen.get_offset())
    torch.manual_seed(seed)
    replay_offsets = [gen.get_offset()]
    same = []
    for k in range(steps):
        g.replay()
        replay_offsets.append(gen.get_offset())
        same.append(bool(torch.equal(out, eager[k])))
    return {"steps": steps, "replay_equals_eager": same, "eager_offsets": offsets, "replay_offsets": replay_offsets}


_GENERATOR_SNIPPET = '''
import json, torch
gen = torch.Generator(device="cuda").manual_seed(3)
x = torch.empty(4096, device="cuda")
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    x.uniform_(generator=gen)
torch.cuda.synchronize()
g = torch.cuda.CUDAGraph()
REGISTER = {register}
if REGISTER:
    g.register_generator_state(gen)
result = {{"registered": REGISTER, "has_register_generator_state": hasattr(g, "register_generator_state")}}
with torch.cuda.graph(g, stream=side):
    x.uniform_(generator=gen)
draws = []
for _ in range(3):
    g.replay()
    draws.append(x.clone())
torch.cuda.synchronize()
result["replays_differ"] = not torch.equal(draws[0], draws[1]) and not torch.equal(draws[1], draws[2])
result["offset_after"] = gen.get_offset()
print("RESULT " + json.dumps(result))
'''


def generator_snippet(register: bool) -> str:
    """A child process that draws from a non-default CUDA generator inside a graph, registered or not."""
    return _GENERATOR_SNIPPET.format(register=bool(register))


def generator_facts(timeout_s: float = 60.0) -> dict[str, Any]:
    """What happens with a generator the graph knows (registered) and one it does not, each in a child process."""
    out: dict[str, Any] = {}
    for name, register in (("registered", True), ("unregistered", False)):
        done = run_snippet(generator_snippet(register), timeout_s=timeout_s)
        out[name] = {"returncode": done.returncode, "errors": done.errors[:6], "result": result_line(done.stdout)}
    return out


# --------------------------------------------------------------------------- capture_error_mode

CAPTURE_MODES = ("global", "thread_local", "relaxed")

_MODE_SNIPPET = '''
import json, threading, torch
MODE, WHERE = {mode!r}, {where!r}
torch.ones(1, device="cuda")                       # context made before the capture
result = {{"mode": MODE, "where": WHERE}}
go, done = threading.Event(), threading.Event()

def unsafe_call():
    try:
        big = torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda")   # a fresh cudaMalloc
        result["unsafe_call"] = "ok"
        del big
    except Exception as exc:
        result["unsafe_call"] = (type(exc).__name__ + ": " + str(exc)).splitlines()[0]

def other_thread():
    go.wait()
    unsafe_call()
    done.set()

if WHERE == "other thread":
    t = threading.Thread(target=other_thread)
    t.start()
x = torch.ones(1024, device="cuda")
s = torch.cuda.Stream()
g = torch.cuda.CUDAGraph()
try:
    with torch.cuda.graph(g, stream=s, capture_error_mode=MODE):
        y = x * 2
        if WHERE == "other thread":
            go.set()
            done.wait(20)
        else:
            with torch.cuda.stream(torch.cuda.Stream()):   # not the capturing stream: torch does not
                unsafe_call()                              # switch the mode to relaxed for this one
        z = y + 1
    g.replay()
    torch.cuda.synchronize()
    result["capture"] = "ok, replay gives " + str(float(z[0]))
except Exception as exc:
    result["capture"] = (type(exc).__name__ + ": " + str(exc)).splitlines()[0]
print("RESULT " + json.dumps(result))
'''


def capture_mode_snippet(mode: str, where: str) -> str:
    """A child process: capture with `mode` while a 256 MiB cudaMalloc happens in `where` ('other thread' or 'same thread')."""
    if mode not in CAPTURE_MODES:
        raise ValueError(f"capture_error_mode is one of {CAPTURE_MODES}, got {mode!r}.")
    if where not in ("other thread", "same thread"):
        raise ValueError(f"where is 'other thread' or 'same thread', got {where!r}.")
    return _MODE_SNIPPET.format(mode=mode, where=where)


def capture_mode_matrix(timeout_s: float = 60.0) -> dict[str, dict[str, Any]]:
    """For each capture_error_mode and each place of the unsafe call: what the call and the capture did."""
    table: dict[str, dict[str, Any]] = {}
    for mode in CAPTURE_MODES:
        for where in ("other thread", "same thread"):
            done = run_snippet(capture_mode_snippet(mode, where), timeout_s=timeout_s)
            found = result_line(done.stdout) or {}
            table.setdefault(mode, {})[where] = {
                "unsafe_call": found.get("unsafe_call", "no result"),
                "capture": found.get("capture", (done.errors or ["no result"])[-1]),
                "returncode": done.returncode,
            }
    return table


# --------------------------------------------------------------------------- a training step


@dataclass(frozen=True)
class TrainConfig:
    """A small MLP regression where launch overhead dominates: width x depth, a batch, dropout, AdamW."""

    width: int = 256
    depth: int = 4
    batch: int = 32
    dropout: float = 0.1
    lr: float = 3e-3
    steps: int = 40
    seed: int = 0


def make_model(config: TrainConfig, device: str | torch.device = "cpu") -> nn.Module:
    """The same weights for the same seed, on any device."""
    torch.manual_seed(config.seed)
    layers: list[nn.Module] = []
    for _ in range(config.depth - 1):
        layers += [nn.Linear(config.width, config.width), nn.ReLU(), nn.Dropout(config.dropout)]
    layers.append(nn.Linear(config.width, config.width))
    return nn.Sequential(*layers).to(device)


def make_optimizer(model: nn.Module, config: TrainConfig, capturable: bool) -> torch.optim.Optimizer:
    """AdamW; ``capturable=True`` keeps its step count on the device so ``step()`` can be captured."""
    return torch.optim.AdamW(model.parameters(), lr=config.lr, capturable=capturable)


def make_batches(config: TrainConfig, device: str | torch.device = "cpu", distinct: int = 4) -> list[tuple[Tensor, Tensor]]:
    """`steps` (input, target) pairs from a fixed CPU generator, cycling through `distinct` batches: the same data everywhere.

    The target is a fixed random linear map of the input; cycling a few batches lets a short run show its
    loss falling (the point is the graph's timing and the curve's agreement, not generalisation).
    """
    gen = torch.Generator().manual_seed(config.seed + 1)
    target_w = torch.randn(config.width, config.width, generator=gen) / config.width ** 0.5
    pairs = []
    for _ in range(distinct):
        x = torch.randn(config.batch, config.width, generator=gen)
        pairs.append((x.to(device), (x @ target_w).to(device)))
    return [pairs[i % distinct] for i in range(config.steps)]


def _autocast(device: torch.device, dtype: torch.dtype | None):
    import contextlib

    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=dtype, cache_enabled=False)


def train_eager(config: TrainConfig, device: str | torch.device = "cpu", capturable: bool = False,
                autocast_dtype: torch.dtype | None = None, rng_seed: int = 123) -> list[float]:
    """The plain training loop: the loss of each step, from the same weights, data and dropout seed."""
    device = torch.device(device)
    model = make_model(config, device)
    opt = make_optimizer(model, config, capturable)
    loss_fn = nn.MSELoss()
    torch.manual_seed(rng_seed)
    losses = []
    for x, y in make_batches(config, device):
        opt.zero_grad(set_to_none=True)
        with _autocast(device, autocast_dtype):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return [float(v) for v in torch.stack(losses).cpu()]


class WholeStepGraph:
    """Forward, loss, backward and ``optimizer.step()`` captured as one graph (docs: "Whole-network capture").

    Static input and target buffers; warm-up on a side stream; ``zero_grad(set_to_none=True)`` just before
    capture so backward allocates the ``.grad`` tensors from the graph's pool; AdamW with ``capturable=True``.
    Warm-up moved the weights and the optimizer state, so they are put back afterwards (in place: the graph
    holds their addresses), and the run starts from the same point as an eager one.
    """

    def __init__(self, config: TrainConfig, autocast_dtype: torch.dtype | None = None, warmup: int = 3) -> None:
        require_cuda("capturing a training step")
        self.config = config
        device = torch.device("cuda")
        self.model = make_model(config, device)
        self.opt = make_optimizer(self.model, config, capturable=True)
        self.loss_fn = nn.MSELoss()
        x0, y0 = make_batches(config, device)[0]
        self.static_x, self.static_y = x0.clone(), y0.clone()
        initial = [p.detach().clone() for p in self.model.parameters()]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(warmup):
                self.opt.zero_grad(set_to_none=True)
                with _autocast(device, autocast_dtype):
                    loss = self.loss_fn(self.model(self.static_x), self.static_y)
                loss.backward()
                self.opt.step()
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        self.opt.zero_grad(set_to_none=True)
        start = time.perf_counter()
        with torch.cuda.graph(self.graph, stream=side):
            with _autocast(device, autocast_dtype):
                self.static_loss = self.loss_fn(self.model(self.static_x), self.static_y)
            self.static_loss.backward()
            self.opt.step()
        torch.cuda.synchronize()
        self.capture_s = time.perf_counter() - start
        with torch.no_grad():                        # back to the starting point, in place
            for p, p0 in zip(self.model.parameters(), initial):
                p.copy_(p0)
            for state in self.opt.state.values():
                for value in state.values():
                    if torch.is_tensor(value):
                        value.zero_()                # AdamW's fresh state: step 0, zero moments

    def step(self, x: Tensor, y: Tensor) -> Tensor:
        """One training step: copy the batch into the static buffers, replay; the static loss tensor."""
        self.static_x.copy_(x)
        self.static_y.copy_(y)
        self.graph.replay()
        return self.static_loss

    def train(self, rng_seed: int = 123) -> list[float]:
        """The loss of each step over the config's batches (seeded as :func:`train_eager`)."""
        torch.manual_seed(rng_seed)
        losses = [self.step(x, y).detach().clone() for x, y in make_batches(self.config, "cuda")]
        return [float(v) for v in torch.stack(losses).cpu()]


def partial_step(config: TrainConfig, capturable: bool = False) -> tuple[Callable[[Tensor, Tensor], Tensor], Any]:
    """The model's forward and backward graphed with ``make_graphed_callables``; loss and optimizer eager.

    Returns ``(step, model)``: ``step(x, y)`` runs one training step and returns the loss.
    """
    require_cuda("make_graphed_callables")
    model = make_model(config, "cuda")
    opt = make_optimizer(model, config, capturable)
    loss_fn = nn.MSELoss()
    sample = torch.randn(config.batch, config.width, device="cuda")
    graphed = torch.cuda.make_graphed_callables(model, (sample,))

    def step(x: Tensor, y: Tensor) -> Tensor:
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(graphed(x), y)
        loss.backward()
        opt.step()
        return loss

    return step, graphed


def train_partial(config: TrainConfig, rng_seed: int = 123) -> list[float]:
    """The loss of each step with the model graphed by ``make_graphed_callables``."""
    step, _ = partial_step(config)
    torch.manual_seed(rng_seed)
    losses = [step(x, y).detach() for x, y in make_batches(config, "cuda")]
    return [float(v) for v in torch.stack(losses).cpu()]


def time_training(config: TrainConfig, repeats: int = 5, steps_per_timing: int = 50) -> dict[str, list[float]]:
    """µs per training step, eager / whole-step graph / partial graph (and bf16 autocast pairs), interleaved."""
    require_cuda("timing training steps")
    batches = make_batches(config, "cuda")
    x, y = batches[0]
    eager_model = make_model(config, "cuda")
    eager_opt = make_optimizer(eager_model, config, capturable=False)
    loss_fn = nn.MSELoss()

    def eager_step(dtype: torch.dtype | None = None) -> Callable[[], None]:
        def run() -> None:
            eager_opt.zero_grad(set_to_none=True)
            with _autocast(torch.device("cuda"), dtype):
                loss = loss_fn(eager_model(x), y)
            loss.backward()
            eager_opt.step()
        return run

    whole = WholeStepGraph(config)
    whole_bf16 = WholeStepGraph(config, autocast_dtype=torch.bfloat16)
    part, _ = partial_step(config)
    timers = {
        "eager": eager_step(),
        "graph": lambda: whole.step(x, y),
        "partial": lambda: part(x, y),
        "eager_bf16": eager_step(torch.bfloat16),
        "graph_bf16": lambda: whole_bf16.step(x, y),
    }
    samples: dict[str, list[float]] = {k: [] for k in timers}
    for _ in range(repeats):
        for name, fn in timers.items():
            samples[name].append(cuda_time_us(fn, iters=steps_per_timing, warmup=5))
    samples["capture_s"] = [whole.capture_s]
    return samples


def count_kernels_per_step(config: TrainConfig) -> int | None:
    """Kernels one eager training step launches (torch.profiler); None if the profiler sees none."""
    from .graphs import kernel_profile

    model = make_model(config, "cuda")
    opt = make_optimizer(model, config, capturable=False)
    loss_fn = nn.MSELoss()
    x, y = make_batches(config, "cuda")[0]

    def run() -> None:
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()

    try:
        return int(round(kernel_profile(run, iters=3).kernels_per_call))
    except Exception:
        return None


NONCAPTURABLE_SNIPPET = '''
import json, torch
model = torch.nn.Linear(64, 64).cuda()
opt = torch.optim.AdamW(model.parameters())          # capturable=False, the default
x = torch.randn(8, 64, device="cuda")
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    for _ in range(3):
        opt.zero_grad(set_to_none=True)
        model(x).sum().backward()
        opt.step()
torch.cuda.current_stream().wait_stream(side)
g = torch.cuda.CUDAGraph()
opt.zero_grad(set_to_none=True)
with torch.cuda.graph(g, stream=side):
    model(x).sum().backward()
    opt.step()
print("RESULT " + json.dumps({"captured": True}))
'''
"""A child process capturing AdamW's step without ``capturable=True``."""


def noncapturable_refusal(timeout_s: float = 60.0) -> dict[str, Any]:
    """What capturing a non-capturable AdamW step does (a child process: the capture may fail)."""
    done = run_snippet(NONCAPTURABLE_SNIPPET, timeout_s=timeout_s)
    return {"returncode": done.returncode, "errors": done.errors[:6]}


def autocast_cache_refusal() -> str:
    """What ``make_graphed_callables`` says under autocast with its weight-cast cache on (the default)."""
    require_cuda("make_graphed_callables")
    model = nn.Linear(8, 8).cuda()
    try:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            torch.cuda.make_graphed_callables(model, (torch.randn(4, 8, device="cuda"),))
    except RuntimeError as exc:
        return str(exc).splitlines()[0]
    return "no error"
