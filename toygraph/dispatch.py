"""Which CUDA graph runs: vLLM's graph modes, the downgrade an attention backend forces, and the per-step dispatch.

Public API (standard library only):

* :class:`CUDAGraphMode`: NONE, PIECEWISE, FULL (also the three *runtime* modes), FULL_DECODE_ONLY and
  FULL_AND_PIECEWISE (a mode for uniform-decode batches paired with one for every other batch).
* :class:`AttentionCGSupport`: what an attention backend declares it can run inside a full graph,
  weakest last: ALWAYS > UNIFORM_BATCH > UNIFORM_SINGLE_TOKEN_DECODE > NEVER.
* :func:`resolve_mode` (requested mode, backend support) -> :class:`Resolution` ``(mode, reason)``: the mode
  vLLM actually runs with, and the warning it logs when it downgrades ("" when it keeps the request).
  :class:`UnsupportedModeError` where vLLM refuses to start.
* :class:`BatchDescriptor` ``(num_tokens, num_reqs, uniform)`` and :func:`describe_batch` (query length per
  request -> descriptor): a batch is *uniform decode* when every request has exactly ``1 + k`` query
  tokens (1 without speculative decoding, 1 + k with k draft tokens).
* :func:`dispatch` (resolved mode, capture sizes, batch) -> :class:`Dispatched` ``(runtime_mode, num_tokens)``:
  FULL, PIECEWISE or NONE, and the token count it runs (padded up to the next capture size; unpadded for NONE).

Read from vLLM's source (``vllm-project/vllm``; the 1.1 GB repository was read file by file from a stored
index, each at the commit named):

* ``vllm/config/compilation.py`` @ ee525ce4fc8c9cfdedbbad878dcb2bccbb3c4b95: ``CUDAGraphMode`` (values
  ``FULL_DECODE_ONLY = (FULL, NONE)``, ``FULL_AND_PIECEWISE = (FULL, PIECEWISE)``; ``decode_mode``,
  ``mixed_mode``, ``has_mode``, ``separate_routine``) and the ``cudagraph_mode`` docstring
  (FULL_AND_PIECEWISE is the default).
* ``vllm/v1/attention/backend.py`` @ e379cf37ec69dd7a07c87fe74413abb9193e9500: ``AttentionCGSupport``
  (ALWAYS = 3, UNIFORM_BATCH = 2, UNIFORM_SINGLE_TOKEN_DECODE = 1, NEVER = 0) and
  ``AttentionMetadataBuilder.get_cudagraph_support`` (NEVER unless a backend says more); older versions
  keep the enum in ``vllm/v1/attention/backends/utils.py``.
* ``vllm/v1/worker/gpu_model_runner.py`` @ 4e1790651fc758c06c7a903dd4cd82364ac91b27:
  ``GPUModelRunner._check_and_update_cudagraph_mode`` (the weakest support over every attention backend,
  then the downgrade rules, in order; newer versions moved them unchanged to
  ``CompilationConfig.resolve_cudagraph_mode_and_sizes``), and the uniform-decode test in
  ``_prepare_inputs``: ``max_num_scheduled_tokens == uniform_decode_query_len and
  total_num_scheduled_tokens == num_reqs * max_num_scheduled_tokens``.
* ``vllm/v1/cudagraph_dispatcher.py`` @ ae2e8e62cea0f6c030f92234cb863acdc48658cb: ``CudagraphDispatcher``
  (``_compute_bs_to_padded_graph_size``, ``_create_padded_batch_descriptor``, ``initialize_cudagraph_keys``,
  ``dispatch``).
* ``vllm/forward_context.py`` @ 762388d07ff7dfaa597a0bdd17a3dec0813b12a3: ``BatchDescriptor``
  (``num_tokens``, ``num_reqs``, ``uniform``, LoRA fields) and ``relax_for_mixed_batch_cudagraphs``.

Where the toy simplifies (each said again where it applies):

* One flag, ``attention_piecewise`` (default True, vLLM's default), stands for "attention is compiled
  piecewise": compilation mode VLLM_COMPILE with attention in ``splitting_ops`` (or inductor graph
  partition). vLLM reads it from ``CompilationConfig``.
* One support level: the weakest over the model's attention backends, which vLLM computes first.
* No LoRA (vLLM also keys graphs on active adapters), no cascade attention (``disable_full``), no data
  parallelism, no multimodal encoder graphs.
* The capture sizes are taken as given. With FULL decode graphs and speculative decoding vLLM first rounds
  them to multiples of 1 + k (``adjust_cudagraph_sizes_for_spec_decode``); :func:`dispatch` raises a clear
  error where a padded uniform batch is not such a multiple (vLLM asserts).
* ``max_num_seqs`` (the scheduler's cap on requests per step) is optional: without it no decode size is
  left out for being too large.
"""

