"""Lesson 09's "Serving engines as they are now": facts read from vLLM's, SGLang's and PyTorch's source.

Each :class:`EngineFact` names the file, the commit it was read at, where in the file (a class, a function, a
docstring) and a short quote copied from that text, beside the claim the lesson makes from it. Facts from
issue and pull-request threads are :class:`ThreadReport` (their address and a quote). The lesson prints them
with :func:`fact_lines`, so a claim and its citation never drift apart; tests/test_engines.py checks their shape.

A few pure functions reproduce rules read there, for the lesson's cells and the instructor's answers:
SGLang's prefill token schedule (:func:`sglang_prefill_token_sizes`), vLLM's uniform-decode FULL keys
(:func:`vllm_full_decode_sizes`) and the count of graphs a LoRA specialisation multiplies
(:func:`graphs_to_capture`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "FACTS", "REPORTS", "TOPICS", "EngineFact", "ThreadReport", "cite", "dispatch_table", "downgrade_lines",
    "fact_lines", "facts", "graphs_to_capture", "report_lines", "sglang_prefill_max_tokens", "sglang_prefill_token_sizes",
    "try_answer", "vllm_full_decode_sizes",
]

TOPICS = ("modes", "wrapper", "breakable", "prefill", "speculative", "lora")


@dataclass(frozen=True)
class EngineFact:
    """One claim of the lesson, with the source text it was read from."""

    key: str
    topic: str
    repo: str
    file: str
    commit: str  # the full hash the file was read at
    where: str  # a class, function, field or docstring in that file
    quote: str  # copied from that text, one line
    claim: str  # what the lesson says it shows

    @property
    def short_commit(self) -> str:
        return self.commit[:8]


@dataclass(frozen=True)
class ThreadReport:
    """A claim read from an issue or pull-request thread (its description), with a quote."""

    key: str
    topic: str
    repo: str
    number: int
    kind: str  # "issue" or "pull request"
    title: str
    quote: str
    claim: str

    @property
    def url(self) -> str:
        return f"https://github.com/{self.repo}/{'issues' if self.kind == 'issue' else 'pull'}/{self.number}"


VLLM, SGLANG, TORCH = "vllm-project/vllm", "sgl-project/sglang", "pytorch/pytorch"
_COMPILATION = ("vllm/config/compilation.py", "002284db4c87420647c6bc2cafe923942bcea307")
_CG_DOC = ("docs/design/cuda_graphs.md", "0045689bdb239a1c53951f3847b9475098f36ef7")
_BACKEND = ("vllm/v1/attention/backend.py", "0014ca6b9929614f1b72c4bb11e5238de49cba89")
_DISPATCHER = ("vllm/v1/cudagraph_dispatcher.py", "009eec3b2b00e1b8afb4bcafb58e9403b2aa1ada")
_WRAPPER = ("vllm/compilation/cuda_graph.py", "018fe847afda28835c6d8e008bd49185f65044e9")
_TREES = ("torch/_inductor/cudagraph_trees.py", "00008d32e650f1707e5332ce6055c1dc433766f0")
_BREAKABLE = ("vllm/compilation/breakable_cudagraph.py", "7fd795322cf0131764e80a1e57d19c36e7a8bcc4")
_FORWARD_CONTEXT = ("vllm/forward_context.py", "01fb6e2f5e8e8b33018d0e7765a467192d2da464")
_SG_ARGS = ("python/sglang/srt/server_args.py", "001067fffe33427bee0ed2f007fb7551a1d76b44")
_SG_CG_CONFIG = ("python/sglang/srt/model_executor/cuda_graph_config.py",
                 "d8e428b87bc479617e5bcf5ad995eca265d20098")
_SG_PREFILL = ("python/sglang/srt/model_executor/cuda_graph_runner/prefill_runner.py",
               "f438a118479a5d7e109d8ec5fcf462c2ceb17ac2")
_SG_PCG_DOC = ("docs/advanced_features/piecewise_cuda_graph.md", "f543317e0eadafd958a2e16109d1d896efc1d424")
_SG_BCG_DOC = ("docs/advanced_features/breakable_cuda_graph.md", "d3f419e8362284d391db7f1a02d4375a898c0185")


def _fact(key, topic, repo, source, where, quote, claim) -> EngineFact:
    return EngineFact(key, topic, repo, source[0], source[1], where, quote, claim)


FACTS: tuple[EngineFact, ...] = (
    # --- the modes and what an attention backend allows
    _fact("mode_pairs", "modes", VLLM, _COMPILATION, "class CUDAGraphMode",
          "FULL_AND_PIECEWISE = (FULL, PIECEWISE)",
          "the two dual modes are pairs (decode mode, mixed mode): FULL_AND_PIECEWISE is (FULL, PIECEWISE), "
          "FULL_DECODE_ONLY is (FULL, NONE); NONE, PIECEWISE and FULL are also the runtime modes a step runs in"),
    _fact("mode_piecewise", "modes", VLLM, _COMPILATION, "CompilationConfig.cudagraph_mode (docstring)",
          "PIECEWISE mode build piecewise cudagraph only, keeping the cudagraph",
          "PIECEWISE: graphs of the pieces between attentions, attention (and other ops a graph cannot hold) "
          "eager"),
    _fact("mode_full", "modes", VLLM, _COMPILATION, "CompilationConfig.cudagraph_mode (docstring)",
          "FULL mode: Capture full cudagraph for all batches.",
          "FULL: one whole-step graph for every batch, mixed prefill/decode included; \"not supported by many "
          "backends\""),
    _fact("mode_full_reuse", "modes", VLLM, _CG_DOC, "section CudagraphModes",
          "uniform-decode batches reuse the CUDA Graph of non-uniform batch of the same batch_size",
          "under FULL a decode batch replays the mixed-batch graph of its size; no separate decode graphs"),
    _fact("mode_full_decode_only", "modes", VLLM, _COMPILATION, "CompilationConfig.cudagraph_mode (docstring)",
          "FULL_DECODE_ONLY mode: Capture full cudagraph for decode batches only.",
          "FULL_DECODE_ONLY: full graphs for decode batches, mixed prefill/decode batches eager (for the decode "
          "instances of a prefill/decode split, saving the piecewise graphs' memory)"),
    _fact("mode_default", "modes", VLLM, _COMPILATION, "CompilationConfig.cudagraph_mode (docstring)",
          "FULL_AND_PIECEWISE mode: Capture full cudagraph for decode batches and",
          "FULL_AND_PIECEWISE, the default: full graphs for uniform decode batches, piecewise graphs for "
          "prefill and mixed batches"),
    _fact("cg_support_always", "modes", VLLM, _BACKEND, "class AttentionCGSupport",
          "Cudagraph always supported; supports mixed-prefill-decode",
          "ALWAYS (3): the backend's attention can sit in a graph of any batch, mixed prefill/decode included"),
    _fact("cg_support_uniform", "modes", VLLM, _BACKEND, "class AttentionCGSupport",
          "Cudagraph supported for batches the only contain query lengths that are",
          "UNIFORM_BATCH (2): graphs of batches whose requests all have the same query length, such as the "
          "1 + k tokens of speculative decoding"),
    _fact("cg_support_single", "modes", VLLM, _BACKEND, "class AttentionCGSupport",
          "Cudagraph supported for batches the only contain query_len==1 decodes",
          "UNIFORM_SINGLE_TOKEN_DECODE (1): graphs of plain decode batches only, one token per request"),
    _fact("cg_support_never", "modes", VLLM, _BACKEND, "AttentionMetadataBuilder._cudagraph_support",
          "_cudagraph_support: ClassVar[AttentionCGSupport] = AttentionCGSupport.NEVER",
          "NEVER (0) is what a backend declares unless it says otherwise"),
    _fact("downgrade_minimum", "modes", VLLM, _CG_DOC, "section CUDA Graphs Compatibility of Attention Backends",
          "we seek the minimum capability of all backends to determine the final capability of the model",
          "a model with several attention backends (a hybrid with Mamba layers, say) gets the weakest "
          "backend's support"),
    _fact("downgrade_full", "modes", VLLM, _CG_DOC, "section CudagraphModes (note)",
          "we convert `FULL` to `FULL_AND_PIECEWISE` if piecewise compilation is enabled, and "
          "`FULL_DECODE_ONLY` otherwise.",
          "FULL asked of a backend that supports only uniform batches becomes FULL_AND_PIECEWISE (or "
          "FULL_DECODE_ONLY without piecewise compilation): mixed batches leave the full graph"),
    _fact("downgrade_never", "modes", VLLM, _CG_DOC, "section CUDA Graphs Compatibility of Attention Backends",
          "or `PIECEWISE` mode if the minimum capability is `NEVER` for -O3 compilation mode",
          "a backend that supports no graph at all leaves PIECEWISE: attention eager, the rest graphed"),
    _fact("dispatch_order", "modes", VLLM, _DISPATCHER, "CudagraphDispatcher.dispatch (docstring)",
          "A new batch descriptor is returned as we might dispatch a uniform batch",
          "each step the dispatcher tries a FULL graph for the exact (uniform) key, then a FULL graph of the "
          "same size for a non-uniform batch, then a PIECEWISE graph, else NONE (eager)"),
    # --- vLLM's wrapper against PyTorch's CUDAGraph Trees
    _fact("wrapper_global_pool", "wrapper", VLLM, _WRAPPER, "CUDAGraphWrapper.__init__",
          "self.graph_pool = current_platform.get_global_graph_pool()",
          "every CUDAGraphWrapper (each piece, each full graph) captures into one global pool"),
    _fact("wrapper_weak_output", "wrapper", VLLM, _WRAPPER, "CUDAGraphWrapper.__call__",
          "entry.output = weak_ref_tensors(output)",
          "the wrapper keeps each graph's output only as a weak reference, so the pool may reuse it; replay "
          "returns that same memory, and the caller must use it before the next replay"),
    _fact("wrapper_trusts_dispatcher", "wrapper", VLLM, _WRAPPER, "class CUDAGraphWrapper (docstring)",
          "CUDAGraphWrapper does not store persistent buffers or copy any",
          "the wrapper copies no inputs: the model runner keeps the static buffers, and the wrapper replays "
          "whatever graph the dispatcher's (mode, batch descriptor) names"),
    _fact("trees_one_pool", "wrapper", TORCH, _TREES, "module docstring",
          "CUDA graph trees are a safety abstraction over CUDAGraphs, similar to make_graph_callables,",
          "CUDAGraph Trees (what torch.compile's reduce-overhead uses) also share one memory pool between the "
          "graphs they record"),
    _fact("trees_liveness", "wrapper", TORCH, _TREES, "module docstring",
          "You'll get a separate recording of B depending on what tensors",
          "Trees track which outputs of an earlier graph are still alive and record a new graph rather than "
          "overwrite them: safety bought with recordings, where vLLM's wrapper trusts the runner instead"),
    _fact("trees_per_device", "wrapper", TORCH, _TREES, "class TreeManagerContainer (docstring)",
          "There is a single tree manager container per device.",
          "one tree manager, and so one pool, per device"),
    # --- breakable graphs
    _fact("breakable_env", "breakable", VLLM, _BREAKABLE, "is_breakable_cudagraph_enabled",
          "return bool(envs.VLLM_USE_BREAKABLE_CUDAGRAPH)",
          "VLLM_USE_BREAKABLE_CUDAGRAPH switches vLLM's breakable graphs on"),
    _fact("breakable_origin", "breakable", VLLM, _BREAKABLE, "module docstring",
          "The idea (inspired by sgl-project/sglang#19102)",
          "one capture drives the whole forward; an attention or KV-cache op ends the graph, runs eagerly, and "
          "a new graph begins: no torch.compile split (the idea came from SGLang)"),
    _fact("breakable_add_eager", "breakable", VLLM, _BREAKABLE, "BreakableCUDAGraphCapture.add_eager",
          "End the current capture segment, run ``fn`` eagerly on the",
          "a replay is the list of segments in order: graph, eager op, graph, ..."),
    _fact("breakable_in_place", "breakable", VLLM, _BREAKABLE, "eager_break_during_capture (docstring)",
          "**In-place output buffer required.**",
          "the eager op must write into a buffer it is given, as in the course's PiecewiseDecoder: a new "
          "tensor would move at every replay and the next graph would read the old address"),
    _fact("breakable_full_mode", "breakable", VLLM, _BREAKABLE, "eager_break_during_capture, wrapper",
          "if mode == CUDAGraphMode.FULL:",
          "when the step runs in FULL mode the marked op is captured too: no break"),
    _fact("sglang_breakable_env", "breakable", SGLANG, _SG_BCG_DOC, "section Usage",
          "export SGLANG_USE_BREAKABLE_CUDA_GRAPH=1",
          "SGLang's own breakable graphs: functions marked @eager_on_graph run eagerly between segments"),
    # --- SGLang graphs prefill
    _fact("sglang_pcg_opt_in", "prefill", SGLANG, _SG_PCG_DOC, "section How to enable",
          "You can enable piecewise CUDA graph by adding `--enable-piecewise-cuda-graph` when launching the "
          "server.",
          "in this older document prefill graphs were opt-in and marked experimental"),
    _fact("sglang_pcg_pick", "prefill", SGLANG, _SG_PCG_DOC, "section What it does",
          "it selects the smallest captured size `static_num_tokens` such that `static_num_tokens >= num_tokens`.",
          "a prefill step pads its token count up to the next captured size, as decode pads its batch"),
    _fact("sglang_prefill_default", "prefill", SGLANG, _SG_CG_CONFIG, "class CudaGraphConfig",
          "default_factory=lambda: PhaseConfig(backend=Backend.TC_PIECEWISE)",
          "now each phase has a graph backend, and the prefill phase's default is tc_piecewise "
          "(torch.compile splits the model, the pieces are graphed)"),
    _fact("sglang_prefill_not_full", "prefill", SGLANG, _SG_CG_CONFIG, "ALLOWED_BACKENDS_PER_PHASE",
          "# full is rejected for prefill — full CUDA graph capture only",
          "prefill may be graphed in pieces (tc_piecewise) or with breaks (breakable), not as one full graph"),
    _fact("sglang_breakable_default", "prefill", SGLANG, _SG_ARGS, "ServerArgs._apply_cuda_graph_compatibility",
          "# Breakable is the CUDA default but not multimodal-compatible;",
          "at this commit of server_args the CUDA default prefill backend is breakable: either way prefill "
          "graphs are on unless switched off"),
    _fact("sglang_prefill_off_switch", "prefill", SGLANG, _SG_ARGS, "ServerArgs.disable_prefill_cuda_graph",
          "Disable the prefill-phase CUDA graph.",
          "--disable-prefill-cuda-graph (default False) turns them off"),
    _fact("sglang_prefill_auto_off", "prefill", SGLANG, _SG_ARGS,
          "ServerArgs._disable_tc_piecewise_cudagraph_if_incompatible",
          "(\"LoRA\", lambda: bool(cfg.lora_paths) or cfg.enable_lora),",
          "and the engine turns tc_piecewise prefill graphs off by itself for a list of features (LoRA, DP "
          "attention, pipeline parallelism, ...) unless you set the backend explicitly"),
    _fact("sglang_prefill_schedule", "prefill", SGLANG, _SG_ARGS,
          "ServerArgs._generate_prefill_cuda_graph_batch_sizes",
          "+ list(range(1280, 4096 + 1, 256))",
          "token counts: every 4 to 32, every 16 to 256, every 32 to 512, every 64 to 1024, every 256 to "
          "4096, every 512 above, up to the largest"),
    _fact("sglang_prefill_largest", "prefill", SGLANG, _SG_ARGS, "ServerArgs._handle_gpu_memory_settings",
          "prefill_cuda_graph_config.max_bs = cfg.chunked_prefill_size",
          "the largest is the chunked-prefill size (8192 tokens on an H200, \"# H20, H200\"), 2048 with an "
          "MLA backend"),
    _fact("sglang_prefill_reserve", "prefill", SGLANG, _SG_ARGS, "ServerArgs.reserve_for_graph_mb",
          "reserved_mem += len(prefill_cuda_graph_config.bs) * 8",
          "the memory plan budgets 8 MB outside the torch pool per prefill size (non-MLA), beside 2 MB per "
          "decode batch size"),
    _fact("sglang_prefill_order", "prefill", SGLANG, _SG_PREFILL, "PrefillCudaGraphRunner.capture",
          "tqdm.tqdm(list(reversed(self.capture_num_tokens)))",
          "captured largest first, like decode"),
    _fact("sglang_prefill_can_run", "prefill", SGLANG, _SG_PREFILL, "PrefillCudaGraphRunner.can_run",
          "if num_tokens > self.max_num_tokens:",
          "a prefill above the largest token count runs without a graph"),
    # --- speculative decoding
    _fact("spec_uniform", "speculative", VLLM, _CG_DOC, "introduction (note)",
          "speculative decode (`max_query_len =1+num_spec_tokens`) as **uniform decode** batches",
          "a verification step of k speculative tokens gives every request 1 + k query tokens: a uniform batch"),
    _fact("spec_decode_keys", "speculative", VLLM, _DISPATCHER, "CudagraphDispatcher.initialize_cudagraph_keys",
          "if x <= max_num_tokens and x >= uniform_decode_query_len",
          "FULL decode graphs exist for the captured sizes from 1 + k up to (1 + k) x max_num_seqs tokens"),
    _fact("spec_sglang_sizes", "speculative", SGLANG, _SG_ARGS, "ServerArgs._generate_decode_cuda_graph_batch_sizes",
          "# Spec decoding case: less padding for smaller batch sizes",
          "SGLang captures a finer list of batch sizes when it speculates"),
    _fact("spec_sglang_verify_not_prefill", "speculative", SGLANG, _SG_PREFILL, "PrefillCudaGraphRunner.can_run",
          "if forward_batch.forward_mode.is_target_verify():",
          "a verification step never replays a prefill graph"),
    # --- LoRA
    _fact("lora_specialize", "lora", VLLM, _COMPILATION, "CompilationConfig.cudagraph_specialize_lora",
          "cudagraph_specialize_lora: bool = True",
          "on by default: separate graphs with and without active LoRA adapters, so a batch without adapters "
          "skips the LoRA ops"),
    _fact("lora_memory", "lora", VLLM, _COMPILATION, "CompilationConfig.cudagraph_specialize_lora (docstring)",
          "cost of increased startup time and slightly higher memory usage.",
          "the price is capture time and a little memory: twice the graphs, one shared pool"),
    _fact("lora_count", "lora", VLLM, _FORWARD_CONTEXT, "BatchDescriptor.num_active_loras",
          "When cudagraph_specialize_lora_count is enabled, separate CUDA graphs",
          "with the count specialised, one graph per number of distinct active adapters, because kernels such "
          "as fused_moe_lora size their grid by it"),
)

REPORTS: tuple[ThreadReport, ...] = (
    ThreadReport(
        "vllm_54997", "speculative", VLLM, 54997, "issue",
        "compressed-tensors NVFP4 weights produce 0% acceptance in the eagle/MTP drafter under CUDA-graph "
        "capture (works with --enforce-eager)",
        "Disabling CUDA-graph capture fixes it completely.",
        "an NVFP4 draft model graphed by default: 0% acceptance; cudagraph_mode NONE: 77.5%; --enforce-eager: "
        "92.3% (vLLM 0.28, B200). The same op was fine in the target model: only the drafter's captured path "
        "was wrong, so every draft was rejected and decoding fell back to one token per step"),
    ThreadReport(
        "sglang_18647", "speculative", SGLANG, 18647, "pull request", "[sglang-miles] MTP related fix",
        "Zero-pad `topk_p`, `topk_index`, `hidden_states`, `req_pool_indices` for CUDA graph padding slots to "
        "prevent stale data issues",
        "the draft model's graph read stale data in its padded slots; the fix zero-pads them, clamps the "
        "draft's top-k values, and adds --disable-draft-cuda-graph to graph the target without the draft"),
)

_HEX = re.compile(r"[0-9a-f]{7,40}")


def facts(topic: str | None = None) -> tuple[EngineFact, ...]:
    """The facts of one topic (all of them without one)."""
    if topic is not None and topic not in TOPICS:
        raise ValueError(f"unknown topic {topic!r}: the topics are {', '.join(TOPICS)}")
    return tuple(f for f in FACTS if topic is None or f.topic == topic)


def cite(fact: EngineFact) -> str:
    """Where a fact was read: "file @ commit8, where"."""
    return f"{fact.file} @ {fact.short_commit}, {fact.where}"


def fact_lines(topic: str, width: int = 100) -> list[str]:
    """The lesson's printout of a topic: each claim, then its citation and quote, wrapped to width."""
    import textwrap

    lines = []
    for f in facts(topic):
        lines += textwrap.wrap(f"- {f.claim}", width, subsequent_indent="  ")
        lines += textwrap.wrap(f"[{f.repo}: {cite(f)}: \"{f.quote}\"]", width, initial_indent="  ",
                               subsequent_indent="    ")
    return lines


