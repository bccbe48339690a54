"""Graphs the way a serving engine captures them, on the course's tiny GPT: many sizes, one pool, piecewise.

- :func:`capture_list` captures the decode step once per size of a list, largest first into one
  shared pool (vLLM's ``GPUModelRunner.capture_model``, SGLang's ``CudaGraphRunner.capture``) or
  in another order or a private pool per graph, and measures the wall time and the GPU memory.
- :class:`ServingDecoder` serves a batch the way the engines do: the padded-size table built once
  (:class:`toygraph.serving.PaddedSizeTable`), padded rows routed to the cache's scratch slot
  (``StaticKVCache.pad_slot``), eager above the largest size.
- :class:`PiecewiseDecoder` graphs the pieces between attentions and runs attention eagerly, as
  vLLM's piecewise CUDA graphs do (``CompilationConfig.splitting_ops`` defaults to the attention
  ops, ``vllm/config/compilation.py``), written by hand on the tiny GPT.

Everything takes ``capture=False`` (or a step factory) to run the same arithmetic without graphs,
so the padding, the slot routing and the piecewise split are tested on a CPU.
"""

from __future__ import annotations

import gc
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import torch
import torch.nn.functional as F
from torch import Tensor

from toygraph.buckets import EagerFallbackWarning, check_buckets
from toygraph.serving import PaddedSizeTable

from ..errors import BatchShapeError
from .graphs import (EagerStep, StaticKVCache, TinyGPT, as_device_position, capture, capture_stream,
                   fill_padded_, require_cuda, show_progress, slice_rows)

__all__ = [
    "CapturedList",
    "ListMemory",
    "PiecewiseDecoder",
    "ServingDecoder",
    "capture_list",
    "decode_step_fn",
    "eager_ops_per_step",
    "memory_now",
]

ORDERS = ("largest_first", "smallest_first")


def decode_step_fn(model: TinyGPT, cache: StaticKVCache, pos: Tensor) -> Callable[[Tensor, Tensor], Tensor]:
    """The step a serving engine captures: ``step(tokens, slots)`` -> next token per row, every row writing its own slot."""

    def step(tokens: Tensor, slots: Tensor) -> Tensor:
        return model.decode_step(tokens, pos, cache, slots=slots)

    return step


def _example(batch: int, cache: StaticKVCache) -> tuple[Tensor, Tensor]:
    device = cache.k.device
    return (torch.zeros(batch, dtype=torch.long, device=device),
            torch.full((batch,), cache.pad_slot, dtype=torch.long, device=device))


# --------------------------------------------------------------------------- capture many sizes


@dataclass(frozen=True)
class ListMemory:
    """GPU memory one list's captures added (bytes), read three ways, after emptying the allocator's cache before and after.

    ``reserved_bytes``: growth of ``torch.cuda.memory_reserved()`` (segments the caching allocator
    holds); ``pool_reserved_bytes``: segments owned by the graphs' pools (``memory_snapshot``);
    ``free_drop_bytes``: fall of ``torch.cuda.mem_get_info()``'s free memory, what vLLM logs as
    "Graph capturing finished in ... took ... GiB" (start minus end free memory).
    """

    reserved_bytes: int
    allocated_bytes: int
    pool_reserved_bytes: int
    free_drop_bytes: int


def memory_now() -> tuple[int, int, int]:
    """(allocated, reserved, free) bytes after a sync, a garbage collection and emptying the allocator's cache."""
    require_cuda("reading GPU memory")
    torch.cuda.synchronize()
    gc.collect()
    torch.cuda.empty_cache()
    free, _total = torch.cuda.mem_get_info()
    return torch.cuda.memory_allocated(), torch.cuda.memory_reserved(), free


@dataclass
class CapturedList:
    """One graph per size, captured in ``order`` into a shared pool or a pool each; time and memory measured."""

    sizes: tuple[int, ...]
    order: str
    shared_pool: bool
    graphs: dict[int, Any]
    static_inputs: dict[int, tuple[Tensor, Tensor]]
    static_outputs: dict[int, Tensor]
    capture_s: float
    per_size_s: dict[int, float]
    memory: ListMemory | None = None
    pools: list[Any] = field(default_factory=list)
    per_size_pool_bytes: dict[int, int] = field(default_factory=dict)  # a pool per graph only

    def release(self) -> None:
        """Drop the graphs and their buffers, so their pools can be freed."""
        self.graphs.clear()
        self.static_inputs.clear()
        self.static_outputs.clear()
        self.pools.clear()


