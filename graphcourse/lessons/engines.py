"""Lesson 09's "Serving engines as they are now": facts read from vLLM's, SGLang's and PyTorch's source.

Each :class:`EngineFact` names the file, the commit it was read at, where in the file (a class, a function, a
docstring) and a short quote copied from that text, beside the claim the lesson makes from it. Facts from
issue and pull-request threads are :class:`ThreadReport` (their address and a quote). The lesson prints them
with :func:`fact_lines`, so a claim and its citation never drift apart; tests/test_engines.py checks their shape.
Both tables are written in engine_facts.toml, beside this module, and read when it is imported.

A few pure functions reproduce rules read there, for the lesson's cells and the instructor's answers:
SGLang's prefill token schedule (:func:`sglang_prefill_token_sizes`), vLLM's uniform-decode FULL keys
(:func:`vllm_full_decode_sizes`) and the count of graphs a LoRA specialisation multiplies
(:func:`graphs_to_capture`).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, fields
from pathlib import Path

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
_DATA = Path(__file__).with_name("engine_facts.toml")


def _record(cls, path: Path, table: str, entry: dict):
    """One `cls` from an entry of the TOML file: a missing or unknown field names the file and the entry."""
    names = [f.name for f in fields(cls)]
    missing, unknown = [n for n in names if n not in entry], [k for k in entry if k not in names]
    if missing or unknown:
        raise ValueError(f"{path}: [[{table}]] {entry.get('key', '(no key)')!r}: "
                         f"missing fields {missing}, unknown fields {unknown}")
    return cls(**entry)


def _read_facts(path: Path = _DATA) -> tuple[tuple[EngineFact, ...], tuple[ThreadReport, ...]]:
    """The [[facts]] and [[reports]] of `path`, in its order; a fact's `source` names its repo, file and commit."""
    with path.open("rb") as f:
        data = tomllib.load(f)
    files, read = data.get("files", {}), []
    for entry in data.get("facts", []):
        fact = {k: v for k, v in entry.items() if k != "source"}
        if entry.get("source") not in files:
            raise ValueError(f"{path}: [[facts]] {entry.get('key', '(no key)')!r}: source {entry.get('source')!r} "
                             f"is none of the [files]: {', '.join(files)}")
        read.append(_record(EngineFact, path, "facts", {**fact, **files[entry["source"]]}))
    return tuple(read), tuple(_record(ThreadReport, path, "reports", e) for e in data.get("reports", []))


# The facts and thread reports, read from engine_facts.toml beside this module: edit a citation there.
FACTS: tuple[EngineFact, ...]
REPORTS: tuple[ThreadReport, ...]
FACTS, REPORTS = _read_facts()

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