def report_lines(topic: str, width: int = 100) -> list[str]:
    """Like :func:`fact_lines`, for the issue and pull-request threads of a topic."""
    import textwrap

    lines = []
    for r in REPORTS:
        if r.topic == topic:
            lines += textwrap.wrap(f"- {r.claim}", width, subsequent_indent="  ")
            lines += textwrap.wrap(f"[{r.kind} {r.repo}#{r.number}: \"{r.quote}\"]", width,
                                   initial_indent="  ", subsequent_indent="    ")
    return lines


# --------------------------------------------------------------------------- rules read from the source


def sglang_prefill_max_tokens(chunked_prefill_size: int = 8192, mla: bool = False,
                              max_total_tokens: int | None = None) -> int:
    """SGLang's largest prefill graph in tokens (ServerArgs._handle_gpu_memory_settings at 001067ff)."""
    largest = 2048 if mla else chunked_prefill_size
    return min(largest, max_total_tokens) if max_total_tokens is not None else largest


def sglang_prefill_token_sizes(max_tokens: int = 8192) -> tuple[int, ...]:
    """SGLang's prefill capture sizes in tokens (ServerArgs._generate_prefill_cuda_graph_batch_sizes, 001067ff)."""
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be positive, got {max_tokens}")
    sizes = (list(range(4, 33, 4)) + list(range(48, 257, 16)) + list(range(288, 513, 32))
             + list(range(576, 1024 + 1, 64)) + list(range(1280, 4096 + 1, 256))
             + list(range(4608, max_tokens + 1, 512)))
    return tuple(s for s in sizes if s <= max_tokens)


