"""The capture-size rules of vLLM and SGLang, read from their source, and the allocator sizes behind their memory.

Pure functions, no torch: the engines' default lists of batch sizes to capture (:data:`SOURCES`
says which file, function and commit each rule was read from; capture_sizes_sources.toml, beside this
module, holds it), PyTorch's caching-allocator segment sizes, a batch-size distribution for teaching,
and the family of candidate lists lesson 09 trades.
The benchmark (:mod:`graphcourse.gpulib.bench_serving`) measures these lists on a GPU; the lesson's
helpers (:mod:`graphcourse.lessons.serving`) plot and explain them.
"""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

from toygraph.buckets import check_buckets, every_n, powers_of_two

__all__ = [
    "SOURCES",
    "SGLANG_CAPTURE_FAILED_ADVICE",
    "K_SMALL_SIZE",
    "K_SMALL_BUFFER",
    "K_MIN_LARGE_ALLOC",
    "K_LARGE_BUFFER",
    "K_ROUND_LARGE",
    "segment_bytes",
    "vllm_batch_defaults",
    "vllm_default_sizes",
    "sglang_default_max_bs",
    "sglang_default_sizes",
    "sglang_sizes_2025",
    "chat_batch_distribution",
    "uniform_distribution",
    "candidate_lists",
]

_SOURCES_FILE = Path(__file__).with_name("capture_sizes_sources.toml")
_SOURCE_FIELDS = ("repo", "commit", "file", "function")


def _read_sources(path: Path = _SOURCES_FILE) -> dict[str, dict[str, str]]:
    """The tables of `path`, in its order, each with exactly the keys of :data:`_SOURCE_FIELDS`."""
    with path.open("rb") as f:
        tables = tomllib.load(f)
    for name, table in tables.items():
        if sorted(table) != sorted(_SOURCE_FIELDS):
            raise ValueError(f"{path}: [{name}] has the keys {sorted(table)}, not {list(_SOURCE_FIELDS)}")
    return {name: {k: table[k] for k in _SOURCE_FIELDS} for name, table in tables.items()}


SOURCES: dict[str, dict[str, str]] = _read_sources()
"""Where each rule of this module was read (repository, commit, file, function), from capture_sizes_sources.toml."""

SGLANG_CAPTURE_FAILED_ADVICE: tuple[str, ...] = (
    "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)",
    "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)",
    "3. disable torch compile by not using --enable-torch-compile",
    "4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)",
)
"""SGLang's ``CUDA_GRAPH_CAPTURE_FAILED_MSG`` (``cuda_graph_runner.py``), its "Possible solutions" verbatim.

Newer SGLang moved it (``runner_backend_utils``) and renamed the flags ``--cuda-graph-max-bs-decode`` and
``--cuda-graph-backend-decode=disabled``; the order, memory fraction first, is the same."""

# c10/cuda/CUDACachingAllocator.cpp (SOURCES["caching_allocator"]): the caching allocator's segment sizes.
K_SMALL_SIZE = 1048576  # kSmallSize: largest "small" allocation is 1 MiB
K_SMALL_BUFFER = 2097152  # kSmallBuffer: "small" allocations are packed in 2 MiB blocks
K_MIN_LARGE_ALLOC = 10485760  # kMinLargeAlloc: allocations between 1 and 10 MiB may use kLargeBuffer
K_LARGE_BUFFER = 20971520  # kLargeBuffer: "large" allocations may be packed in 20 MiB blocks
K_ROUND_LARGE = 2097152  # kRoundLarge: round up large allocations to 2 MiB


def segment_bytes(request_bytes: int) -> int:
    """Size of the segment the caching allocator cudaMallocs for one request when no cached block fits.

    ``CUDACachingAllocator.cpp`` (``get_allocation_size``): a request of at most 1 MiB gets a 2 MiB
    small-pool segment; one below 10 MiB a 20 MiB segment; a larger one is rounded up to 2 MiB.
    (Block rounding to 512 B and ``max_split_size`` and expandable segments are left out.)
    """
    if request_bytes < 0:
        raise ValueError("a request is at least 0 bytes.")
    if request_bytes <= K_SMALL_SIZE:
        return K_SMALL_BUFFER
    if request_bytes < K_MIN_LARGE_ALLOC:
        return K_LARGE_BUFFER
    return K_ROUND_LARGE * math.ceil(request_bytes / K_ROUND_LARGE)


