"""Lesson 09's helpers: the capture-size lists of vLLM and SGLang, padding waste, and the trade against capture cost.

Pure functions first (no torch): the engines' default size rules, reproduced from their source
(:data:`SOURCES` says which file, function and commit), a batch-size distribution, the expected
padding waste of a list, the trade-off table that joins waste to the capture time and memory
recorded on a GPU, and a chooser within budgets. Then a plot and a widget that call them
(the widget only wires a slider to :func:`render_tradeoff`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from toygraph.buckets import check_buckets, every_n, powers_of_two
from toygraph.serving import PaddedSizeTable, ToyCaptureCost, WasteSummary, expected_waste

__all__ = [
    "SOURCES", "TradeoffRow", "candidate_lists", "chat_batch_distribution", "choose_sizes",
    "fit_capture_cost", "render_tradeoff", "sglang_default_max_bs", "sglang_default_sizes",
    "sglang_sizes_2025", "tradeoff_explorer", "tradeoff_figure", "tradeoff_rows", "uniform_distribution",
    "vllm_batch_defaults", "vllm_default_sizes",
]

SOURCES: dict[str, dict[str, str]] = {
    "vllm_sizes": {
        "repo": "vllm-project/vllm", "commit": "000fc94b754f66aeb60ef5acf1ea2e94cdc65164",
        "file": "vllm/config/vllm.py", "function": "VllmConfig._set_cudagraph_sizes",
    },
    "vllm_batch_defaults": {
        "repo": "vllm-project/vllm", "commit": "(read in the source index, commit not shown)",
        "file": "vllm/engine/arg_utils.py", "function": "EngineArgs.get_batch_defaults",
    },
    "vllm_dispatch": {
        "repo": "vllm-project/vllm", "commit": "ae2e8e62cea0f6c030f92234cb863acdc48658cb",
        "file": "vllm/v1/cudagraph_dispatcher.py",
        "function": "CudagraphDispatcher._compute_bs_to_padded_graph_size, dispatch, get_capture_descs",
    },
    "vllm_capture_order": {
        "repo": "vllm-project/vllm", "commit": "(several versions read)",
        "file": "vllm/v1/worker/gpu_model_runner.py", "function": "GPUModelRunner.capture_model",
    },
    "vllm_splitting_ops": {
        "repo": "vllm-project/vllm", "commit": "ee525ce4fc8c9cfdedbbad878dcb2bccbb3c4b95",
        "file": "vllm/config/compilation.py", "function": "CompilationConfig._attention_ops, splitting_ops",
    },
    "sglang_sizes": {
        "repo": "sgl-project/sglang", "commit": "(read in the source index, commit not shown)",
        "file": "python/sglang/srt/server_args.py",
        "function": "ServerArgs._generate_cuda_graph_batch_sizes, _handle_gpu_memory_settings",
    },
    "sglang_pad_slot": {
        "repo": "sgl-project/sglang", "commit": "(read in the source index, several versions)",
        "file": "python/sglang/srt/mem_cache/memory_pool.py", "function": "KV pools' _create_buffers, allocator clear",
    },
    "vllm_pad_slot": {
        "repo": "vllm-project/vllm", "commit": "(read in the source index, commit not shown)",
        "file": "vllm/v1/attention/backends/utils.py, csrc/cache_kernels.cu",
        "function": "PAD_SLOT_ID, reshape_and_cache_kernel",
    },
    "sglang_runner": {
        "repo": "sgl-project/sglang", "commit": "21514ff5bdad2ae598bf3070d3a583aa4fa35ae7",
        "file": "python/sglang/srt/model_executor/cuda_graph_runner.py",
        "function": "get_batch_sizes_to_capture, CudaGraphRunner.capture, can_run, replay_prepare",
    },
    "sglang_capture_failed": {
        "repo": "sgl-project/sglang", "commit": "(read in the source index, several versions)",
        "file": "python/sglang/srt/model_executor/cuda_graph_runner.py", "function": "CUDA_GRAPH_CAPTURE_FAILED_MSG",
    },
    "caching_allocator": {
        "repo": "pytorch/pytorch", "commit": "001074d25084fdb87a799823e395a50f5ec044d3",
        "file": "c10/cuda/CUDACachingAllocator.cpp",
        "function": "kSmallSize, kSmallBuffer, kMinLargeAlloc, kLargeBuffer, kRoundLarge",
    },
}
"""Where each rule of this module was read (repository, commit, file, function)."""

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
                       blackwell: bool = False, performance_mode: str = "balanced") -> tuple[int, ...]:
    """vLLM's default ``cudagraph_capture_sizes`` for plain decoding (one token per request, no speculation).

    From ``VllmConfig._set_cudagraph_sizes``: the largest size is
    ``min(max_num_seqs * 2, 512)`` (1024 on data-centre Blackwell), capped by
    ``max_num_batched_tokens``; the list is 1, 2, 4, then every 8 below 256, then every 16 up to
    the largest size, and ``max_num_batched_tokens`` itself when it fits. In
    ``performance_mode="interactivity"`` every size from 1 to 32 replaces 1, 2, 4.
    """
    if max_num_seqs < 1 or max_num_batched_tokens < 1:
        raise ValueError("max_num_seqs and max_num_batched_tokens are at least 1.")
    if performance_mode not in ("balanced", "interactivity", "throughput"):
        raise ValueError("performance_mode is 'balanced', 'interactivity' or 'throughput'.")
    largest = min(max_num_seqs * 2, 1024 if blackwell else 512)
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


# --------------------------------------------------------------------------- the trade-off


@dataclass(frozen=True)
class TradeoffRow:
    """One capture-size list: how many graphs, its padding waste on the traffic, and its recorded capture cost."""

    name: str
    sizes: tuple[int, ...]
    waste: WasteSummary
    capture_s: float | None = None
    capture_s_min: float | None = None
    capture_s_max: float | None = None
    shared_bytes: int | None = None
    private_bytes: int | None = None

    @property
    def n_sizes(self) -> int:
        """Number of graphs."""
        return len(self.sizes)


def tradeoff_rows(distribution: Mapping[int, float], recorded: Mapping[str, Any] | None = None,
                  lists: Mapping[str, Iterable[int]] | None = None) -> list[TradeoffRow]:
    """Each list's waste on `distribution`, joined to its recorded capture time and memory when `recorded` has it.

    `recorded` is the benchmark's "serving" section (or None): its ``lists`` rows give, per list
    name, the median wall time of capturing it largest first into one pool and the memory that
    took (shared pool) against a pool per graph.
    """
    by_name = {r["name"]: r for r in (recorded or {}).get("lists", [])}
    if lists is None:
        lists = {r["name"]: r["sizes"] for r in (recorded or {}).get("lists", [])} or candidate_lists()
    rows = []
    for name, sizes in lists.items():
        sizes = check_buckets(sizes)
        r = by_name.get(name)
        kw: dict[str, Any] = {}
        if r is not None:
            shared, private = r["shared"], r["private"]
            kw = dict(capture_s=shared["capture_s"], capture_s_min=shared["capture_s_min"],
                      capture_s_max=shared["capture_s_max"], shared_bytes=int(shared["free_drop_bytes"]),
                      private_bytes=int(private["free_drop_bytes"]))
        rows.append(TradeoffRow(name, sizes, expected_waste(sizes, distribution), **kw))
    return sorted(rows, key=lambda r: r.n_sizes)


def fit_capture_cost(per_size: Iterable[Mapping[str, Any]]) -> ToyCaptureCost:
    """A :class:`ToyCaptureCost` fitted (least squares, a line in the batch size) to recorded per-size rows.

    Each row holds ``size``, ``capture_ms`` and ``private_pool_bytes`` (what one graph of that
    size took in a pool of its own); the shared-pool model then uses the fitted per-row bytes.
    """
    rows = list(per_size)
    if len(rows) < 2:
        raise ValueError("fitting needs at least two recorded sizes.")
    xs = [float(r["size"]) for r in rows]

    def line(ys: list[float]) -> tuple[float, float]:
        n, mx, my = len(xs), sum(xs) / len(xs), sum(ys) / len(ys)
        sxx = sum((x - mx) ** 2 for x in xs)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
        return my - slope * mx, slope

    t0, t1 = line([float(r["capture_ms"]) for r in rows])
    _m0, m1 = line([float(r["private_pool_bytes"]) for r in rows])
    return ToyCaptureCost(capture_ms=max(t0, 0.0), capture_ms_per_row=max(t1, 0.0),
                          pool_bytes_per_row=max(int(m1), 0), output_bytes_per_row=0)


def capture_cost_model(sec: Mapping[str, Any] | None) -> tuple[ToyCaptureCost, str]:
    """The toy capture-cost model fitted to the recorded per-size rows when there are any, else its assumed prices."""
    rows = list((sec or {}).get("per_size") or [])
    if len(rows) >= 2:
        return fit_capture_cost(rows), ("capture ms: a line fitted to the recorded per-size captures; pool bytes "
                                        "per row: the slope of a line through recorded pool bytes that are a step "
                                        "function of allocator segments (an average, not a price)")
    return ToyCaptureCost(), "assumed (not recorded yet)"


POOLS = {"shared": "one shared pool, largest first", "private": "a pool per graph"}
"""The memory column the chooser reads: the engines' way (shared) or a pool per graph (private)."""


