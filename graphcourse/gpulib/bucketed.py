"""Padding, slicing and the bucketed runner: one graph per batch size, the bucket arithmetic from toygraph.buckets.

Part of :mod:`graphcourse.gpulib.graphs`; runs on a CPU with :class:`EagerStep` in place of graphs."""

from __future__ import annotations

import gc
import sys
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable

import torch
from torch import Tensor

from toygraph.buckets import EagerFallbackWarning, bucket_for, check_buckets, padding_report, PaddingReport

from ..errors import BatchShapeError
from .capture import CapturedGraph, capture, require_cuda

if TYPE_CHECKING:
    from .tiny_gpt import StaticKVCache, TinyGPT

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