# --------------------------------------------------------------------------- vLLM


def vllm_batch_defaults(gpu_memory_gib: float, gpu_name: str = "", usage: str = "server") -> tuple[int, int]:
    """(max_num_seqs, max_num_batched_tokens) vLLM picks on a GPU when the user sets neither.

    ``EngineArgs.get_batch_defaults``: 1024 sequences and 8192 tokens for the OpenAI server (16384
    for the ``LLM`` class) on a GPU of at least 70 GiB whose name does not contain "a100"
    (H100, H200, MI300x), else 256 and 2048 (8192 for ``LLM``).
    """
    if usage not in ("server", "llm"):
        raise ValueError("usage is 'server' (vllm serve) or 'llm' (the LLM class).")
    if gpu_memory_gib >= 70 and "a100" not in gpu_name.lower():
        return 1024, (8192 if usage == "server" else 16384)
    return 256, (2048 if usage == "server" else 8192)


def vllm_default_sizes(max_num_seqs: int = 1024, max_num_batched_tokens: int = 8192, *,
                       blackwell: bool = False, performance_mode: str = "balanced",
                       decode_query_len: int = 1) -> tuple[int, ...]:
    """vLLM's default ``cudagraph_capture_sizes``, in tokens; ``decode_query_len`` is 1 plus the speculative tokens.

    From ``VllmConfig._set_cudagraph_sizes``: the largest size is
    ``min(max_num_seqs * decode_query_len * 2, 512)`` (1024 on data-centre Blackwell), capped by
    ``max_num_batched_tokens``; the list is 1, 2, 4, then every 8 below 256, then every 16 up to
    the largest size, and ``max_num_batched_tokens`` itself when it fits. In
    ``performance_mode="interactivity"`` every size from 1 to 32 replaces 1, 2, 4. With speculative
    decoding (``decode_query_len > 1``) it also appends the uniform-decode sizes ``n * decode_query_len``
    for request counts ``n`` of 1, 2, 4, every 8 below 256, every 16 from 256, and ``max_num_seqs``
    itself (all at most ``max_num_seqs`` and 512, or 1024), those that fit under the largest size.
    Dynamic speculative decoding (a query length per batch-size tier) is left out.
    """
    if max_num_seqs < 1 or max_num_batched_tokens < 1 or decode_query_len < 1:
        raise ValueError("max_num_seqs, max_num_batched_tokens and decode_query_len are at least 1.")
    if performance_mode not in ("balanced", "interactivity", "throughput"):
        raise ValueError("performance_mode is 'balanced', 'interactivity' or 'throughput'.")
    default_largest = 1024 if blackwell else 512
    largest = min(max_num_seqs * decode_query_len * 2, default_largest)
    uniform_decode: list[int] = []
    if decode_query_len > 1:
        reqs = min(max_num_seqs, default_largest)
        counts = [n for n in (1, 2, 4) if n <= reqs] + list(range(8, min(reqs + 1, 256), 8))
        counts += list(range(256, reqs + 1, 16)) + [reqs]
        uniform_decode = sorted({n * decode_query_len for n in counts if n * decode_query_len <= largest})
    largest = min(max_num_batched_tokens, largest)
    if performance_mode == "interactivity":
        sizes = list(range(1, min(largest, 32) + 1))
    else:
        sizes = [i for i in (1, 2, 4) if i <= largest]
    if largest >= 8:
        sizes += list(range(8, min(largest + 1, 256), 8))
    if largest >= 256:
        sizes += list(range(256, largest + 1, 16))
    if max_num_batched_tokens <= largest and max_num_batched_tokens not in sizes:
        sizes.append(max_num_batched_tokens)
    sizes += [b for b in uniform_decode if b <= max_num_batched_tokens]
    return tuple(sorted(set(sizes)))


# --------------------------------------------------------------------------- SGLang


def sglang_default_max_bs(gpu_memory_mib: float | None, tp_size: int = 1) -> int:
    """SGLang's default ``cuda_graph_max_bs`` by GPU memory (``ServerArgs._handle_gpu_memory_settings``)."""
    if gpu_memory_mib is None:
        return 160
    gib = 1024
    if gpu_memory_mib < 20 * gib:
        return 8
    if gpu_memory_mib < 35 * gib:
        return 24 if tp_size < 4 else 80
    if gpu_memory_mib < 60 * gib:
        return 32 if tp_size < 4 else 160
    if gpu_memory_mib < 160 * gib:  # H100/A100 80 GB and H20/H200 share one rule
        return 256 if tp_size < 4 else 512
    return 512