def vllm_full_decode_sizes(capture_sizes, num_speculative_tokens: int, max_num_seqs: int) -> tuple[int, ...]:
    """Token counts vLLM keeps FULL decode graphs for (CudagraphDispatcher.initialize_cudagraph_keys, 009eec3b)."""
    q = 1 + num_speculative_tokens
    if num_speculative_tokens < 0 or max_num_seqs < 1:
        raise ValueError("num_speculative_tokens must be >= 0 and max_num_seqs >= 1")
    return tuple(x for x in sorted(capture_sizes) if q <= x <= q * max_num_seqs)


def graphs_to_capture(n_sizes: int, lora_variants: int = 1) -> int:
    """How many graphs a list of sizes needs when each size is captured once per LoRA variant."""
    if n_sizes < 0 or lora_variants < 1:
        raise ValueError("n_sizes must be >= 0 and lora_variants >= 1")
    return n_sizes * lora_variants


# --------------------------------------------------------------------------- the toy twin, as tables


def downgrade_lines(cases) -> list[str]:
    """One line per (requested mode, backend support, speculative tokens): the mode toygraph.dispatch resolves."""
    from toygraph.dispatch import UnsupportedModeError, resolve_mode

    lines = []
    for requested, support, k in cases:
        try:
            got = resolve_mode(requested, support, num_speculative_tokens=k).mode.name
        except UnsupportedModeError:
            got = "refuses to start (UnsupportedModeError)"
        lines.append(f"{requested!s:<18} + {support!s:<46} k={k}: {got}")
    return lines


