"""Real CUDA graphs with torch: capture and replay, a bucketed runner, a tiny GPT with a static KV cache, timing helpers.

Each piece has a toygraph twin: :func:`capture` is ``toygraph``'s record-then-replay, :class:`BucketedRunner`
is its bucketed graphs (the bucket arithmetic itself is imported from :mod:`toygraph.buckets`, never
re-implemented here), and :class:`TinyGPT` is the decode step whose launch cost a graph removes.
Everything that needs no GPU (the model, padding and slicing, the runner driven by :class:`EagerStep`)
also runs on a CPU, so it can be tested there.
"""

from __future__ import annotations

import gc
import math
import sys
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from toygraph.buckets import EagerFallbackWarning, bucket_for, check_buckets, padding_report, PaddingReport

from ..errors import BatchShapeError, NoCudaError

__all__ = [
    "BucketReport",
    "BucketedRunner",
    "CaptureMemoryReport",
    "CaptureMemoryRow",
    "CapturedGraph",
    "EagerFallbackWarning",
    "EagerStep",
    "GPTConfig",
    "KernelProfile",
    "MemoryDelta",
    "RunnerReport",
    "StaticKVCache",
    "TinyGPT",
    "benchmark_us",
    "capture",
    "capture_memory",
    "capture_stream",
    "decode_runner",
    "pool_memory",
    "PoolMemory",
    "cuda_available",
    "cuda_time_us",
    "fill_padded_",
    "kernel_profile",
    "pad_rows",
    "require_cuda",
    "slice_rows",
]


# --------------------------------------------------------------------------- CUDA presence


def cuda_available() -> bool:
    """True when torch sees a CUDA GPU here."""
    return torch.cuda.is_available()


def require_cuda(what: str = "this step") -> None:
    """Raise NoCudaError, naming `what`, when there is no CUDA GPU."""
    if not cuda_available():
        raise NoCudaError(what)


# --------------------------------------------------------------------------- capture and replay


@dataclass(frozen=True)
class MemoryDelta:
    """GPU memory a capture added to its graph's pool, as the caching allocator accounts that pool.

    ``allocated_bytes``: blocks held by the graph's tensors (each rounded up to 512 bytes);
    ``reserved_bytes``: whole segments the pool took from the driver (a request of at most 1 MiB is
    served from a 2 MiB segment, one of up to 10 MiB from a 20 MiB segment, larger ones are rounded
    up to a multiple of 2 MiB); ``requested_bytes``: what the tensors asked for, before rounding.
    """

    allocated_bytes: int
    reserved_bytes: int
    requested_bytes: int = 0


@dataclass(frozen=True)
class PoolMemory:
    """One memory pool's own statistics, summed over its segments in ``torch.cuda.memory_snapshot()``."""

    reserved_bytes: int
    allocated_bytes: int
    requested_bytes: int
    segments: int

    def minus(self, earlier: "PoolMemory") -> MemoryDelta:
        """What was added to this pool since `earlier`."""
        return MemoryDelta(self.allocated_bytes - earlier.allocated_bytes, self.reserved_bytes - earlier.reserved_bytes,
                           self.requested_bytes - earlier.requested_bytes)


EMPTY_POOL = PoolMemory(0, 0, 0, 0)


def pool_memory(pool_id: Any) -> PoolMemory:
    """Statistics of one graph pool (``g.pool()`` or ``torch.cuda.graph_pool_handle()``) from the allocator's snapshot.

    Every segment of the caching allocator's snapshot names the pool that owns it
    (``segment_pool_id``); summing the segments of one pool gives that pool's reserved,
    allocated and requested bytes, untouched by whatever other pools or tensors are doing.
    """
    require_cuda("reading a graph pool's memory")
    torch.cuda.synchronize()
    want = tuple(pool_id)
    reserved = allocated = requested = segments = 0
    for seg in torch.cuda.memory_snapshot():
        if tuple(seg.get("segment_pool_id", ())) != want:
            continue
        segments += 1
        reserved += seg["total_size"]
        allocated += seg["allocated_size"]
        requested += sum(b.get("requested_size", b["size"]) for b in seg.get("blocks", ())
                         if b.get("state") == "active_allocated")
    return PoolMemory(reserved, allocated, requested, segments)


def _memory_now() -> tuple[int, int]:
    torch.cuda.synchronize()
    gc.collect()
    torch.cuda.empty_cache()  # torch.cuda.graph does this on entry too; without it the delta hides cached blocks
    return torch.cuda.memory_allocated(), torch.cuda.memory_reserved()


def _as_tuple(x: Any) -> tuple:
    return x if isinstance(x, tuple) else (x,)