def capture_list(
    model: TinyGPT,
    cache: StaticKVCache,
    pos: Tensor,
    sizes: Iterable[int],
    *,
    order: str = "largest_first",
    shared_pool: bool = True,
    warmup_iters: int = 2,
    measure_memory: bool = True,
    progress: bool | None = None,
) -> CapturedList:
    """Capture the decode step once per size, as an engine does at start-up, and measure it.

    ``order="largest_first"`` with ``shared_pool=True`` is what vLLM and SGLang do ("Capture the
    large shapes first so that the smaller shapes can reuse the memory pool allocated for the
    large shapes"). Every capture warms up on the same side stream (``gpu.capture_stream``) and is
    captured there; the wall time counts warm-ups and captures, like the engines' log line.
    """
    require_cuda("capturing a list of CUDA graphs")
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}.")
    ordered = sorted(check_buckets(sizes), reverse=(order == "largest_first"))
    if ordered[-1 if order == "smallest_first" else 0] > cache.batch:
        raise BatchShapeError(
            f"the largest size ({max(ordered)}) is above the cache's {cache.batch} sequences: "
            f"allocate the cache for the largest size you capture."
        )
    step = decode_step_fn(model, cache, pos)
    if measure_memory:
        alloc0, reserved0, free0 = memory_now()
    pool = torch.cuda.graph_pool_handle() if shared_pool else None
    side = capture_stream()
    graphs: dict[int, Any] = {}
    statics: dict[int, tuple[Tensor, Tensor]] = {}
    outputs: dict[int, Tensor] = {}
    per_size: dict[int, float] = {}
    torch.cuda.synchronize()
    gc.collect()
    gc.freeze()  # as vLLM (_freeze_gc) and SGLang (freeze_gc) do; with TORCH_CUDAGRAPH_GC=1 torch collects per capture
    start = time.perf_counter()
    try:
        _capture_all(ordered, step, cache, side, pool, warmup_iters, graphs, statics, outputs, per_size, progress)
    finally:
        gc.unfreeze()
    capture_s = time.perf_counter() - start
    result = CapturedList(tuple(sorted(ordered)), order, shared_pool, graphs, statics, outputs, capture_s, per_size)
    if measure_memory:  # what the graphs hold: the warm-ups' cached blocks are returned first
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        free1 = torch.cuda.mem_get_info()[0]
        by_pool = pools_reserved_bytes()
        pools = {tuple(g.pool()) for g in graphs.values()}
        if not shared_pool:
            result.per_size_pool_bytes = {b: by_pool.get(tuple(g.pool()), 0) for b, g in graphs.items()}
        result.memory = ListMemory(torch.cuda.memory_reserved() - reserved0,
                                   torch.cuda.memory_allocated() - alloc0,
                                   sum(by_pool.get(p, 0) for p in pools), free0 - free1)
    return result


def pools_reserved_bytes() -> dict[tuple, int]:
    """Bytes of segments each memory pool holds, from one ``torch.cuda.memory_snapshot()`` (pool id -> bytes)."""
    torch.cuda.synchronize()
    out: dict[tuple, int] = {}
    for seg in torch.cuda.memory_snapshot():
        key = tuple(seg.get("segment_pool_id", ()))
        out[key] = out.get(key, 0) + seg["total_size"]
    return out


def _capture_all(ordered: list[int], step: Callable[..., Tensor], cache: StaticKVCache, side: Any, pool: Any,
                 warmup_iters: int, graphs: dict, statics: dict, outputs: dict, per_size: dict,
                 progress: bool | None) -> None:
    from tqdm.auto import tqdm

    for b in tqdm(ordered, desc=f"capturing {len(ordered)} sizes", unit="graph",
                  disable=not show_progress(progress)):
        t0 = time.perf_counter()
        x = _example(b, cache)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(warmup_iters):
                step(*x)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=pool, stream=side):
            out = step(*x)
        graphs[b], statics[b], outputs[b] = g, x, out
        torch.cuda.synchronize()
        per_size[b] = time.perf_counter() - t0


# --------------------------------------------------------------------------- serving with a padded-size table