def _pool_bytes(r: TradeoffRow, pool: str) -> int | None:
    return r.shared_bytes if pool == "shared" else r.private_bytes


def choose_sizes(rows: Iterable[TradeoffRow], *, memory_budget_bytes: float = math.inf,
                 capture_budget_s: float = math.inf, pool: str = "shared") -> TradeoffRow:
    """The list with the least padding waste whose recorded memory and capture time fit the budgets.

    `pool` picks the recorded memory column: "shared" (one pool, largest first, as the engines
    capture) or "private" (a pool per graph). Ties go to fewer graphs. A list without recorded
    figures fits no finite budget. Raises ValueError, naming the cheapest list, when none fits.
    """
    if pool not in POOLS:
        raise ValueError(f"pool is one of {sorted(POOLS)}, got {pool!r}.")
    rows = list(rows)
    if not rows:
        raise ValueError("no candidate lists to choose from.")

    def fits(r: TradeoffRow) -> bool:
        got = _pool_bytes(r, pool)
        mem_ok = memory_budget_bytes == math.inf or (got is not None and got <= memory_budget_bytes)
        time_ok = capture_budget_s == math.inf or (r.capture_s is not None and r.capture_s <= capture_budget_s)
        return mem_ok and time_ok

    ok = [r for r in rows if fits(r)]
    if not ok:
        cheapest = min(rows, key=lambda r: (_pool_bytes(r, pool) or math.inf, r.capture_s or math.inf))
        got = _pool_bytes(cheapest, pool)
        took = "" if got is None else f", {got / 2**20:.1f} MiB"
        raise ValueError(
            f"no list fits {memory_budget_bytes / 2**20:.1f} MiB ({POOLS[pool]}) and {capture_budget_s:.2f} s; "
            f"the cheapest is {cheapest.name!r} ({cheapest.n_sizes} sizes{took}): raise a budget, or capture "
            f"fewer sizes" + (" or a smaller largest size." if pool == "shared" else ".")
        )
    return min(ok, key=lambda r: (r.waste.waste_fraction + r.waste.eager_share, r.n_sizes))