@dataclass
class CapturedGraph:
    """A callable captured once: static input tensors, the graph, and the static output it writes on replay."""

    graph: Any  # torch.cuda.CUDAGraph
    static_inputs: tuple[Tensor, ...]
    static_output: Any
    memory: MemoryDelta
    capture_s: float

    def replay(self, *inputs: Tensor) -> Any:
        """Copy `inputs` (if given) into the static inputs, replay the graph and return the static output."""
        if inputs:
            if len(inputs) != len(self.static_inputs):
                raise BatchShapeError(
                    f"captured with {len(self.static_inputs)} input(s), replayed with {len(inputs)}: "
                    f"a graph reads exactly the tensors it was captured with."
                )
            for static, new in zip(self.static_inputs, inputs):
                _check_same_shape(static, new)
                static.copy_(new)
        self.graph.replay()
        return self.static_output

    __call__ = replay


def _check_same_shape(static: Tensor, new: Tensor) -> None:
    if static.shape != new.shape:
        raise BatchShapeError(
            f"captured with an input of shape {tuple(static.shape)}, replayed with {tuple(new.shape)}: "
            f"a graph's shapes and addresses are baked in at capture. Capture one graph per bucket "
            f"(1, 2, 4, 8, ...) and pad each batch to the smallest bucket that fits (BucketedRunner does this)."
        )


_CAPTURE_STREAMS: dict[int, Any] = {}


def capture_stream() -> Any:
    """The one side stream on which every capture of this process warms up and is captured, per device.

    One stream for all captures, as vLLM's ``graph_capture()`` and torch's own default capture
    stream do: the caching allocator reuses a freed block only for allocations on the stream it
    was freed on, so graphs sharing a pool reuse each other's freed memory only if they were
    captured on the same stream.
    """
    require_cuda("a CUDA capture stream")
    device = torch.cuda.current_device()
    if device not in _CAPTURE_STREAMS:
        _CAPTURE_STREAMS[device] = torch.cuda.Stream()
    return _CAPTURE_STREAMS[device]


def capture(
    fn: Callable[..., Any],
    *example_inputs: Tensor,
    warmup_iters: int = 3,
    pool: Any = None,
) -> CapturedGraph:
    """Warm `fn` up on a side stream, capture it on that same stream with torch.cuda.graph, return the replayable graph.

    The example inputs are cloned into static inputs that the graph reads on every replay; copy new
    data into them (``replay(*new_inputs)`` does) rather than passing new tensors. Give the same
    `pool` (from ``torch.cuda.graph_pool_handle()``) to several captures to let them share memory.
    Graphs sharing a pool must never run at the same time; graphs that do not consume each
    other's outputs may replay in any order, each output read or cloned before another graph of
    the pool replays; graphs that do consume them must replay in capture order (lesson 03).
    """
    require_cuda("capturing a CUDA graph")
    static_inputs = tuple(x.clone() for x in example_inputs)
    # Warm-up: lazy initialisation (cuBLAS handles and their workspaces, which PyTorch keys by stream,
    # algorithm choice) must not happen during capture. Warm up on the stream the capture will use,
    # the same for every capture, so graphs sharing a pool can reuse each other's freed blocks.
    side = capture_stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup_iters):
            fn(*static_inputs)
    before = pool_memory(pool) if pool is not None else EMPTY_POOL
    graph = torch.cuda.CUDAGraph()
    start_s = time.perf_counter()
    with torch.cuda.graph(graph, pool=pool, stream=side):  # capture on the warmed-up, non-default stream
        static_output = fn(*static_inputs)
    torch.cuda.synchronize()
    capture_s = time.perf_counter() - start_s
    memory = pool_memory(graph.pool()).minus(before)
    return CapturedGraph(graph, static_inputs, static_output, memory, capture_s)


@dataclass
class EagerStep:
    """The interface of CapturedGraph with no graph: replay() calls fn eagerly on the static inputs (CPU tests, toy twins)."""

    fn: Callable[..., Any]
    static_inputs: tuple[Tensor, ...]
    static_output: Any = None
    memory: MemoryDelta = field(default_factory=lambda: MemoryDelta(0, 0))
    capture_s: float = 0.0

    @classmethod
    def build(cls, fn: Callable[..., Any], *example_inputs: Tensor, **_: Any) -> "EagerStep":
        """Make an EagerStep with static copies of the example inputs (same signature as capture)."""
        step = cls(fn, tuple(x.clone() for x in example_inputs))
        step.static_output = fn(*step.static_inputs)
        return step

    def replay(self, *inputs: Tensor) -> Any:
        """Copy `inputs` (if given) into the static inputs, run fn eagerly and return its output."""
        for static, new in zip(self.static_inputs, inputs):
            _check_same_shape(static, new)
            static.copy_(new)
        self.static_output = self.fn(*self.static_inputs)
        return self.static_output

    __call__ = replay


# --------------------------------------------------------------------------- padding and slicing