class ServingDecoder:
    """Decode steps of the tiny GPT served through captured sizes, as an engine serves them.

    The padded-size table is built once; each call is one list index, a copy of the real rows
    into the graph's static inputs (padded rows get token 0 and the cache's ``pad_slot``), a
    replay and a slice. Above the largest size the step runs eagerly with an
    :class:`EagerFallbackWarning` (vLLM: ``CUDAGraphMode.NONE``; SGLang: ``can_run`` is False).
    ``capture=False`` runs the same steps without graphs (CPU tests).
    """

    def __init__(self, model: TinyGPT, sizes: Iterable[int], *, max_batch: int | None = None,
                 position: int = 0, capture: bool = True, progress: bool | None = None) -> None:
        self.table = PaddedSizeTable(sizes)
        self.model = model
        device = model.head.weight.device
        self.cache = model.new_cache(max_batch or self.table.largest, device)
        if self.table.largest > self.cache.batch:
            raise BatchShapeError(f"max_batch {self.cache.batch} is below the largest size {self.table.largest}.")
        self.pos = as_device_position(position, device)
        self.step = decode_step_fn(model, self.cache, self.pos)
        self.dispatched: list[tuple[str, int, int]] = []
        if capture:
            self.captured = capture_list(model, self.cache, self.pos, self.table.sizes, measure_memory=False,
                                         progress=progress)
            self.statics = self.captured.static_inputs
            self._replay = {b: self.captured.graphs[b].replay for b in self.table.sizes}
            self._outputs = self.captured.static_outputs
        else:
            self.captured = None
            steps = {b: EagerStep.build(self.step, *_example(b, self.cache)) for b in self.table.sizes}
            self.statics = {b: s.static_inputs for b, s in steps.items()}
            self._steps = steps
            self._replay = {b: s.replay for b, s in steps.items()}
            self._outputs = None

    def __call__(self, tokens: Tensor, slots: Tensor) -> Tensor:
        """Next token of each real row; the graph of the padded size replays, padded rows write ``pad_slot`` only."""
        rows = tokens.shape[0]
        if tuple(slots.shape) != (rows,):
            raise BatchShapeError(f"{rows} tokens but slots of shape {tuple(slots.shape)}: give one slot per row.")
        d = self.table.dispatch(rows)
        self.dispatched.append((d.mode, d.batch, d.size))
        if d.mode == "eager":
            warnings.warn(EagerFallbackWarning(
                f"batch of {rows} is above the largest captured size ({self.table.largest}): ran eagerly, "
                f"as vLLM and SGLang do. Capture a size of at least {rows} if such batches are common."),
                stacklevel=2)
            return self.step(tokens, slots)
        static_tokens, static_slots = self.statics[d.size]
        fill_padded_(static_tokens, tokens, 0)
        fill_padded_(static_slots, slots, self.cache.pad_slot)
        self._replay[d.size]()
        out = self._outputs[d.size] if self._outputs is not None else self._steps[d.size].static_output
        return slice_rows(out, rows)


# --------------------------------------------------------------------------- piecewise: attention eager, the rest graphed


def _embed(model: TinyGPT, tokens: Tensor, pos: Tensor) -> Tensor:
    return model.tok_emb(tokens) + model.pos_emb(pos.reshape(1))