# --------------------------------------------------------------------------- plot and widget


def tradeoff_figure(rows: list[TradeoffRow], label: str, highlight: str | None = None) -> Any:
    """Capture time and memory (recorded, with min..max) and padding waste against the number of captured sizes."""
    import matplotlib.pyplot as plt

    from .palette import COLORS

    fig, (ax_cost, ax_waste) = plt.subplots(1, 2, figsize=(11, 3.8))
    timed = [r for r in rows if r.capture_s is not None]
    if timed:
        tx = [r.n_sizes for r in timed]
        ty = [r.capture_s for r in timed]
        err = [[r.capture_s - r.capture_s_min for r in timed], [r.capture_s_max - r.capture_s for r in timed]]
        ax_cost.errorbar(tx, ty, yerr=err, marker="o", color=COLORS["graph_launch"],
                         capsize=3, label="capture time, s (median, min..max)")
        ax_cost.set_xscale("log")
        ax_cost.set_ylabel("capture time (s)")
        ax_mem = ax_cost.twinx()
        ax_mem.plot(tx, [r.shared_bytes / 2**20 for r in timed], marker="s", color=COLORS["launch"],
                    label="one shared pool, MiB")
        ax_mem.plot(tx, [r.private_bytes / 2**20 for r in timed], marker="^", linestyle="--",
                    color=COLORS["sync"], label="a pool per graph, MiB")
        ax_mem.set_ylabel("graph memory (MiB)")
        lines = ax_cost.get_legend_handles_labels()[0] + ax_mem.get_legend_handles_labels()[0]
        ax_cost.legend(lines, [ln.get_label() for ln in lines], fontsize=8, loc="upper left")
        ax_cost.set_title(f"capture cost ({label})", fontsize=9)
    else:
        ax_cost.text(0.5, 0.5, "capture cost not recorded yet:\nrun python -m graphcourse.gpulib.bench_serving\n"
                     "on a GPU", ha="center", va="center", transform=ax_cost.transAxes)
        ax_cost.set_title("capture cost: not recorded yet", fontsize=9)
    ax_cost.set_xlabel("number of captured sizes")
    ax_waste.bar(range(len(rows)), [100 * r.waste.waste_fraction for r in rows], color=COLORS["padding"],
                 hatch="//", edgecolor="black")
    ax_waste.set_xticks(range(len(rows)), [f"{r.name}\n({r.n_sizes})" for r in rows], fontsize=7, rotation=30)
    ax_waste.set_ylabel("padding rows / graphed rows (%)")
    ax_waste.set_title("padding waste on the assumed chat mix", fontsize=9)
    if highlight is not None:
        for i, r in enumerate(rows):
            if r.name == highlight:
                ax_waste.patches[i].set_edgecolor(COLORS["highlight"])
                ax_waste.patches[i].set_linewidth(3)
    fig.tight_layout()
    return fig