def _check_fits(static: Tensor, batch: Tensor) -> int:
    rows = batch.shape[0]
    if rows > static.shape[0]:
        raise BatchShapeError(
            f"a batch of {rows} rows does not fit a bucket of {static.shape[0]}: pick the smallest bucket "
            f"that holds it (toygraph.buckets.bucket_for) or run it eagerly."
        )
    if batch.shape[1:] != static.shape[1:]:
        raise BatchShapeError(
            f"rows of shape {tuple(batch.shape[1:])} do not match the captured rows {tuple(static.shape[1:])}: "
            f"only the batch dimension may vary between requests; capture again for another row shape."
        )
    if batch.dtype != static.dtype:
        raise BatchShapeError(
            f"batch dtype {batch.dtype} differs from the captured {static.dtype}: convert it before copying in."
        )
    return rows


def pad_rows(batch: Tensor, bucket: int, pad_value: float = 0) -> Tensor:
    """A new tensor: `batch` with rows of `pad_value` appended along dim 0 up to `bucket` rows."""
    padded = torch.full((bucket, *batch.shape[1:]), pad_value, dtype=batch.dtype, device=batch.device)
    _check_fits(padded, batch)
    padded[: batch.shape[0]] = batch
    return padded


def fill_padded_(static: Tensor, batch: Tensor, pad_value: float = 0) -> Tensor:
    """Copy `batch` into the first rows of `static` in place and set the remaining rows to `pad_value`."""
    rows = _check_fits(static, batch)
    static[:rows].copy_(batch)
    if rows < static.shape[0]:
        static[rows:].fill_(pad_value)
    return static


def slice_rows(output: Any, rows: int, copy: bool = True) -> Any:
    """The first `rows` rows of an output (a tensor or a tuple of tensors), copied so the next replay cannot overwrite them."""
    if isinstance(output, tuple):
        return tuple(slice_rows(o, rows, copy) for o in output)
    view = output[:rows]
    return view.clone() if copy else view


# --------------------------------------------------------------------------- bucketed runner


@dataclass(frozen=True)
class BucketReport:
    """One captured bucket: its size, the memory its capture added and how often it was replayed."""

    bucket: int
    allocated_bytes: int
    reserved_bytes: int
    capture_s: float
    replays: int


@dataclass(frozen=True)
class RunnerReport:
    """What a BucketedRunner cost: memory per bucket, padding waste and eager fallbacks over the batches it ran."""

    buckets: tuple[BucketReport, ...]
    padding: PaddingReport
    shared_pool: bool

    @property
    def waste_fraction(self) -> float:
        """Padding rows over all rows run through graphs."""
        return self.padding.waste_fraction

    @property
    def reserved_bytes(self) -> int:
        """GPU memory reserved by all captures together."""
        return sum(b.reserved_bytes for b in self.buckets)