def _pre_attention(model: TinyGPT, layer: int, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    c, blk = model.config, model.blocks[layer]
    q, k, v = blk.qkv(blk.ln1(x)).view(x.shape[0], 3, c.n_heads, 1, c.head_dim).unbind(1)
    return q, k, v


def _post_attention(model: TinyGPT, layer: int, x: Tensor, att: Tensor) -> Tensor:
    blk = model.blocks[layer]
    x = x + blk.proj(att.reshape(x.shape[0], model.config.d_model))
    return x + blk.mlp(x)


def _attention_mask(model: TinyGPT, pos: Tensor, dtype: torch.dtype) -> Tensor:
    index = pos.reshape(1)
    mask = torch.zeros(model.config.max_len, dtype=dtype, device=pos.device)
    return mask.masked_fill_(model.positions > index, float("-inf")).view(1, 1, 1, model.config.max_len)


def attention(model: TinyGPT, layer: int, q: Tensor, k: Tensor, v: Tensor, pos: Tensor,
              cache: StaticKVCache, slots: Tensor, mask: Tensor) -> Tensor:
    """One layer's attention with its KV-cache write, exactly as ``TinyGPT.decode_logits`` does it (the eager piece)."""
    b, c = q.shape[0], model.config
    index = pos.reshape(1)
    where = (slots[:, None], model.head_ids[None, :], index.expand(b, c.n_heads))
    cache.k[layer].index_put_(where, k[:, :, 0])
    cache.v[layer].index_put_(where, v[:, :, 0])
    k_cache, v_cache = cache.k[layer].index_select(0, slots), cache.v[layer].index_select(0, slots)
    return F.scaled_dot_product_attention(q, k_cache, v_cache, attn_mask=mask)


def piecewise_step_eager(model: TinyGPT, tokens: Tensor, pos: Tensor, cache: StaticKVCache, slots: Tensor) -> Tensor:
    """The decode step cut at every attention, run piece by piece with no graph: equals ``model.decode_step``."""
    mask = _attention_mask(model, pos, model.head.weight.dtype)
    x = _embed(model, tokens, pos)
    for layer in range(model.config.n_layers):
        q, k, v = _pre_attention(model, layer, x)
        att = attention(model, layer, q, k, v, pos, cache, slots, mask)
        x = _post_attention(model, layer, x, att)
    return model.head(model.ln_f(x)).argmax(-1)


class PiecewiseDecoder:
    """The tiny GPT's decode step at one batch size as n_layers + 1 graphs, with attention run eagerly between them.

    Piece 0 is the embedding and layer 0's norm and QKV projection; piece i (1..L-1) is layer
    i-1's output projection and MLP and layer i's norm and QKV; piece L is the last layer's
    output projection and MLP, the final norm, the head and the argmax. Between pieces the
    attention of each layer (KV-cache write, gather, softmax) runs eagerly and writes its
    output into a fixed buffer the next piece reads: vLLM's splitting ops likewise "write their
    outputs to input buffers" so every graph's inputs keep fixed addresses. Pieces share one
    pool and replay in capture order. ``capture=False`` runs the pieces eagerly (CPU tests).
    """

    def __init__(self, model: TinyGPT, cache: StaticKVCache, pos: Tensor, batch: int, *,
                 capture: bool = True, warmup_iters: int = 2) -> None:
        if batch > cache.batch:
            raise BatchShapeError(f"batch {batch} is above the cache's {cache.batch} sequences.")
        self.model, self.cache, self.pos, self.batch = model, cache, pos, batch
        c = model.config
        device, dtype = cache.k.device, cache.k.dtype
        self.tokens, self.slots = torch.zeros(batch, dtype=torch.long, device=device), torch.arange(
            batch, device=device)
        self.att = [torch.zeros(batch, c.n_heads, 1, c.head_dim, device=device, dtype=dtype)
                    for _ in range(c.n_layers)]
        self.n_layers = c.n_layers
        self._pieces: list[Callable[[], Any]] = [self._piece_fn(i) for i in range(c.n_layers + 1)]
        self.outputs: list[Any] = [None] * (c.n_layers + 1)
        self.graphs: list[Any] = []
        self.captured = capture
        if capture:
            require_cuda("capturing the pieces of a piecewise decode step")
            self._capture(warmup_iters)

    def _piece_fn(self, i: int) -> Callable[[], Any]:
        m = self.model

        def piece() -> Any:
            if i == 0:
                x = _embed(m, self.tokens, self.pos)
            else:
                x = _post_attention(m, i - 1, self.outputs[i - 1][0], self.att[i - 1])
            if i == self.n_layers:
                return (m.head(m.ln_f(x)).argmax(-1),)
            return (x, *_pre_attention(m, i, x))

        return piece

    def _attention(self, i: int, mask: Tensor) -> None:
        _, q, k, v = self.outputs[i]
        self.att[i].copy_(attention(self.model, i, q, k, v, self.pos, self.cache, self.slots, mask))

    def _capture(self, warmup_iters: int) -> None:
        pool = torch.cuda.graph_pool_handle()
        side = capture_stream()
        side.wait_stream(torch.cuda.current_stream())
        mask = _attention_mask(self.model, self.pos, self.cache.k.dtype)
        with torch.cuda.stream(side):  # eager warm-up of the whole chain, on the capture stream
            for _ in range(warmup_iters):
                for i, piece in enumerate(self._pieces):
                    self.outputs[i] = piece()
                    if i < self.n_layers:
                        self._attention(i, mask)
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        for i, piece in enumerate(self._pieces):  # capture piece i; run attention i eagerly so piece i+1 sees it
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=pool, stream=side):
                self.outputs[i] = piece()
            self.graphs.append(g)
            if i < self.n_layers:
                g.replay()
                self._attention(i, mask)
        torch.cuda.synchronize()

    def __call__(self, tokens: Tensor, slots: Tensor | None = None) -> Tensor:
        """Next token per row: pieces replayed (or run) in order, attention eager between them; a fresh tensor."""
        if tokens.shape != self.tokens.shape:
            raise BatchShapeError(f"built for batch {self.batch}, called with {tuple(tokens.shape)} tokens.")
        self.tokens.copy_(tokens)
        if slots is not None:
            self.slots.copy_(slots)
        mask = _attention_mask(self.model, self.pos, self.cache.k.dtype)
        for i in range(self.n_layers + 1):
            if self.captured:
                self.graphs[i].replay()
            else:
                self.outputs[i] = self._pieces[i]()
            if i < self.n_layers:
                self._attention(i, mask)
        return self.outputs[self.n_layers][0].clone()

    @property
    def graph_count(self) -> int:
        """How many graphs one step replays (n_layers + 1)."""
        return self.n_layers + 1