def tradeoff_lines(rows: list[TradeoffRow]) -> list[str]:
    """The plot's numbers as text: one line per list."""
    out = [f"{'list':<16}{'sizes':>6}{'waste %':>9}{'eager %':>9}{'capture s':>18}{'shared MiB':>12}{'private MiB':>12}"]
    for r in rows:
        if r.capture_s is None:
            cap, sh, pr = "not recorded", "-", "-"
        else:
            cap = f"{r.capture_s:.2f} ({r.capture_s_min:.2f}-{r.capture_s_max:.2f})"
            sh, pr = f"{r.shared_bytes / 2**20:.1f}", f"{r.private_bytes / 2**20:.1f}"
        out.append(f"{r.name:<16}{r.n_sizes:>6}{100 * r.waste.waste_fraction:>9.1f}"
                   f"{100 * r.waste.eager_share:>9.1f}{cap:>18}{sh:>12}{pr:>12}")
    return out


def binding_budget(rows: Iterable[TradeoffRow], memory_budget_bytes: float, capture_budget_s: float,
                   pool: str = "shared") -> str:
    """Which budget decides, computed from the rows: the lists each budget alone excludes."""
    rows = list(rows)
    mem_out = [r.name for r in rows if (_pool_bytes(r, pool) is None and memory_budget_bytes != math.inf)
               or (_pool_bytes(r, pool) or 0) > memory_budget_bytes]
    time_out = [r.name for r in rows if (r.capture_s is None and capture_budget_s != math.inf)
                or (r.capture_s or 0) > capture_budget_s]
    return (f"the memory budget alone excludes {len(mem_out)} of {len(rows)} lists"
            + (f" ({', '.join(mem_out)})" if 0 < len(mem_out) < len(rows) else "")
            + f"; the capture-time budget alone excludes {len(time_out)}"
            + (f" ({', '.join(time_out)})" if 0 < len(time_out) < len(rows) else ""))


def render_tradeoff(memory_budget_mib: float, distribution: Mapping[int, float],
                    recorded: Mapping[str, Any] | None, label: str = "not recorded yet",
                    capture_budget_s: float = math.inf, pool: str = "shared") -> tuple[str, Any]:
    """The chooser as a pure function: text naming the best list within the budgets, which budget binds, the figure.

    `pool` is the memory column the memory budget is read against (:data:`POOLS`).
    """
    rows = tradeoff_rows(distribution, recorded)
    budget = memory_budget_mib * 2**20
    try:
        best = choose_sizes(rows, memory_budget_bytes=budget, capture_budget_s=capture_budget_s, pool=pool)
        within = f"{memory_budget_mib:.0f} MiB ({POOLS[pool]})" + (
            "" if capture_budget_s == math.inf else f" and {capture_budget_s:.2f} s of capture")
        text = (f"within {within}: {best.name!r} ({best.n_sizes} sizes), "
                f"{100 * best.waste.waste_fraction:.1f}% padding waste")
    except ValueError as exc:
        best, text = None, str(exc)
    if any(r.capture_s is not None for r in rows):
        text += "\n" + binding_budget(rows, budget, capture_budget_s, pool)
    return "\n".join([text, *tradeoff_lines(rows)]), tradeoff_figure(rows, label, best.name if best else None)


