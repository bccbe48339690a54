"""Decode loops that launch once for many tokens: K decode steps captured in one CUDA graph (lesson 08).

A :class:`MultiStepDecoder` keeps the whole loop state on the device: the token each sequence
feeds next, the position (one 0-dim tensor), a ``done`` flag per sequence and the tokens of
the last K steps. One replay runs K steps: each step chooses its next token on the device
(argmax), masks sequences that already emitted end-of-sequence (they keep emitting it), writes
the token where the next step reads it and advances the position, with no host sync. The host
launches once per K tokens and reads the tokens whenever it likes (a device-side copy).

With ``skip_done_steps=True`` each step is captured inside a CUDA graph IF node
(``CUDAGraph.begin_capture_to_if_node``, CUDA 12.4+): the GPU itself skips the step's kernels
once every sequence is done. Without CUDA the same loop runs eagerly (the CPU tests, the toy
twins), so its tokens can be checked against lesson 05's one-step-at-a-time loop.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import Tensor

from .graphs import TinyGPT

__all__ = [
    "DeviceLoopError",
    "LoopState",
    "MultiStepDecoder",
    "conditional_nodes_supported",
    "decode_k_steps",
    "graph_pool_bytes",
    "run_conditional_demo",
    "torch_features",
]

StepFn = Callable[[Tensor, Tensor, Any], Tensor]


class DeviceLoopError(ValueError):
    """A multi-step decode loop asked for something its static buffers cannot hold."""


def _cuda_version() -> tuple[int, int] | None:
    text = torch.version.cuda
    if not text:
        return None
    parts = text.split(".")
    try:
        return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        return None


def conditional_nodes_supported() -> bool:
    """True when this torch can capture an IF conditional node: a CUDA build of 12.4 or later with the method."""
    version = _cuda_version()
    return (
        version is not None
        and version >= (12, 4)
        and hasattr(torch.cuda.CUDAGraph, "begin_capture_to_if_node")
        and torch.cuda.is_available()
    )


def torch_features() -> dict[str, Any]:
    """Which of the features lessons 07 and 08 teach the installed torch has (plain data, for the recorded file)."""
    graph_cls = torch.cuda.CUDAGraph
    try:
        from torch._higher_order_ops import cudagraph_conditional_nodes as ccn  # internal: only probed
        ccn_names = sorted(n for n in ("if_else_node", "while_loop_node") if hasattr(ccn, n))
    except ImportError:
        ccn_names = []
    return {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "torch.cond": hasattr(torch, "cond"),
        "torch.while_loop": hasattr(torch, "while_loop")
        or hasattr(getattr(torch, "_higher_order_ops", None), "while_loop"),
        "CUDAGraph.begin_capture_to_if_node": hasattr(graph_cls, "begin_capture_to_if_node"),
        "CUDAGraph.begin_capture_to_while_node": hasattr(graph_cls, "begin_capture_to_while_node"),
        "CUDAGraph.get_currently_capturing_graph": hasattr(graph_cls, "get_currently_capturing_graph"),
        "cudagraph_conditional_nodes": ccn_names,
        "torch.compiler.cudagraph_mark_step_begin": hasattr(torch.compiler, "cudagraph_mark_step_begin"),
        "conditional_nodes_usable_here": conditional_nodes_supported(),
    }


def graph_pool_bytes(pool_id: Any) -> dict[str, int]:
    """Reserved and allocated bytes of one graph pool, summed over its segments in ``torch.cuda.memory_snapshot()``."""
    torch.cuda.synchronize()
    want = tuple(pool_id)
    reserved = allocated = 0
    for seg in torch.cuda.memory_snapshot():
        if tuple(seg.get("segment_pool_id", ())) == want:
            reserved += seg["total_size"]
            allocated += seg["allocated_size"]
    return {"reserved_bytes": reserved, "allocated_bytes": allocated}


@dataclass
class LoopState:
    """The loop's static device tensors, read and written in place by every step (their addresses never change)."""

    tokens: Tensor  # [batch] int64: the token each sequence feeds to the next step
    pos: Tensor  # 0-dim int64: the position the next step writes into the KV cache
    done: Tensor  # [batch] bool: sequences that have emitted end-of-sequence
    out: Tensor  # [batch, k] int64: the tokens of the last k steps

    @classmethod
    def allocate(cls, batch: int, k: int, device: torch.device | str) -> "LoopState":
        """Zeroed state for `batch` sequences and `k` steps per launch."""
        return cls(
            torch.zeros(batch, dtype=torch.long, device=device),
            torch.zeros((), dtype=torch.long, device=device),
            torch.zeros(batch, dtype=torch.bool, device=device),
            torch.zeros(batch, k, dtype=torch.long, device=device),
        )