class BucketedRunner:
    """One captured graph per bucket size; a batch is padded to the smallest bucket that fits, replayed and sliced.

    Above the largest bucket the batch runs eagerly with an :class:`EagerFallbackWarning`, the
    policy ``toygraph.buckets`` documents. Outputs are sliced copies, safe to keep across calls.
    A step may take several batched inputs (``example`` a tuple, ``pad_value`` one value per
    input): the decode runner (:func:`decode_runner`) pads its cache slots with the scratch slot,
    so padded rows never write into a live sequence's KV cache rows.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        example: Tensor | tuple[Tensor, ...],
        buckets: Iterable[int],
        *,
        pad_value: float | tuple[float, ...] = 0,
        share_pool: bool = True,
        warmup_iters: int = 3,
        progress: bool | None = None,
        step_factory: Callable[..., Any] | None = None,
        cache: "StaticKVCache | None" = None,
    ) -> None:
        """Capture `fn` once per bucket on inputs shaped like `example` (any batch size; rows are what matter).

        `progress`: a bar while capturing; None shows one in a terminal only (see :func:`show_progress`).
        `cache`: the KV cache the step writes. Then the step's last input must be each row's cache
        slot, and padded rows get ``cache.pad_slot``, so they can never write a live sequence's rows.
        """
        self.fn = fn
        self.buckets = check_buckets(buckets)
        examples = example if isinstance(example, tuple) else (example,)
        pads = pad_value if isinstance(pad_value, tuple) else (pad_value,) * len(examples)
        if cache is not None:
            if len(examples) < 2 or examples[-1].dtype != torch.long:
                raise BatchShapeError(
                    "a runner over a KV cache needs each row's cache slot as the step's last input (a long "
                    "tensor), so that padded rows write cache.pad_slot and never a live sequence's rows: "
                    "use graphcourse.gpulib.graphs.decode_runner, or add a slots input to your step."
                )
            pads = (*pads[:-1], cache.pad_slot)
        if len(pads) != len(examples):
            raise ValueError(f"{len(examples)} example inputs but {len(pads)} pad values: give one pad value per input.")
        self.pad_values = pads
        self.pad_value = pads[0]
        self.shared_pool = share_pool and step_factory is None
        self.batch_sizes: list[int] = []
        self._replays = {b: 0 for b in self.buckets}
        order = sorted(self.buckets, reverse=True)
        statics = {b: tuple(_static_batch(e, b, p) for e, p in zip(examples, pads)) for b in order}
        if step_factory is None:
            require_cuda("BucketedRunner (one CUDA graph per bucket)")
            pool = torch.cuda.graph_pool_handle() if share_pool else None

            def step_factory(f: Callable[..., Any], *x: Tensor) -> CapturedGraph:
                return capture(f, *x, warmup_iters=warmup_iters, pool=pool)

            # One-time costs go to a throwaway capture (smallest bucket, private pool), so each bucket's
            # report holds only what its own capture added; capture_memory() measures the same way.
            _pay_one_time_costs(fn, [statics[order[-1]]], lambda f, *x: capture(f, *x, warmup_iters=warmup_iters))

        from tqdm.auto import tqdm

        self.steps: dict[int, Any] = {}
        # Largest first: with a shared pool, smaller graphs reuse the memory the largest one reserved.
        for b in tqdm(order, desc="capturing buckets", unit="graph", disable=not show_progress(progress)):
            self.steps[b] = step_factory(fn, *statics[b])

    def __call__(self, batch: Tensor, *more: Tensor) -> Any:
        """Run one batch: pad to its bucket, replay, slice; eagerly with a warning above the largest bucket."""
        inputs = (batch, *more)
        if len(inputs) != len(self.pad_values):
            raise BatchShapeError(
                f"the runner was captured with {len(self.pad_values)} batched input(s), called with {len(inputs)}: "
                f"pass the same inputs as the example it was built with."
            )
        rows = batch.shape[0]
        if any(x.shape[0] != rows for x in more):
            raise BatchShapeError(f"inputs with {[x.shape[0] for x in inputs]} rows: every input needs one row per sequence.")
        self.batch_sizes.append(rows)
        bucket = bucket_for(rows, self.buckets)
        if bucket is None:
            warnings.warn(
                EagerFallbackWarning(
                    f"batch of {rows} is above the largest captured bucket ({self.buckets[-1]}): ran eagerly, "
                    f"paying every kernel launch. Add a bucket of at least {rows} if such batches are common."
                ),
                stacklevel=2,
            )
            return self.fn(*inputs)
        step = self.steps[bucket]
        for static, x, pad in zip(step.static_inputs, inputs, self.pad_values):
            fill_padded_(static, x, pad)
        output = step.replay()
        self._replays[bucket] += 1
        return slice_rows(output, rows)

    def report(self) -> RunnerReport:
        """Memory per bucket and the padding waste of every batch run so far."""
        per_bucket = tuple(
            BucketReport(b, s.memory.allocated_bytes, s.memory.reserved_bytes, s.capture_s, self._replays[b])
            for b, s in sorted(self.steps.items())
        )
        return RunnerReport(per_bucket, padding_report(self.batch_sizes, self.buckets), self.shared_pool)


def decode_runner(
    model: "TinyGPT",
    cache: "StaticKVCache",
    pos: Tensor,
    buckets: Iterable[int],
    **runner_kw: Any,
) -> BucketedRunner:
    """A BucketedRunner of the decode step, ``runner(tokens, slots)``: padded rows write only the cache's scratch slot.

    Padding is not free of side effects: a padded row still runs the whole step, and the step
    writes its K and V into the cache. Each row therefore carries the cache slot it owns
    (``slots``), and padded rows get ``cache.pad_slot``, a row no sequence owns (vLLM's
    ``PAD_SLOT_ID`` plays this part), so a batch of 3 padded to 4 cannot overwrite the
    fourth live sequence's keys and values.
    """
    device = cache.k.device

    def step(tokens: Tensor, slots: Tensor) -> Tensor:
        return model.decode_step(tokens, pos, cache, slots=slots)

    example = (torch.zeros(1, dtype=torch.long, device=device), torch.zeros(1, dtype=torch.long, device=device))
    return BucketedRunner(step, example, buckets, pad_value=(0, cache.pad_slot), cache=cache, **runner_kw)


def show_progress(progress: bool | None = None) -> bool:
    """Whether to draw a progress bar: `progress` if given, else only when stderr is a terminal.

    In a notebook a tqdm widget's stored text reads "0%" forever once the notebook is saved,
    so by default lessons draw no bar; ``python -m graphcourse.gpulib.bench`` in a terminal does.
    """
    return sys.stderr.isatty() if progress is None else bool(progress)


def _static_batch(example: Tensor, rows: int, pad_value: float = 0) -> Tensor:
    return torch.full((rows, *example.shape[1:]), pad_value, dtype=example.dtype, device=example.device)


def _pay_one_time_costs(fn: Callable[..., Any], statics: Iterable[Any], throwaway_capture: Callable[..., Any]) -> None:
    """Run `fn` eagerly on every input (a tensor or a tuple of tensors), then capture it once per input and drop the graphs.

    The first capture in a process pays costs no later capture pays again (the cuBLAS workspace
    of the capture stream, allocator warm-up): tens of MiB on an H200. Paid here, they stay out
    of every per-bucket figure measured afterwards.
    """
    statics = [x if isinstance(x, tuple) else (x,) for x in statics]
    for x in statics:
        fn(*x)
    for x in statics:
        graph = throwaway_capture(fn, *x)
        del graph
    gc.collect()


@dataclass(frozen=True)
class CaptureMemoryRow:
    """GPU memory one bucket's capture added: in its own private pool, and into one pool shared by all buckets."""

    bucket: int
    private_added_bytes: int
    shared_added_bytes: int
    private_allocated_bytes: int = 0
    shared_allocated_bytes: int = 0