def tradeoff_explorer(distribution: Mapping[int, float], recorded: Mapping[str, Any] | None,
                      label: str = "not recorded yet", memory_budget_mib: float = 160.0,
                      capture_budget_s: float = 0.3, pool: str = "shared") -> Any:
    """Sliders for the memory and capture-time budgets and a choice of memory column, redrawing
    :func:`render_tradeoff` (a ``widgets.Explorer``).

    Works without a front end: setting ``explorer.controls["capture_budget_s"].value`` re-renders at once,
    and ``explorer.text`` holds the text shown.
    """
    import ipywidgets as widgets

    from .widgets import Explorer

    controls = {
        "memory_budget_mib": widgets.FloatLogSlider(value=memory_budget_mib, base=2, min=0, max=12, step=0.25,
                                                    description="memory MiB", continuous_update=False),
        "capture_budget_s": widgets.FloatLogSlider(value=capture_budget_s, base=10, min=-2, max=2, step=0.1,
                                                   description="capture s", continuous_update=False),
        "pool": widgets.Dropdown(options=[(v, k) for k, v in POOLS.items()], value=pool, description="memory of"),
    }
    return Explorer(controls, render_tradeoff,
                    fixed={"distribution": distribution, "recorded": recorded, "label": label})


def table_for(sizes: Iterable[int]) -> PaddedSizeTable:
    """The padded-size table of a list (re-exported for the lesson)."""
    return PaddedSizeTable(sizes)




# --------------------------------------------------------------------------- reading the recorded section


def worst_waste_by_band(sizes: Iterable[int], bands: Iterable[tuple[int, int]]) -> list[tuple[int, int, int, float]]:
    """For each band (lo, hi) of batch sizes: (lo, hi, the batch that wastes most, its padding share of the graph)."""
    table = PaddedSizeTable(sizes)
    out = []
    for lo, hi in bands:
        hi = min(hi, table.largest)
        if lo > hi:
            continue
        worst = max(range(lo, hi + 1), key=lambda b: (table.padded_size(b) - b) / table.padded_size(b))
        out.append((lo, hi, worst, (table.padded_size(worst) - worst) / table.padded_size(worst)))
    return out


def _pm(row: Mapping[str, Any], key: str, scale: float = 1.0, fmt: str = ".2f") -> str:
    return (f"{row[key] * scale:{fmt}} ({row[key + '_min'] * scale:{fmt}}-{row[key + '_max'] * scale:{fmt}})")


def capture_mode_lines(sec: Mapping[str, Any] | None) -> list[str]:
    """Per list: capture time and memory (free memory fallen, MiB) for one pool largest first, a pool per graph,
    and one pool smallest first; medians with min-max over the repeats."""
    if not sec:
        return ["capture cost: not recorded yet (run python -m graphcourse.gpulib.bench_serving on a GPU)"]
    out = [f"{'list':<15}{'sizes':>6}  {'capture s, shared pool':<24}{'shared, largest first MiB':<28}"
           f"{'a pool per graph MiB':<26}{'shared, smallest first MiB'}"]
    for r in sec["lists"]:
        out.append(f"{r['name']:<15}{r['n_sizes']:>6}  {_pm(r['shared'], 'capture_s'):<24}"
                   f"{_pm(r['shared'], 'free_drop_bytes', 2**-20, '.1f'):<28}"
                   f"{_pm(r['private'], 'free_drop_bytes', 2**-20, '.1f'):<26}"
                   f"{_pm(r['shared_smallest_first'], 'free_drop_bytes', 2**-20, '.1f')}")
    return out


def compare(a: Mapping[str, Any], b: Mapping[str, Any], key: str) -> str:
    """'less', 'more' or 'no different (the ranges overlap)': a's median against b's, read against both spreads."""
    if a[f"{key}_max"] < b[f"{key}_min"]:
        return "less"
    if a[f"{key}_min"] > b[f"{key}_max"]:
        return "more"
    return "no different (the ranges overlap)"