def sglang_default_sizes(cuda_graph_max_bs: int = 256, *, speculative: bool = False,
                         disable_padding: bool = False) -> tuple[int, ...]:
    """SGLang's default ``cuda_graph_bs`` (``ServerArgs._generate_cuda_graph_batch_sizes``).

    Plain decoding: 1, 2, 4, 8, 12, every 8 from 16 to 256, every 16 from 272 below 512, every
    32 from 512; speculative decoding: every size to 8, every 2 to 32, every 4 to 64, every 8 to
    256, every 16 after; ``disable_cuda_graph_padding``: every size. All capped at
    ``cuda_graph_max_bs`` (the runner later also caps them at the request pool's size).
    """
    m = cuda_graph_max_bs
    if m < 1:
        raise ValueError("cuda_graph_max_bs is at least 1.")
    if disable_padding:
        sizes = list(range(1, m + 1))
    elif not speculative:
        sizes = [1, 2, 4, 8, 12] + list(range(16, 257, 8)) + list(range(272, 512, 16)) + list(range(512, m + 1, 32))
    else:
        sizes = (list(range(1, 9)) + list(range(10, 33, 2)) + list(range(40, 65, 4)) + list(range(72, 257, 8))
                 + list(range(272, m + 1, 16)))
    return tuple(b for b in sizes if b <= m)


def sglang_sizes_2025(gpu_memory_mib: float, *, request_pool_size: int = 4096,
                      cuda_graph_max_bs: int | None = None, dp_size: int = 1) -> tuple[int, ...]:
    """The older rule in ``cuda_graph_runner.get_batch_sizes_to_capture`` (commit 21514ff5): 1, 2, 4, 8, every 8 to 160.

    Every 8 up to 256 as well on a GPU of more than 80 GiB (81920 MiB) without data parallelism;
    capped at the request pool's size and at ``cuda_graph_max_bs`` when given.
    """
    sizes = [1, 2, 4, 8] + list(range(16, 161, 8))
    if gpu_memory_mib > 81920 and dp_size == 1:
        sizes += list(range(160, 257, 8))
    if max(sizes) > request_pool_size:
        sizes += [request_pool_size - 1, request_pool_size]
    sizes = sorted(set(b for b in sizes if b <= request_pool_size))
    if cuda_graph_max_bs:
        sizes = [b for b in sizes if b <= cuda_graph_max_bs]
    return tuple(sizes)


# --------------------------------------------------------------------------- traffic and waste


def chat_batch_distribution(max_batch: int = 256, mean: float = 24.0) -> dict[int, float]:
    """An ASSUMED mix of decode batch sizes: geometric, P(b) proportional to (1 - 1/mean)^(b-1), b = 1..max_batch.

    Skewed to small batches, as a chat service at moderate load sees most steps with few running
    requests and a long thin tail at high load. An assumption for teaching, not a measured trace:
    replace it with your own server's histogram of running requests per step.
    """
    if max_batch < 1 or mean < 1:
        raise ValueError("max_batch and mean are at least 1.")
    q = 1.0 - 1.0 / mean
    weights = {b: q ** (b - 1) if q > 0 else float(b == 1) for b in range(1, max_batch + 1)}
    total = sum(weights.values())
    return {b: w / total for b, w in weights.items()}


def uniform_distribution(max_batch: int = 256) -> dict[int, float]:
    """Every batch size from 1 to max_batch equally likely (a contrast to the chat mix)."""
    return {b: 1.0 / max_batch for b in range(1, max_batch + 1)}


def candidate_lists(max_batch: int = 256) -> dict[str, tuple[int, ...]]:
    """Capture-size lists from few sizes to every size, all up to `max_batch`: the family the lesson trades."""
    lists = {
        "powers of two": powers_of_two(max_batch),
        "every 32": every_n(32, max_batch),
        "every 16": every_n(16, max_batch),
        "vLLM default": vllm_default_sizes(max_num_seqs=max(1, max_batch // 2)),
        "SGLang default": sglang_default_sizes(max_batch),
        "every 4": every_n(4, max_batch),
        "every size": tuple(range(1, max_batch + 1)),
    }
    return {name: tuple(b for b in check_buckets(s) if b <= max_batch) for name, s in lists.items()}