from __future__ import annotations

import enum
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from .errors import InvalidArgumentError, ToyGraphError

__all__ = [
    "AttentionCGSupport",
    "BatchDescriptor",
    "CUDAGraphMode",
    "Dispatched",
    "Resolution",
    "UnsupportedModeError",
    "describe_batch",
    "dispatch",
    "resolve_mode",
]


class CUDAGraphMode(enum.Enum):
    """vLLM's ``cudagraph_mode``; NONE, PIECEWISE and FULL are also the runtime modes one step runs in.

    A pair ``(decode, mixed)`` names one mode for uniform-decode batches and one for every other batch
    (prefill and mixed prefill-decode): FULL_DECODE_ONLY runs mixed batches without a graph,
    FULL_AND_PIECEWISE (vLLM's default) runs them through piecewise graphs (attention eager between them).
    """

    NONE = 0
    PIECEWISE = 1
    FULL = 2
    FULL_DECODE_ONLY = (FULL, NONE)
    FULL_AND_PIECEWISE = (FULL, PIECEWISE)

    def separate_routine(self) -> bool:
        """Whether uniform-decode batches and mixed batches have modes of their own (the two pairs)."""
        return isinstance(self.value, tuple)

    def decode_mode(self) -> CUDAGraphMode:
        """The runtime mode for uniform-decode batches."""
        return CUDAGraphMode(self.value[0]) if self.separate_routine() else self

    def mixed_mode(self) -> CUDAGraphMode:
        """The runtime mode for every other batch (prefill, mixed prefill-decode)."""
        return CUDAGraphMode(self.value[1]) if self.separate_routine() else self

    def has_mode(self, mode: CUDAGraphMode) -> bool:
        """Whether this mode runs `mode` (NONE, PIECEWISE or FULL) for some batches."""
        if self.separate_routine():
            return mode.value in self.value
        return self == mode

    def has_full_cudagraphs(self) -> bool:
        """Whether some batches replay one full graph (attention inside it)."""
        return self.has_mode(CUDAGraphMode.FULL)

    def __str__(self) -> str:
        return self.name


class AttentionCGSupport(enum.Enum):
    """What an attention backend declares it can run inside a full CUDA graph; a larger value supports more."""

    ALWAYS = 3  # any batch, mixed prefill-decode included
    UNIFORM_BATCH = 2  # batches whose requests all have the same query length (1 + k with spec decode)
    UNIFORM_SINGLE_TOKEN_DECODE = 1  # only batches of one query token per request
    NEVER = 0  # no full graph; attention runs eagerly between piecewise graphs

    def __str__(self) -> str:
        return f"AttentionCGSupport.{self.name}"


class UnsupportedModeError(ToyGraphError, ValueError):
    """vLLM refuses to start: the requested mode needs full graphs the attention backend can never run."""


class Resolution(NamedTuple):
    """The mode vLLM runs with and the warning it logged to get there ("" when the request was kept)."""

    mode: CUDAGraphMode
    reason: str