def capture_mode_summary(sec: Mapping[str, Any] | None) -> str:
    """One sentence per list, computed from the recorded ranges: does one shared pool take less than a pool per graph?"""
    if not sec:
        return "not recorded yet"
    lines = []
    for r in sec["lists"]:
        vs_private = compare(r["shared"], r["private"], "free_drop_bytes")
        vs_order = compare(r["shared"], r["shared_smallest_first"], "free_drop_bytes")
        lines.append(f"{r['name']} ({r['n_sizes']} sizes): one pool largest first took {vs_private} memory than a "
                     f"pool per graph, and {vs_order} than one pool smallest first")
    return "\n".join(lines)


def piecewise_lines(sec: Mapping[str, Any] | None) -> list[str]:
    """µs per decode step: eager, one full graph, piecewise (attention eager); medians with min-max; tokens checked."""
    if not sec:
        return ["piecewise against full graph: not recorded yet (run python -m graphcourse.gpulib.bench_serving)"]
    out = [f"{'batch':>5}  {'eager µs':<22}{'full graph µs':<22}{'piecewise µs':<22}{'piecewise / full':<20}tokens"]
    for r in sec["piecewise"]["rows"]:
        same = "same as eager" if r["full_matches_eager"] and r["piecewise_matches_eager"] else "DIFFER"
        out.append(f"{r['batch']:>5}  {_pm(r, 'eager_us', 1, '.0f'):<22}{_pm(r, 'full_graph_us', 1, '.0f'):<22}"
                   f"{_pm(r, 'piecewise_us', 1, '.0f'):<22}{_pm(r, 'piecewise_over_full'):<20}{same}")
    rows = sec["piecewise"]["rows"]
    out.append(f"piecewise replays {rows[0]['graphs_per_step_piecewise']} graphs and runs "
               f"{rows[0]['eager_attention_calls_per_step']} attentions eagerly per step")
    return out


def piecewise_summary(sec: Mapping[str, Any] | None) -> str:
    """Per batch, computed from the recorded ranges: piecewise against one full graph and against eager."""
    if not sec:
        return "not recorded yet"

    def rng(row: Mapping[str, Any], key: str) -> dict[str, float]:
        return {"t": row[key], "t_min": row[f"{key}_min"], "t_max": row[f"{key}_max"]}

    words = {"less": "less time than", "more": "more time than"}
    out = []
    for r in sec["piecewise"]["rows"]:
        vs_full = compare(rng(r, "piecewise_us"), rng(r, "full_graph_us"), "t")
        vs_eager = compare(rng(r, "piecewise_us"), rng(r, "eager_us"), "t")
        out.append(f"batch {r['batch']}: piecewise took {words.get(vs_full, vs_full + ' from')} one full graph, "
                   f"and {words.get(vs_eager, vs_eager + ' from')} eager")
    return "\n".join(out)


# --------------------------------------------------------------------------- what the recorded memory shows


def _mib(b: float) -> str:
    return f"{b / 2**20:.0f} MiB"


def pool_steps(per_size: Iterable[Mapping[str, Any]]) -> list[tuple[int, int, int]]:
    """(first size, last size, bytes) for each run of equal recorded ``private_pool_bytes`` (a step function)."""
    steps: list[list[int]] = []
    for r in sorted(per_size, key=lambda r: r["size"]):
        b = int(r["private_pool_bytes"])
        if steps and steps[-1][2] == b:
            steps[-1][1] = r["size"]
        else:
            steps.append([r["size"], r["size"], b])
    return [(a, z, b) for a, z, b in steps]


def gather_bytes(model: Mapping[str, int], batch: int, itemsize: int = 4) -> int:
    """Bytes of one layer's attention gather of the cache (``index_select`` of K or V) at `batch`: the step's largest
    tensor on the tiny GPT, batch x heads x max_len x head_dim x itemsize (float32 by default)."""
    head_dim = model["d_model"] // model["n_heads"]
    return batch * model["n_heads"] * model["max_len"] * head_dim * itemsize


def first_large_segment_batch(model: Mapping[str, int], max_batch: int, itemsize: int = 4) -> int | None:
    """The smallest batch whose gather is above kSmallSize, so is served from a large-pool segment (None if none)."""
    return next((b for b in range(1, max_batch + 1) if gather_bytes(model, b, itemsize) > K_SMALL_SIZE), None)