def dispatch_table(batches, capture_sizes, modes, num_speculative_tokens: int = 0,
                   max_num_seqs: int | None = None) -> list[str]:
    """A row per named batch (query tokens per request): the runtime mode and token count each mode runs."""
    from toygraph.dispatch import dispatch

    width = max(len(name) for name in batches)
    lines = [(f"{'batch':<{width}} | " + " | ".join(f"{m!s:<18}" for m in modes)).rstrip()]
    for name, query_lens in batches.items():
        cells = []
        for mode in modes:
            got = dispatch(mode, capture_sizes, list(query_lens), max_num_seqs=max_num_seqs,
                           num_speculative_tokens=num_speculative_tokens)
            cells.append(f"{f'{got.runtime_mode} @ {got.num_tokens}':<18}")
        lines.append((f"{name:<{width}} | " + " | ".join(cells)).rstrip())
    return lines


# --------------------------------------------------------------------------- the instructor's answers


def try_answer(item: str) -> str | None:
    """The computed answer to one of the section's Things to try, or None for another item."""
    if "prefill" in item and "2048" in item:
        full, mla = sglang_prefill_token_sizes(8192), sglang_prefill_token_sizes(sglang_prefill_max_tokens(mla=True))
        return (f"{len(full)} prefill sizes up to 8192 tokens, {len(mla)} up to 2048 with an MLA backend; "
                f"in SGLang's memory plan that is {len(full) * 8} MB against {len(mla) * 8} MB outside the pool "
                f"(8 MB per size; with MLA the plan reserves a flat 1.5 GB instead). A prefill of 1000 tokens "
                f"pads to {next(s for s in full if s >= 1000)}, of 5000 to {next(s for s in full if s >= 5000)}.")
    if "speculative" in item and "max_num_seqs" in item:
        from .serving import vllm_default_sizes

        sizes = vllm_default_sizes(64, 8192, decode_query_len=3)
        keys = vllm_full_decode_sizes(sizes, 2, 64)
        exact = [x for x in keys if x % 3 == 0]
        return (f"{len(sizes)} sizes; {len(keys)} of them lie between 3 and 3 x 64 = 192 tokens and get FULL "
                f"decode keys. A uniform batch of n requests carries 3n tokens, so only the {len(exact)} "
                f"multiples of 3 among them ({', '.join(map(str, exact[:6]))}, ...) fit such a batch exactly: "
                f"the n x 3 sizes vLLM appends for speculative decoding.")
    if "LoRA" in item:
        from .serving import vllm_default_sizes

        n = len(vllm_default_sizes())
        return (f"{n} sizes: {graphs_to_capture(n)} capture keys without LoRA, {graphs_to_capture(n, 2)} with "
                f"LoRA enabled and cudagraph_specialize_lora (with and without adapters), {graphs_to_capture(n, 5)} "
                f"if each count 0 to 4 of active adapters got its own. Capture time grows with the count; the "
                f"shared pool stays what the largest graph needs, plus a little per graph.")
    return None