@dataclass(frozen=True)
class CaptureMemoryReport:
    """Memory added by each capture, per bucket, with a private pool each and with one shared pool."""

    rows: tuple[CaptureMemoryRow, ...]  # ascending bucket
    capture_order: tuple[int, ...]  # largest first, for both kinds of pool
    one_time_bytes: int  # left reserved by the warm-up and throwaway captures, not counted in any row

    @property
    def private_total_bytes(self) -> int:
        """All buckets' private pools together."""
        return sum(r.private_added_bytes for r in self.rows)

    @property
    def shared_total_bytes(self) -> int:
        """The one shared pool: everything its captures added."""
        return sum(r.shared_added_bytes for r in self.rows)

    def running_totals(self, shared: bool) -> list[tuple[int, int, int]]:
        """(bucket, bytes its capture added, bytes added so far), in capture order for the shared pool, ascending for private pools."""
        by_bucket = {r.bucket: r for r in self.rows}
        order = self.capture_order if shared else sorted(by_bucket)
        out, total = [], 0
        for b in order:
            added = by_bucket[b].shared_added_bytes if shared else by_bucket[b].private_added_bytes
            total += added
            out.append((b, added, total))
        return out

    def as_json_rows(self) -> list[dict[str, int]]:
        """The rows as the benchmark writes them to data/gpu_reference.json (bytes added by each capture)."""
        return [{"bucket": r.bucket, "private_pool_reserved_bytes": r.private_added_bytes,
                 "shared_pool_reserved_bytes": r.shared_added_bytes,
                 "private_pool_allocated_bytes": r.private_allocated_bytes,
                 "shared_pool_allocated_bytes": r.shared_allocated_bytes} for r in self.rows]


def capture_memory(
    fn: Callable[[Tensor], Any],
    example: Tensor,
    buckets: Iterable[int],
    *,
    pad_value: float = 0,
    warmup_iters: int = 3,
    capture_fn: Callable[[Callable[..., Any], Tensor, Any], Any] | None = None,
    new_pool: Callable[[], Any] | None = None,
    reserved_bytes: Callable[[], int] | None = None,
) -> CaptureMemoryReport:
    """Memory added by each bucket's capture of `fn`, once with a private pool each and once into one shared pool.

    Fair by construction: one-time costs are paid first (an eager run and a throwaway capture of
    every bucket), then both kinds of pool are measured the same way, largest bucket first, the
    graphs of each kind kept alive until all its buckets are captured (as a server keeps them),
    then freed. Each figure is what that capture added to its own pool, from the pool's own
    allocator statistics (:func:`pool_memory`). `capture_fn(fn, x, pool)`, `new_pool()` and
    `reserved_bytes()` default to real CUDA (:func:`capture`, ``torch.cuda.graph_pool_handle``,
    ``torch.cuda.memory_reserved``, which only measures the one-time costs); tests pass fakes.
    """
    if capture_fn is None:
        require_cuda("measuring the memory each capture adds")

        def capture_fn(f: Callable[..., Any], x: Tensor, pool: Any) -> CapturedGraph:
            return capture(f, x, warmup_iters=warmup_iters, pool=pool)

        new_pool = new_pool or torch.cuda.graph_pool_handle
        reserved_bytes = reserved_bytes or (lambda: _memory_now()[1])
    if new_pool is None or reserved_bytes is None:
        raise ValueError("with a capture_fn, pass new_pool and reserved_bytes too.")
    order = tuple(sorted(check_buckets(buckets), reverse=True))
    statics = {b: _static_batch(example, b, pad_value) for b in order}
    before = reserved_bytes()
    _pay_one_time_costs(fn, statics.values(), lambda f, x: capture_fn(f, x, None))
    one_time = reserved_bytes() - before

    def added_per_bucket(pool: Any) -> dict[int, tuple[int, int]]:
        graphs = {b: capture_fn(fn, statics[b], pool) for b in order}  # kept alive until all are captured
        added = {b: (g.memory.reserved_bytes, g.memory.allocated_bytes) for b, g in graphs.items()}
        del graphs
        gc.collect()
        return added

    private = added_per_bucket(None)
    shared = added_per_bucket(new_pool())
    rows = tuple(CaptureMemoryRow(b, private[b][0], shared[b][0], private[b][1], shared[b][1]) for b in sorted(order))
    return CaptureMemoryReport(rows, order, one_time)