def _mode(value: object, name: str = "requested") -> CUDAGraphMode:
    if isinstance(value, CUDAGraphMode):
        return value
    if isinstance(value, str) and value.upper() in CUDAGraphMode.__members__:
        return CUDAGraphMode[value.upper()]  # vLLM parses the config's string the same way
    raise InvalidArgumentError(
        f"{name} must be a CUDAGraphMode or its name, one of {', '.join(CUDAGraphMode.__members__)}; "
        f"got {value!r}. Example: CUDAGraphMode.FULL_AND_PIECEWISE or 'full_and_piecewise'."
    )


def _support(value: object) -> AttentionCGSupport:
    if isinstance(value, AttentionCGSupport):
        return value
    if isinstance(value, str) and value.upper() in AttentionCGSupport.__members__:
        return AttentionCGSupport[value.upper()]
    raise InvalidArgumentError(
        f"support must be an AttentionCGSupport or its name, one of "
        f"{', '.join(AttentionCGSupport.__members__)}; got {value!r}. It is what the attention backend "
        f"declares (the weakest one when a model has several)."
    )


def _whole(name: str, value: object, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentError(f"{name} must be a whole number, got {value!r} ({type(value).__name__}).")
    if value < least:
        raise InvalidArgumentError(f"{name} must be at least {least}, got {value}.")
    return value


def resolve_mode(requested: CUDAGraphMode | str, support: AttentionCGSupport | str, *,
                 num_speculative_tokens: int = 0, attention_piecewise: bool = True,
                 backend: str = "ToyAttentionBackend") -> Resolution:
    """The mode vLLM runs with when `requested` meets a backend of `support`, and the warning it logs.

    vLLM's rules, in its order (``_check_and_update_cudagraph_mode``); each sees the previous one's result:

    1. FULL for mixed batches (only FULL itself has mixed mode FULL) needs ALWAYS. Otherwise NEVER refuses
       to start (:class:`UnsupportedModeError`); any other support gives FULL_AND_PIECEWISE when attention
       is compiled piecewise, FULL_DECODE_ONLY when it is not.
    2. FULL for decode batches needs more than NEVER: else PIECEWISE when attention is compiled piecewise,
       NONE when it is not.
    3. With speculative decoding (1 + k query tokens per request, k > 0), FULL for decode batches needs
       UNIFORM_BATCH or ALWAYS: else PIECEWISE when attention is compiled piecewise, NONE when it is not.

    `attention_piecewise` stands for vLLM's "compilation mode VLLM_COMPILE and attention in splitting_ops"
    (its default); `backend` only names the backend in the reason, as vLLM's warning does.
    """
    mode = _mode(requested)
    sup = _support(support)
    k = _whole("num_speculative_tokens", num_speculative_tokens, 0)
    if not isinstance(attention_piecewise, bool):
        raise InvalidArgumentError(f"attention_piecewise must be True or False, got {attention_piecewise!r}.")
    if mode.has_mode(CUDAGraphMode.PIECEWISE) and not attention_piecewise:
        raise InvalidArgumentError(
            f"cudagraph_mode={mode} captures piecewise graphs, which need attention compiled piecewise "
            f"(vLLM asserts this in CudagraphDispatcher): pass attention_piecewise=True, or request FULL "
            f"or FULL_DECODE_ONLY."
        )
    reasons: list[str] = []
    if mode.mixed_mode() == CUDAGraphMode.FULL and sup != AttentionCGSupport.ALWAYS:
        msg = f"CUDAGraphMode.{mode.name} is not supported with {backend} backend (support: {sup})"
        if sup == AttentionCGSupport.NEVER:
            raise UnsupportedModeError(msg + "; please try cudagraph_mode=PIECEWISE, and make sure "
                                             "compilation mode is VLLM_COMPILE")
        mode = CUDAGraphMode.FULL_AND_PIECEWISE if attention_piecewise else CUDAGraphMode.FULL_DECODE_ONLY
        reasons.append(f"{msg}; setting cudagraph_mode={mode.name}")
    if mode.decode_mode() == CUDAGraphMode.FULL and sup == AttentionCGSupport.NEVER:
        msg = f"CUDAGraphMode.{mode.name} is not supported with {backend} backend (support: {sup})"
        mode = CUDAGraphMode.PIECEWISE if attention_piecewise else CUDAGraphMode.NONE
        why = "attention is compiled piecewise" if attention_piecewise else "attention is not compiled piecewise"
        reasons.append(f"{msg}; setting cudagraph_mode={mode.name} because {why}")
    if (mode.decode_mode() == CUDAGraphMode.FULL and k > 0
            and sup.value < AttentionCGSupport.UNIFORM_BATCH.value):
        msg = (f"CUDAGraphMode.{mode.name} is not supported with spec-decode for attention backend "
               f"{backend} (support: {sup})")
        mode = CUDAGraphMode.PIECEWISE if attention_piecewise else CUDAGraphMode.NONE
        reasons.append(f"{msg}; setting cudagraph_mode={mode.name}")
    return Resolution(mode, "; then ".join(reasons))


@dataclass(frozen=True)
class BatchDescriptor:
    """One step's batch as the dispatcher keys it: tokens, requests (None: any), uniform decode or not.

    vLLM's ``BatchDescriptor`` also carries LoRA fields; the toy has none.
    """

    num_tokens: int
    num_reqs: int | None = None
    uniform: bool = False

    def __post_init__(self) -> None:
        _whole("num_tokens", self.num_tokens, 1)
        if self.num_reqs is not None:
            _whole("num_reqs", self.num_reqs, 1)
            if self.num_reqs > self.num_tokens:
                raise InvalidArgumentError(
                    f"{self.num_reqs} requests cannot share {self.num_tokens} tokens: each request schedules "
                    f"one token or more."
                )
        if not isinstance(self.uniform, bool):
            raise InvalidArgumentError(f"uniform must be True or False, got {self.uniform!r}.")
        if self.uniform and self.num_reqs is None:
            raise InvalidArgumentError(
                "a uniform batch needs num_reqs (its tokens are num_reqs * (1 + k)): build it with "
                "describe_batch([1, 1, 1]) or BatchDescriptor(num_tokens=3, num_reqs=3, uniform=True)."
            )

    def relax_for_mixed_batch_cudagraphs(self) -> BatchDescriptor:
        """The same tokens keyed for a graph that takes any batch: no request count, not uniform."""
        return BatchDescriptor(self.num_tokens)


def describe_batch(query_lens: Sequence[int], num_speculative_tokens: int = 0) -> BatchDescriptor:
    """The descriptor of a step whose requests schedule these query tokens each (a decode is 1 + k tokens).

    Uniform decode, as vLLM's model runner decides it: the longest query is 1 + k tokens and every request
    has that many (so 1 + k tokens each: one new token plus k draft tokens to verify).
    """
    if isinstance(query_lens, (str, bytes)) or not isinstance(query_lens, Sequence) or not query_lens:
        raise InvalidArgumentError(
            f"query_lens is the list of query tokens each request schedules this step, e.g. [1, 1, 7] "
            f"(two decodes and a 7-token prefill chunk); got {query_lens!r}."
        )
    lens = [_whole("every query length", q, 1) for q in query_lens]
    uniform_len = 1 + _whole("num_speculative_tokens", num_speculative_tokens, 0)
    longest = max(lens)
    uniform = longest == uniform_len and sum(lens) == len(lens) * longest
    return BatchDescriptor(num_tokens=sum(lens), num_reqs=len(lens), uniform=uniform)


class Dispatched(NamedTuple):
    """What one step runs: the runtime mode (FULL, PIECEWISE or NONE) and its token count (padded, unless NONE)."""

    runtime_mode: CUDAGraphMode
    num_tokens: int


def _capture_sizes(sizes: Iterable[int]) -> list[int]:
    if isinstance(sizes, (str, bytes)) or not isinstance(sizes, Iterable):
        raise InvalidArgumentError(f"capture_sizes must be a list of token counts such as [1, 2, 4, 8], got {sizes!r}.")
    clean = sorted({_whole("every capture size", s, 1) for s in sizes})
    if not clean:
        raise InvalidArgumentError("capture_sizes is empty: give at least one token count, e.g. [1, 2, 4, 8].")
    return clean


def dispatch(mode: CUDAGraphMode | str, capture_sizes: Iterable[int], batch: BatchDescriptor | Sequence[int], *,
             num_speculative_tokens: int = 0, max_num_seqs: int | None = None) -> Dispatched:
    """The runtime mode and padded token count vLLM's dispatcher picks for `batch` under the resolved `mode`.

    `batch` is a :class:`BatchDescriptor` or the list of query lengths per request (see :func:`describe_batch`).
    As ``CudagraphDispatcher``: NONE (unpadded) when `mode` is NONE or the batch has more tokens than the
    largest capture size; else the tokens padded up to the smallest capture size that holds them, and

    * FULL when a full graph was captured for this padded batch: a uniform-decode batch in a mode whose
      decode mode is FULL, or any batch when `mode` is FULL;
    * else PIECEWISE when `mode` has piecewise graphs for mixed batches;
    * else NONE (FULL_DECODE_ONLY on a mixed batch), unpadded.

    Pass `mode` resolved (:func:`resolve_mode`), as vLLM does. `max_num_seqs` (optional) drops the FULL
    decode graphs for more than max_num_seqs requests, as vLLM does.
    """
    mode = _mode(mode, "mode")
    sizes = _capture_sizes(capture_sizes)
    uniform_len = 1 + _whole("num_speculative_tokens", num_speculative_tokens, 0)
    if max_num_seqs is not None:
        _whole("max_num_seqs", max_num_seqs, 1)
    if isinstance(batch, BatchDescriptor):
        desc = batch
        if desc.uniform and desc.num_tokens != desc.num_reqs * uniform_len:
            raise InvalidArgumentError(
                f"a uniform-decode batch of {desc.num_reqs} requests has {desc.num_reqs} x {uniform_len} = "
                f"{desc.num_reqs * uniform_len} tokens with num_speculative_tokens={uniform_len - 1}, not "
                f"{desc.num_tokens}: build it with describe_batch(query_lens, num_speculative_tokens)."
            )
    elif isinstance(batch, Sequence) and not isinstance(batch, (str, bytes)):
        desc = describe_batch(batch, uniform_len - 1)
    else:
        raise InvalidArgumentError(
            f"batch must be a BatchDescriptor or a list of query lengths per request, e.g. [1, 1, 1]; got {batch!r}."
        )

    n = desc.num_tokens
    if mode == CUDAGraphMode.NONE or n > sizes[-1]:
        return Dispatched(CUDAGraphMode.NONE, n)  # no graph holds it: eager, unpadded
    padded = sizes[bisect_left(sizes, n)]  # the smallest capture size >= n (vLLM's precomputed table)

    if desc.uniform and mode.decode_mode() == CUDAGraphMode.FULL:
        if padded % uniform_len:
            raise InvalidArgumentError(
                f"a uniform batch of {n} tokens pads to capture size {padded}, which is not a multiple of "
                f"1 + k = {uniform_len}: with FULL decode graphs and speculative decoding vLLM first rounds every "
                f"capture size to a multiple of 1 + k (adjust_cudagraph_sizes_for_spec_decode); give such sizes."
            )
        decode_reqs = padded // uniform_len
        full_decode_graph = mode.separate_routine() and (max_num_seqs is None or decode_reqs <= max_num_seqs)
        if full_decode_graph or mode == CUDAGraphMode.FULL:
            return Dispatched(CUDAGraphMode.FULL, padded)
    mixed = mode.mixed_mode()
    if mixed == CUDAGraphMode.FULL:
        return Dispatched(CUDAGraphMode.FULL, padded)  # FULL: one full graph per size takes any batch
    if mixed == CUDAGraphMode.PIECEWISE:
        return Dispatched(CUDAGraphMode.PIECEWISE, padded)
    return Dispatched(CUDAGraphMode.NONE, n)  # FULL_DECODE_ONLY on a mixed batch: no graph