def memory_facts(sec: Mapping[str, Any] | None) -> list[str]:
    """What the recorded capture memory shows, as sentences computed from the data (nothing typed).

    The shared pool per list against its largest size and against one graph of that size alone;
    the growth of a pool per graph; capture time per size; and the step function of one graph's
    pool bytes, with the batch at which the caching allocator's segment size predicts the big step.
    """
    if not sec or not sec.get("lists"):
        return ["capture memory: not recorded yet (run python -m graphcourse.gpulib.bench_serving on a GPU)"]
    lists = sec["lists"]
    shared = [r["shared"]["free_drop_bytes"] for r in lists]
    pool = [r["shared"].get("pool_reserved_bytes", r["shared"]["free_drop_bytes"]) for r in lists]
    largest = sorted({max(r["sizes"]) for r in lists})
    n_sizes = [r["n_sizes"] for r in lists]
    worst = max(r["shared"].get("free_drop_bytes_max", r["shared"]["free_drop_bytes"]) for r in lists)
    out = [f"one shared pool, largest first: pool segments {_mib(min(pool))} to {_mib(max(pool))}, free memory "
           f"fallen (median) {_mib(min(shared))} to {_mib(max(shared))} (at most {_mib(worst)} in one repeat), "
           f"for every list from {min(n_sizes)} to {max(n_sizes)} sizes; every list's largest size is "
           f"{', '.join(map(str, largest))}"]
    per = {r["size"]: int(r["private_pool_bytes"]) for r in sec.get("per_size") or []}
    if len(largest) == 1 and largest[0] in per:
        out.append(f"one graph of size {largest[0]} alone, in its own pool: {_mib(per[largest[0]])}: the shared "
                   f"pool is set by the largest graph, not by the number of sizes")
    priv = sorted((r["n_sizes"], r["private"]["free_drop_bytes"]) for r in lists)
    out.append(f"a pool per graph: {_mib(priv[0][1])} for {priv[0][0]} sizes to {_mib(priv[-1][1])} for "
               f"{priv[-1][0]} sizes (it grows with the sizes)")
    if len(lists) >= 2:
        xs, ys = [float(n) for n in n_sizes], [r["shared"]["capture_s"] * 1000 for r in lists]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        out.append(f"capture time (shared pool): about {slope:.1f} ms more per captured size (a line through the "
                   f"{len(lists)} lists' medians)")
    if per:
        steps = pool_steps(sec["per_size"])
        shown = ", ".join(f"{a}-{z}: {_mib(b)}" if a != z else f"{a}: {_mib(b)}" for a, z, b in steps[:5])
        out.append(f"one graph in its own pool, by size (a step function): {shown}"
                   + (f", ... from {steps[-1][0]}: {_mib(steps[-1][2])}" if len(steps) > 5 else ""))
        model = sec.get("model")
        if model:
            b = first_large_segment_batch(model, max(per))
            jump = next((s for s in sorted(per) if per[s] >= K_LARGE_BUFFER), None)
            if b is not None:
                out.append(
                    f"the gather of the cache is {gather_bytes(model, 1) // 1024} KiB per row: "
                    f"{gather_bytes(model, b - 1) / 2**20:.3f} MiB at batch {b - 1} fits a "
                    f"{_mib(K_SMALL_BUFFER)} small segment (requests <= {_mib(K_SMALL_SIZE)}), "
                    f"{gather_bytes(model, b) / 2**20:.3f} MiB at batch {b} needs a {_mib(K_LARGE_BUFFER)} "
                    f"segment: predicted jump at {b}, recorded first pool of {_mib(K_LARGE_BUFFER)} or more at "
                    f"{jump}")
    return out


def largest_size_lines(sec: Mapping[str, Any] | None, largest: Iterable[int] = (32, 64, 128, 256)) -> list[str]:
    """The memory lever: one graph of each largest size in its own pool (recorded), which is what one shared pool
    captured largest first holds for a list ending there (checked against the lists at the recorded largest size)."""
    per = {r["size"]: int(r["private_pool_bytes"]) for r in (sec or {}).get("per_size") or []}
    if not per:
        return ["by largest size: not recorded yet"]
    return [f"largest size {m:>4}: one graph's pool {_mib(per[m]):>8}" for m in largest if m in per]