# --------------------------------------------------------------------------- tiny GPT with a static KV cache


@dataclass(frozen=True)
class GPTConfig:
    """Sizes of the tiny GPT-style decoder."""

    vocab_size: int = 1024
    d_model: int = 256
    n_layers: int = 4
    n_heads: int = 4
    max_len: int = 128

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.d_model // self.n_heads


@dataclass
class StaticKVCache:
    """Keys and values preallocated once, each [layers, slots, heads, max_len, head_dim], written in place at a device position.

    Slots 0 .. ``batch - 1`` belong to sequences; one more slot, ``pad_slot``, belongs to no
    sequence: padded rows of a bucketed batch write their keys and values there (vLLM's
    ``PAD_SLOT_ID`` plays this part), never into a live sequence's slot.
    """

    k: Tensor
    v: Tensor
    live_slots: int | None = None

    @classmethod
    def allocate(
        cls, config: GPTConfig, max_batch: int, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32
    ) -> "StaticKVCache":
        """Zeroed cache for up to `max_batch` sequences of up to config.max_len tokens, plus one scratch slot."""
        shape = (config.n_layers, max_batch + 1, config.n_heads, config.max_len, config.head_dim)
        return cls(torch.zeros(shape, device=device, dtype=dtype), torch.zeros(shape, device=device, dtype=dtype),
                   max_batch)

    @property
    def batch(self) -> int:
        """Number of sequences this cache (or view) holds (the scratch slot not counted)."""
        return self.k.shape[1] if self.live_slots is None else self.live_slots

    @property
    def pad_slot(self) -> int:
        """The scratch slot padded rows write into: owned by no sequence."""
        if self.live_slots is None or self.k.shape[1] <= self.live_slots:
            raise BatchShapeError("this cache view has no scratch slot: take the pad slot from the full cache.")
        return self.live_slots

    @property
    def nbytes(self) -> int:
        """Bytes of the keys and values together (the scratch slot included)."""
        return self.k.numel() * self.k.element_size() * 2

    def batch_view(self, batch: int) -> "StaticKVCache":
        """The first `batch` sequences, a view sharing memory, with no scratch slot.

        Fine for a batch that fills it. Not for a padded bucket: its padded rows would write the
        rows of live sequences. Give each row its slot instead (``decode_step(..., slots=...)``;
        :func:`decode_runner` pads slots with ``pad_slot``).
        """
        if batch > self.batch:
            raise BatchShapeError(
                f"the cache holds {self.batch} sequences, asked for {batch}: allocate it for the largest bucket."
            )
        return StaticKVCache(self.k[:, :batch], self.v[:, :batch], batch)

    def reset_(self) -> None:
        """Zero the keys and values in place (addresses unchanged, so captured graphs stay valid)."""
        self.k.zero_()
        self.v.zero_()