def _one_step(step: StepFn, state: LoopState, cache: Any, i: int, eos_id: int | None) -> None:
    nxt = step(state.tokens, state.pos, cache)
    if eos_id is not None:
        nxt = nxt.masked_fill(state.done, eos_id)  # a finished sequence keeps emitting end-of-sequence
        state.done.logical_or_(nxt == eos_id)
    state.out[:, i].copy_(nxt)
    state.tokens.copy_(nxt)  # the next step reads its token from the same address
    state.pos.add_(1)


def decode_k_steps(step: StepFn, state: LoopState, cache: Any, k: int, *, eos_id: int | None = None,
                   skip_done_steps: bool = False) -> Tensor:
    """Run `k` decode steps on the device, each feeding its token to the next; returns ``state.out`` [batch, k].

    No step reads anything on the host. With `skip_done_steps` during a CUDA graph capture, each
    step goes into an IF node whose condition ("some sequence is not done") the GPU evaluates at
    replay; outside a capture the steps simply run (a skipped step would only emit eos anyway).
    """
    if k < 1 or k > state.out.shape[1]:
        raise DeviceLoopError(f"k={k} steps do not fit the state's {state.out.shape[1]} output columns.")
    capturing = state.tokens.is_cuda and torch.cuda.is_current_stream_capturing()
    guarded = skip_done_steps and eos_id is not None and capturing
    if guarded:
        state.out.fill_(eos_id)  # columns of skipped steps read as end-of-sequence
        graph = torch.cuda.CUDAGraph.get_currently_capturing_graph()
    for i in range(k):
        if guarded:
            graph.begin_capture_to_if_node(state.done.logical_not().any())
            try:
                _one_step(step, state, cache, i, eos_id)
            finally:
                graph.end_capture_to_conditional_node()
        else:
            _one_step(step, state, cache, i, eos_id)
    return state.out


