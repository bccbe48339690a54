"""Real CUDA graphs with torch, in one place to import from: capture and replay, a bucketed runner, a tiny GPT with
a static KV cache, timing helpers.

Each piece has a toygraph twin: :func:`capture` is ``toygraph``'s record-then-replay, :class:`BucketedRunner`
is its bucketed graphs (the bucket arithmetic itself is imported from :mod:`toygraph.buckets`, never
re-implemented here), and :class:`TinyGPT` is the decode step whose launch cost a graph removes.
Everything that needs no GPU (the model, padding and slicing, the runner driven by :class:`EagerStep`)
also runs on a CPU, so it can be tested there.

The code lives in one module per concern; this one gathers them (lessons and the course's other modules import
from here):

- :mod:`.capture`: whether CUDA is here, capture and replay (:class:`CapturedGraph`), an eager stand-in, the
  memory a capture takes;
- :mod:`.bucketed`: padding and slicing, :class:`BucketedRunner`, :func:`decode_runner`;
- :mod:`.capture_memory`: what each bucket's capture costs, with its pool shared or private;
- :mod:`.tiny_gpt`: :class:`TinyGPT`, its static KV cache, greedy decoding;
- :mod:`.timing`: CUDA-event timing, the profiler's kernel counts, small helpers.
"""

from __future__ import annotations

from .capture import (  # noqa: F401
    capture,
    capture_stream,
    CapturedGraph,
    cuda_available,
    EagerStep,
    EMPTY_POOL,
    MemoryDelta,
    pool_memory,
    PoolMemory,
    require_cuda,
)
from .bucketed import (  # noqa: F401
    BucketedRunner,
    BucketReport,
    decode_runner,
    EagerFallbackWarning,
    fill_padded_,
    pad_rows,
    RunnerReport,
    show_progress,
    slice_rows,
)
from .capture_memory import (  # noqa: F401
    capture_memory,
    CaptureMemoryReport,
    CaptureMemoryRow,
)
from .tiny_gpt import (  # noqa: F401
    as_device_position,
    GPTConfig,
    greedy_tokens_cached,
    greedy_tokens_eager,
    StaticKVCache,
    TinyGPT,
)
from .timing import (  # noqa: F401
    batch_sizes_stream,
    benchmark_us,
    cuda_time_us,
    kernel_profile,
    KernelProfile,
    mean,
)

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
    "EMPTY_POOL",
    "as_device_position",
    "batch_sizes_stream",
    "greedy_tokens_cached",
    "greedy_tokens_eager",
    "mean",
    "show_progress",
]