class _Block(nn.Module):
    def __init__(self, c: GPTConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(c.d_model)
        self.qkv = nn.Linear(c.d_model, 3 * c.d_model)
        self.proj = nn.Linear(c.d_model, c.d_model)
        self.ln2 = nn.LayerNorm(c.d_model)
        self.fc1 = nn.Linear(c.d_model, 4 * c.d_model)
        self.fc2 = nn.Linear(4 * c.d_model, c.d_model)

    def mlp(self, x: Tensor) -> Tensor:
        return self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class TinyGPT(nn.Module):
    """A small GPT-style decoder: learned positions, pre-norm blocks, greedy next token chosen on the device."""

    def __init__(self, config: GPTConfig | None = None, seed: int = 0) -> None:
        super().__init__()
        c = config or GPTConfig()
        if c.d_model % c.n_heads:
            raise ValueError(f"d_model {c.d_model} is not divisible by n_heads {c.n_heads}: pick heads that divide it.")
        self.config = c
        torch.manual_seed(seed)
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
        self.pos_emb = nn.Embedding(c.max_len, c.d_model)
        self.blocks = nn.ModuleList(_Block(c) for _ in range(c.n_layers))
        self.ln_f = nn.LayerNorm(c.d_model)
        self.head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        self.register_buffer("positions", torch.arange(c.max_len), persistent=False)
        self.register_buffer("head_ids", torch.arange(c.n_heads), persistent=False)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.normal_(p, std=0.5 / math.sqrt(p.shape[-1]))
        self.requires_grad_(False)
        self.eval()

    def forward(self, tokens: Tensor) -> Tensor:
        """Logits [batch, time, vocab] by recomputing every position with a causal mask (the naive reference)."""
        c = self.config
        b, t = tokens.shape
        x = self.tok_emb(tokens) + self.pos_emb(self.positions[:t])
        causal = torch.ones(t, t, dtype=torch.bool, device=tokens.device).tril()
        for blk in self.blocks:
            q, k, v = blk.qkv(blk.ln1(x)).view(b, t, 3, c.n_heads, c.head_dim).permute(2, 0, 3, 1, 4)
            scores = (q @ k.transpose(-1, -2)) / math.sqrt(c.head_dim)
            att = scores.masked_fill(~causal, float("-inf")).softmax(-1) @ v  # [b, heads, t, head_dim]
            x = x + blk.proj(att.transpose(1, 2).reshape(b, t, c.d_model))
            x = x + blk.mlp(x)
        return self.head(self.ln_f(x))

    def decode_logits(self, tokens: Tensor, pos: Tensor, cache: StaticKVCache, slots: Tensor | None = None,
                      mlp_residual: Callable[[nn.Module, Tensor], Tensor] | None = None,
                      attend: Callable[[int, Tensor, Tensor, StaticKVCache], Tensor] | None = None) -> Tensor:
        """Logits [batch, vocab] for one new token per sequence at device position `pos`, writing K and V into `cache`.

        Lesson 13 swaps fused kernels in, and checks that the tokens stay those of the plain step:
        `mlp_residual(block, x)` replaces ``x + block.mlp(x)``; `attend(layer, qkv, index, cache)`
        (without `slots` only) replaces writing K and V into the cache and attending, from the
        ``qkv`` projection [batch, 3 * d_model] to the heads' outputs [batch, d_model].

        Without `slots`, row i of the batch reads and writes cache slot i. With `slots` (a device
        tensor of one slot index per row), row i uses slot ``slots[i]``: padded rows pass the
        cache's ``pad_slot`` so their writes land where no sequence reads.
        """
        c = self.config
        b = tokens.shape[0]
        if slots is None and cache.batch != b:
            raise BatchShapeError(
                f"{b} tokens but a cache of {cache.batch} sequences: pass cache.batch_view({b}) for this batch."
            )
        if slots is not None and tuple(slots.shape) != (b,):
            raise BatchShapeError(f"{b} tokens but slots of shape {tuple(slots.shape)}: give one cache slot per row.")
        index = pos.reshape(1)  # a device tensor: no .item(), so the step can be captured and replayed
        x = self.tok_emb(tokens) + self.pos_emb(index)
        # Attend to positions 0..pos of the preallocated cache; later slots are masked out.
        if attend is None or slots is not None:  # the hand-made attention masks by itself
            mask = torch.zeros(c.max_len, dtype=x.dtype, device=x.device).masked_fill_(self.positions > index,
                                                                                      float("-inf"))
            mask = mask.view(1, 1, 1, c.max_len)
        for layer, blk in enumerate(self.blocks):
            qkv = blk.qkv(blk.ln1(x))
            if attend is not None and slots is None:
                x = x + blk.proj(attend(layer, qkv, index, cache))
                x = x + blk.mlp(x) if mlp_residual is None else mlp_residual(blk, x)
                continue
            q, k, v = qkv.view(b, 3, c.n_heads, 1, c.head_dim).unbind(1)
            if slots is None:
                k_cache, v_cache = cache.k[layer, :b], cache.v[layer, :b]  # [b, heads, max_len, head_dim]
                k_cache.index_copy_(2, index, k)
                v_cache.index_copy_(2, index, v)
            else:
                where = (slots[:, None], self.head_ids[None, :], index.expand(b, c.n_heads))
                cache.k[layer].index_put_(where, k[:, :, 0])
                cache.v[layer].index_put_(where, v[:, :, 0])
                k_cache, v_cache = cache.k[layer].index_select(0, slots), cache.v[layer].index_select(0, slots)
            att = F.scaled_dot_product_attention(q, k_cache, v_cache, attn_mask=mask)  # [b, heads, 1, head_dim]
            x = x + blk.proj(att.reshape(b, c.d_model))
            x = x + blk.mlp(x) if mlp_residual is None else mlp_residual(blk, x)
        return self.head(self.ln_f(x))

    def decode_step(self, tokens: Tensor, pos: Tensor, cache: StaticKVCache, slots: Tensor | None = None,
                    mlp_residual: Callable[[nn.Module, Tensor], Tensor] | None = None,
                    attend: Callable[[int, Tensor, Tensor, StaticKVCache], Tensor] | None = None) -> Tensor:
        """Next token per sequence (greedy argmax on the device, no host sync): the step a graph captures."""
        return self.decode_logits(tokens, pos, cache, slots, mlp_residual, attend).argmax(-1)

    def new_cache(self, max_batch: int, device: torch.device | str | None = None) -> StaticKVCache:
        """A static KV cache for this model on its device (or `device`)."""
        dev = device if device is not None else self.head.weight.device
        return StaticKVCache.allocate(self.config, max_batch, dev, self.head.weight.dtype)


# --------------------------------------------------------------------------- measurement


def cuda_time_us(fn: Callable[[], Any], *, iters: int = 100, warmup: int = 10) -> float:
    """Mean µs per call of `iters` back-to-back calls, between two CUDA events (CPU launch cost included)."""
    require_cuda("timing with CUDA events")
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000.0 / iters


def benchmark_us(fn: Callable[[], Any], *, min_run_time_s: float = 0.2) -> float:
    """Median µs per call from torch.utils.benchmark (it synchronises CUDA around its timings; works on a CPU too)."""
    from torch.utils import benchmark

    timer = benchmark.Timer(stmt="fn()", globals={"fn": fn})
    return timer.blocked_autorange(min_run_time=min_run_time_s).median * 1e6


@dataclass(frozen=True)
class KernelProfile:
    """GPU kernels of one call as torch.profiler saw them: how many, and their summed GPU time."""

    kernels_per_call: float
    kernel_time_us: float
    top_kernels: tuple[tuple[str, float], ...] = ()


def _is_kernel(name: str) -> bool:
    return not name.startswith(("Memcpy", "Memset", "cudaMem"))


def kernel_profile(fn: Callable[[], Any], *, iters: int = 5, warmup: int = 3) -> KernelProfile:
    """Profile `iters` calls of `fn` and return kernels per call and their summed GPU time per call in µs."""
    require_cuda("profiling GPU kernels")
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    count = 0
    total_us = 0.0
    by_name: dict[str, float] = {}
    with warnings.catch_warnings():
        # torch warns that each profiling cycle clears its events: one cycle is all this needs
        warnings.filterwarnings("ignore", message=".*Profiler clears events")
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(iters):
                fn()
            torch.cuda.synchronize()
        for event in prof.events():
            if event.device_type != DeviceType.CUDA or not _is_kernel(event.name):
                continue
            duration_us = event.time_range.elapsed_us()
            count += 1
            total_us += duration_us
            by_name[event.name] = by_name.get(event.name, 0.0) + duration_us / iters
    top = tuple(sorted(by_name.items(), key=lambda kv: -kv[1])[:5])
    return KernelProfile(count / iters, total_us / iters, top)


def as_device_position(pos: int, device: torch.device | str) -> Tensor:
    """A 0-dim int64 tensor holding `pos` on `device` (the decode step reads its position from here)."""
    return torch.tensor(pos, dtype=torch.long, device=device)


def greedy_tokens_eager(model: TinyGPT, prompt: Tensor, new_tokens: int) -> Tensor:
    """Greedy continuation of `prompt` [batch, time] by full recompute each token (slow reference)."""
    tokens = prompt
    for _ in range(new_tokens):
        nxt = model(tokens)[:, -1].argmax(-1, keepdim=True)
        tokens = torch.cat([tokens, nxt], dim=1)
    return tokens[:, prompt.shape[1] :]


def greedy_tokens_cached(model: TinyGPT, prompt: Tensor, new_tokens: int, step: Callable[..., Tensor] | None = None) -> Tensor:
    """Greedy continuation with the static KV cache, one decode step per token (prompt fed token by token)."""
    b, t = prompt.shape
    cache = model.new_cache(b, prompt.device)
    pos = as_device_position(0, prompt.device)
    run = step or (lambda tok, p: model.decode_step(tok, p, cache))
    out = []
    nxt = prompt[:, 0]
    for i in range(t + new_tokens - 1):
        pos.fill_(i)
        tok = prompt[:, i] if i < t else nxt
        nxt = run(tok, pos)
        if i >= t - 1:
            out.append(nxt)
    return torch.stack(out, dim=1)


def batch_sizes_stream(n_batches: int, max_batch: int, seed: int = 0) -> list[int]:
    """A seeded random stream of batch sizes, uniform in 1..max_batch (what a server sees)."""
    import random

    rng = random.Random(seed)
    return [rng.randint(1, max_batch) for _ in range(n_batches)]


def mean(values: Sequence[float]) -> float:
    """Arithmetic mean (0.0 for no values)."""
    return sum(values) / len(values) if values else 0.0