def full_graph_step(model: TinyGPT, cache: StaticKVCache, pos: Tensor, batch: int) -> Any:
    """The whole decode step at one batch size captured as one graph (``graphcourse.gpulib.graphs.capture``): ``g(tokens, slots)``."""
    return capture(decode_step_fn(model, cache, pos), *_example(batch, cache))


def kv_rows_touched(before: StaticKVCache, after: StaticKVCache) -> list[int]:
    """Cache slots whose keys or values differ between two copies of a cache (which slots a step wrote)."""
    changed = (before.k != after.k) | (before.v != after.v)
    per_slot = changed.transpose(0, 1).reshape(changed.shape[1], -1).any(dim=1)
    return [int(i) for i in torch.nonzero(per_slot).flatten().tolist()]


def clone_cache(cache: StaticKVCache) -> StaticKVCache:
    """A copy of a cache (keys, values, live slot count)."""
    return StaticKVCache(cache.k.clone(), cache.v.clone(), cache.live_slots)


def eager_ops_per_step(decoder: PiecewiseDecoder) -> dict[str, Any]:
    """The torch operators a piecewise step runs eagerly, outside its graphs, counted on this machine.

    Counts ATen operators (``TorchDispatchMode``) while the decoder builds its mask, runs one
    layer's attention (cache write, gather, attention, copy into the piece buffer) and clones the
    output. An operator is not a kernel: on a GPU one operator may launch several kernels (the
    kernels are counted with a profiler on the GPU, not here). Returns the per-layer and per-step
    operator names and counts for a decoder built with ``capture=False`` (any device).
    """
    from collections import Counter

    from torch.utils._python_dispatch import TorchDispatchMode

    class _Count(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.ops: Counter[str] = Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            self.ops[str(func.overloadpacket.__name__)] += 1
            return func(*args, **(kwargs or {}))

    if decoder.captured:
        raise ValueError("count the eager operators on a decoder built with capture=False.")
    decoder(decoder.tokens.clone(), decoder.slots.clone())  # fills the pieces' outputs
    with _Count() as per_step:
        mask = _attention_mask(decoder.model, decoder.pos, decoder.cache.k.dtype)
        decoder.outputs[decoder.n_layers][0].clone()
    with _Count() as per_layer:
        decoder._attention(0, mask)
    n = decoder.n_layers

    def compute(ops: Counter[str]) -> dict[str, int]:
        return {k: v for k, v in ops.items() if k not in VIEW_OPS}

    layer, step = compute(per_layer.ops), compute(per_step.ops)
    return {"per_layer": layer, "per_step": step, "n_layers": n,
            "ops_per_step": n * sum(layer.values()) + sum(step.values())}


VIEW_OPS = frozenset({"view", "_unsafe_view", "unsqueeze", "squeeze", "expand", "select", "slice", "as_strided",
                      "reshape", "t", "transpose", "permute", "detach", "alias"})
"""ATen operators that only make a new view of a tensor (no kernel): left out of :func:`eager_ops_per_step`."""