class MultiStepDecoder:
    """Greedy decoding with K steps per launch: one CUDA graph of K steps on a GPU, the same loop eagerly on a CPU.

    ``start(prompt)`` fills the KV cache with the prompt (eager steps: prefill stays out of the
    graph) and sets the state; ``generate(n)`` returns the next `n` tokens of every sequence. A
    launch always runs k steps, so when k does not divide what a call needs, the last launch
    computes tokens past the n asked for (the position and the KV cache have advanced over them):
    the decoder holds those back and hands them out first on the next call, so ``generate(a)``
    then ``generate(b)`` gives the tokens of ``generate(a + b)``. The position is tracked on the
    host too (it advances by exactly k per launch), so running past the cache is refused before
    launching, without a sync.
    """

    def __init__(self, model: TinyGPT, batch: int, k: int, *, eos_id: int | None = None,
                 skip_done_steps: bool = False, step: StepFn | None = None, use_graph: bool | None = None,
                 warmup_iters: int = 2) -> None:
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise DeviceLoopError(f"k (steps per launch) must be a whole number >= 1, got {k!r}.")
        if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
            raise DeviceLoopError(f"batch must be a whole number >= 1, got {batch!r}.")
        if k > model.config.max_len:
            raise DeviceLoopError(f"k={k} steps exceed the model's {model.config.max_len} positions.")
        device = model.head.weight.device
        self.model, self.batch, self.k, self.eos_id = model, batch, k, eos_id
        self.skip_done_steps = skip_done_steps
        self.step: StepFn = step or model.decode_step
        self.cache = model.new_cache(batch)
        self.state = LoopState.allocate(batch, k, device)
        self.host_pos = 0
        self.launches = 0
        self._held: Tensor | None = None  # tokens a launch computed past what generate() was asked for
        self.use_graph = (device.type == "cuda") if use_graph is None else use_graph
        if skip_done_steps and eos_id is None:
            raise DeviceLoopError("skip_done_steps needs an eos_id: steps are skipped once every sequence emitted it.")
        if skip_done_steps and self.use_graph and not conditional_nodes_supported():
            raise DeviceLoopError(
                f"skip_done_steps needs CUDA graph conditional nodes (CUDA 12.4+ and "
                f"CUDAGraph.begin_capture_to_if_node); this torch {torch.__version__} with CUDA "
                f"{torch.version.cuda} lacks them: use skip_done_steps=False (finished sequences are masked)."
            )
        self.graph: Any = None
        self.capture_s = 0.0
        self.memory: dict[str, int] = {"reserved_bytes": 0, "allocated_bytes": 0}
        if self.use_graph:
            self._capture(warmup_iters)

    def _run_k(self) -> Tensor:
        return decode_k_steps(self.step, self.state, self.cache, self.k, eos_id=self.eos_id,
                              skip_done_steps=self.skip_done_steps)

    def _capture(self, warmup_iters: int) -> None:
        if self.state.tokens.device.type != "cuda":
            raise DeviceLoopError("a CUDA graph needs the model on a CUDA device: model.cuda(), or use_graph=False.")
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):  # warm up on the stream the capture uses (cuBLAS keys workspaces by stream)
            for _ in range(warmup_iters):
                self.state.pos.zero_()
                self._run_k()
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()
        self.state.pos.zero_()
        # The warm-up gave `stream` a cuBLAS workspace from the ordinary pool; a capture would bake its address
        # into the graph, and torch.compile's CUDAGraph Trees free every cuBLAS workspace when they warm up or
        # record (cudagraph_trees.clear_cublass_cache): a later replay would use freed memory. Dropping the
        # workspaces now makes the capture allocate its own in the graph's private pool, as CUDAGraph Trees do.
        clear_workspaces = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
        if clear_workspaces is not None:
            clear_workspaces()
        self.graph = torch.cuda.CUDAGraph()
        start = time.perf_counter()
        with torch.cuda.graph(self.graph, stream=stream):
            self._run_k()
        torch.cuda.synchronize()
        self.capture_s = time.perf_counter() - start
        self.memory = graph_pool_bytes(self.graph.pool())
        self.reset()

    def reset(self) -> None:
        """Clear the cache and state in place (addresses unchanged, so the graph stays valid)."""
        self.cache.reset_()
        for t in (self.state.tokens, self.state.pos, self.state.done, self.state.out):
            t.zero_()
        self.host_pos = 0
        self._held = None

    def start(self, prompt: Tensor) -> None:
        """Prefill with `prompt` [batch, time] one eager step per token, and set the state to decode after it."""
        if prompt.dim() != 2 or prompt.shape[0] != self.batch:
            raise DeviceLoopError(
                f"prompt must be [batch={self.batch}, time], got shape {tuple(prompt.shape)}."
            )
        if prompt.shape[1] < 1 or prompt.shape[1] > self.model.config.max_len:
            raise DeviceLoopError(f"a prompt of {prompt.shape[1]} tokens does not fit "
                                  f"{self.model.config.max_len} positions.")
        self.reset()
        prompt = prompt.to(self.state.tokens.device)
        for i in range(prompt.shape[1] - 1):
            self.state.pos.fill_(i)
            self.model.decode_step(prompt[:, i], self.state.pos, self.cache)
        self.state.tokens.copy_(prompt[:, -1])
        self.state.pos.fill_(prompt.shape[1] - 1)
        self.host_pos = prompt.shape[1] - 1

    @property
    def held_tokens(self) -> int:
        """How many tokens of an earlier launch ``generate`` holds back for its next call (0..k-1)."""
        return 0 if self._held is None else int(self._held.shape[1])

    def tokens_left(self) -> int:
        """How many more tokens ``generate`` can hand out before the KV cache is full (held ones included)."""
        launches_left = max(0, self.model.config.max_len - self.host_pos) // self.k
        return self.held_tokens + launches_left * self.k

    def launch(self) -> Tensor:
        """Run K steps (one graph replay, or K eager steps) and return ``state.out``; overwritten by the next launch.

        The low-level call: ``generate`` launches for you and keeps every token. While ``generate``
        holds tokens back, ``launch`` refuses (it would skip them).
        """
        if self._held is not None:
            raise DeviceLoopError(
                f"generate() holds {self.held_tokens} token(s) of an earlier launch that launch() would skip: "
                f"read them with generate({self.held_tokens}) first, or start() a new sequence."
            )
        self._check_room(1)
        return self._launch()

    def _check_room(self, launches: int, asked: int | None = None) -> None:
        end = self.host_pos + launches * self.k
        if end <= self.model.config.max_len:
            return
        if asked is None:
            raise DeviceLoopError(
                f"{self.k} more steps from position {self.host_pos} run past the KV cache's "
                f"{self.model.config.max_len} positions: start() a new sequence or use a smaller k."
            )
        raise DeviceLoopError(
            f"{asked} more tokens need {launches} launch(es) of k={self.k} steps from position {self.host_pos}, "
            f"which run past the KV cache's {self.model.config.max_len} positions: at most "
            f"{self.tokens_left()} more tokens fit (ask for fewer, or start() a new sequence). Nothing was launched."
        )

    def _launch(self) -> Tensor:
        if self.graph is not None:
            self.graph.replay()
        else:
            self._run_k()
        self.host_pos += self.k
        self.launches += 1
        return self.state.out

    def generate(self, n_tokens: int) -> Tensor:
        """The next `n_tokens` tokens of every sequence [batch, n_tokens], copied on the device (no host sync).

        Launches ``ceil((n_tokens - held) / k)`` times. Tokens the last launch computed past
        `n_tokens` are held back (a device copy) and returned first by the next call, so no token is
        skipped: ``generate(a)`` then ``generate(b)`` equals ``generate(a + b)``. A request that would
        run past the KV cache is refused before anything is launched.
        """
        if isinstance(n_tokens, bool) or not isinstance(n_tokens, int) or n_tokens < 1:
            raise DeviceLoopError(f"n_tokens must be a whole number >= 1, got {n_tokens!r}.")
        held = self.held_tokens
        launches = max(0, -(-(n_tokens - held) // self.k))
        self._check_room(launches, asked=n_tokens)
        chunks = [self._held] if self._held is not None else []
        for _ in range(launches):
            chunks.append(self._launch().clone())  # device-side copy: the next launch overwrites state.out
        tokens = torch.cat(chunks, dim=1) if len(chunks) > 1 else chunks[0]
        self._held = tokens[:, n_tokens:].clone() if tokens.shape[1] > n_tokens else None
        return tokens[:, :n_tokens]


CONDITIONAL_DEMO = r'''
import json, torch
from graphcourse.gpulib.device_loop import torch_features, conditional_nodes_supported

result = {"features": torch_features()}

def clip(v):
    return v * (4.0 / v.norm())

def keep(v):
    return v.clone()

# eager: a Python `if` on a device value reads it on the CPU, a sync every call
x = torch.full((16,), 3.0, device="cuda")
torch.cuda.set_sync_debug_mode("error")
try:
    y = clip(x) if (x.norm() > 4.0) else keep(x)
    result["eager_branch"] = "no sync"
except RuntimeError as exc:
    result["eager_branch"] = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
torch.cuda.set_sync_debug_mode("default")

# an IF node by hand: the body runs only when the device value is true at replay
if conditional_nodes_supported():
    flag = torch.zeros((), dtype=torch.bool, device="cuda")
    a = torch.full((4,), 3.0, device="cuda")
    b = torch.zeros(4, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        g.begin_capture_to_if_node(flag)
        b.copy_(a * 2)
        g.end_capture_to_conditional_node()
    seen = []
    for value in (False, True):
        flag.fill_(value)
        b.zero_()
        g.replay()
        seen.append(b.tolist())
    result["if_node"] = {"flag_false": seen[0], "flag_true": seen[1]}

    # torch.cond captured into conditional nodes (torch's own dispatch modes, as CUDAGraph Trees use them)
    try:
        from torch._higher_order_ops.cudagraph_conditional_nodes import (
            ControlFlowOpWarmupDispatchMode, CUDAGraphCaptureControlFlowOpDispatchMode)

        def branch(v):
            return torch.cond(v.norm() > 4.0, clip, keep, (v,))

        static = torch.full((16,), 3.0, device="cuda")
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s), ControlFlowOpWarmupDispatchMode():
            branch(static)
        torch.cuda.current_stream().wait_stream(s)
        g2 = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g2, stream=s), CUDAGraphCaptureControlFlowOpDispatchMode():
            out = branch(static)
        rows = []
        for fill in (3.0, 0.5):
            static.fill_(fill)
            torch.cuda.set_sync_debug_mode("error")
            g2.replay()
            torch.cuda.set_sync_debug_mode("default")
            got = out.clone()
            want = clip(static) if float(static.norm()) > 4.0 else keep(static)
            rows.append({"fill": fill, "norm": float(static.norm()), "out0": float(got[0]),
                         "equals_eager": bool(torch.allclose(got, want))})
        result["torch_cond_in_graph"] = {"replays": rows, "replay_synced": False}
    except Exception as exc:
        result["torch_cond_in_graph"] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"}
else:
    result["if_node"] = None
    # this torch has no conditional-node capture: try torch.cond in a plain capture (last: it may fail)
    static = torch.full((16,), 3.0, device="cuda")
    clip(static), keep(static)  # warm-up
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    g2 = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(g2, stream=s):
            out = torch.cond(static.norm() > 4.0, clip, keep, (static,))
        result["torch_cond_in_graph"] = {"error": "no error: captured"}
    except Exception as exc:
        lines = [f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"]
        cause = exc.__cause__ or exc.__context__
        while cause is not None and len(lines) < 4:
            lines.append(f"{type(cause).__name__}: {str(cause).splitlines()[0][:200]}")
            cause = cause.__cause__ or cause.__context__
        result["torch_cond_in_graph"] = {"error": lines[0], "chain": lines}
print("DEMO-RESULT " + json.dumps(result))
'''
"""One child script for lesson 08: a host branch syncs; an IF node and torch.cond in a graph do not."""


def run_conditional_demo(timeout_s: float = 300.0) -> dict[str, Any]:
    """Run :data:`CONDITIONAL_DEMO` in a child Python on a CUDA GPU and return its observations."""
    from .compiled import DemoError, parse_demo_output
    from ..core.child import run_snippet

    result = run_snippet(CONDITIONAL_DEMO, timeout_s)
    try:
        return parse_demo_output(result.stdout)
    except DemoError as exc:
        raise DemoError(f"{exc} Child errors: {result.errors[-3:]}") from None
