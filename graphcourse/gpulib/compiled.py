"""Lesson 07's helpers: the tiny GPT's decode step compiled by torch.compile, and its failures run in a child.

``torch.compile(mode="reduce-overhead")`` captures CUDA graphs for you (CUDAGraph Trees,
``torch/_inductor/cudagraph_trees.py``): it warms up, records one graph per input shape it
sees, keeps the graphs' memory in one pool and copies inputs into static buffers unless they
are static already. :func:`compiled_loop_step` builds the course's decode step that way, with
the KV cache and the loop state marked as static addresses so the in-place writes do not make
the compiler skip graphs. :data:`DEMOS` is one child-process script that shows each failure
mode with torch's own words (kept outputs overwritten, one recording per shape, graphs skipped
and the reasons logged); :func:`run_demos` runs it and returns plain data, which the benchmark
records for learners without a GPU.
"""

from __future__ import annotations

import itertools
import json
import re
import time
from typing import Any, Callable

__all__ = [
    "DEMOS",
    "DemoError",
    "OutputsValidUntilNextCall",
    "StaleOutputError",
    "StandInOutput",
    "compiled_loop_step",
    "eager_loop_step",
    "graph_partition_flag",
    "mark_static",
    "own_code_object",
    "parse_demo_output",
    "run_demos",
    "timed_first_call",
]

COMPILE_MODES = ("default", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune")
"""The torch.compile modes (torch.compile's docstring): reduce-overhead adds CUDA graphs to default's fused kernels."""


class DemoError(RuntimeError):
    """The demo child did not report its observations."""


def mark_static(*tensors: Any) -> None:
    """Mark tensors as static addresses for torch.compile: their in-place writes no longer make it skip CUDA graphs."""
    import torch

    for t in tensors:
        torch._dynamo.mark_static_address(t)


def graph_partition_flag() -> bool | None:
    """``torch._inductor.config.graph_partition`` of the installed torch (None where it has no such flag).

    When it is on, Inductor splits a graph around CPU ops and graphs the CUDA partitions, so a CPU
    tensor no longer makes reduce-overhead skip CUDA graphs (``check_multiple_devices_or_any_cpu_nodes``
    in ``torch/_inductor/cudagraph_utils.py``); mutated inputs that are not static still do.
    """
    import torch._inductor.config as inductor_config

    return getattr(inductor_config, "graph_partition", None)


def eager_loop_step(model: Any, cache: Any, tokens: Any, pos: Any) -> Callable[[], Any]:
    """One decode step that feeds itself: next token into `tokens`, position + 1; returns the next token."""

    def step() -> Any:
        nxt = model.decode_step(tokens, pos, cache)
        tokens.copy_(nxt)
        pos.add_(1)
        return nxt

    return step


def compiled_loop_step(model: Any, cache: Any, tokens: Any, pos: Any, mode: str = "reduce-overhead",
                       static: bool = True) -> Callable[[], Any]:
    """:func:`eager_loop_step` compiled with ``torch.compile(mode=mode)``; `static` marks cache and state static.

    Without `static`, the cache, the token and the position are ordinary inputs that the step
    writes in place, and reduce-overhead logs "skipping cudagraphs due to mutated inputs".
    """
    import torch

    if mode not in COMPILE_MODES:
        raise ValueError(f"mode must be one of {', '.join(COMPILE_MODES)}, got {mode!r}.")
    if static:
        mark_static(cache.k, cache.v, tokens, pos)

    def step(tokens: Any, pos: Any) -> Any:
        nxt = model.decode_step(tokens, pos, cache)
        tokens.copy_(nxt)
        pos.add_(1)
        return nxt

    own_code_object(step)
    compiled = torch.compile(step, mode=mode, dynamic=False, fullgraph=True)
    return lambda: compiled(tokens, pos)


_CODE_IDS = itertools.count()


def own_code_object(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Give `fn` a code object of its own, so torch.compile never serves it another closure's compiled code.

    Dynamo caches compiled code per code object and guards a closure's tensors by shape and dtype,
    not by identity; two closures made by the same ``def`` (one decode step per cache, per compile
    mode) would share entries, and code compiled with one cache's static addresses baked in could
    run for another.
    """
    fn.__code__ = fn.__code__.replace(co_name=f"{fn.__code__.co_name}_{next(_CODE_IDS)}")
    return fn



def compiled_decode_step(model: Any) -> Callable[..., Any]:
    """``step(tok, pos, cache)``: torch.compile's default-mode kernels of one decode step (no graph of its own), one
    compiled function per KV cache, for the benchmarks to capture K steps per graph by hand."""
    import torch

    compiled_for: dict[int, Any] = {}
    keep_alive: list[Any] = []

    def step(tok: Any, pos: Any, cache: Any) -> Any:
        fn = compiled_for.get(id(cache))
        if fn is None:
            keep_alive.append(cache)  # an id is unique only while its object lives
            fn = compiled_for[id(cache)] = torch.compile(
                own_code_object(lambda t, p: model.decode_step(t, p, cache)), mode="default", dynamic=False,
                fullgraph=True)
        return fn(tok, pos)

    return step

def timed_first_call(fn: Callable[[], Any], sync: Callable[[], None] | None = None) -> tuple[Any, float]:
    """Call `fn` once and return (its result, seconds): for a compiled function, the compile time."""
    start = time.perf_counter()
    out = fn()
    if sync is not None:
        sync()
    return out, time.perf_counter() - start


DEMOS = r'''
import json, logging, re, torch

PARTS = {1, 2, 3, 4, 5}

records = []
class Keep(logging.Handler):
    def emit(self, record):
        records.append(record.getMessage())

torch._logging.set_logs(cudagraphs=True, recompiles=True)
for name in ("torch._inductor", "torch._dynamo", "torch._inductor.cudagraph_utils.__cudagraphs",
             "torch._inductor.cudagraph_trees.__cudagraphs", "torch._dynamo.guards.__recompiles",
             "torch._dynamo.convert_frame.__recompiles"):
    logging.getLogger(name).addHandler(Keep())

def first_line(exc):
    text = str(exc).strip()
    text = text.split(" Stack trace:")[0].split("\n")[0]
    return f"{type(exc).__name__}: {text}"

def skips():
    return int(torch._dynamo.utils.counters["inductor"]["cudagraph_skips"])

def logged(pattern):
    out = []
    for r in records:
        line = r.split(". Found from")[0].split("\n")[0].strip()
        if re.search(pattern, line) and line not in out:
            out.append(line)
    return out

result = {"torch": torch.__version__}

# 1. an output kept across the next call
if 1 in PARTS:
    @torch.compile(mode="reduce-overhead")
    def double(x):
        return x * 2 + 1

    x1, x2 = torch.full((4,), 1.0, device="cuda"), torch.full((4,), 10.0, device="cuda")
    for _ in range(3):
        double(x1)  # warm-up run, recording, first replay
    first = double(x1)   # x1 * 2 + 1 = 3
    second = double(x2)  # x2 * 2 + 1 = 21
    try:
        result["kept_output"] = f"no error: the kept output reads {first.tolist()[0]:g} (3 expected)"
    except RuntimeError as exc:
        result["kept_output"] = first_line(exc)
    first = double(x1).clone()
    second = double(x2)
    result["cloned_output"] = f"cloned output reads {first.tolist()[0]:g} after the next call (3 expected)"

    # the next call of ANOTHER reduce-overhead function: one tree manager (and one pool) per device serves both
    @torch.compile(mode="reduce-overhead")
    def plus_one(x):
        return x + 1

    for _ in range(3):
        double(x1)
        plus_one(x2)
    first = double(x1)    # 3
    other = plus_one(x2)  # 11
    try:
        result["other_function"] = (f"no error: the kept output reads {first.tolist()[0]:g} (3 expected) after "
                                    f"a call to another compiled function")
    except RuntimeError as exc:
        result["other_function"] = first_line(exc)

# 2. two calls in one step: mark_step_begin (the example of its documentation)
if 2 in PARTS:
    @torch.compile(mode="reduce-overhead")
    def rand_foo():
        return torch.rand([4], device="cuda")

    outcome = []
    for marked in (False, True):
        try:
            for _ in range(4):
                if marked:
                    torch.compiler.cudagraph_mark_step_begin()
                total = rand_foo() + rand_foo()
            outcome.append("ok")
        except RuntimeError as exc:
            outcome.append(first_line(exc))
    result["two_calls_unmarked"], result["two_calls_marked"] = outcome

# 3. one recording per input shape
if 3 in PARTS:
    records.clear()

    @torch.compile(mode="reduce-overhead")
    def scale(x):
        return torch.nn.functional.gelu(x) * 3

    sizes = [1, 2, 3, 4, 8, 3, 1]
    for n in sizes:
        for _ in range(3):
            scale(torch.ones(n, 64, device="cuda"))
    result["shapes_seen"] = sizes
    result["shape_recordings"] = logged(r"Recording cudagraph tree")
    result["shape_recompiles"] = logged(r"[Rr]ecompiling")[:3]

# 4. graphs skipped, and why
if 4 in PARTS:
    records.clear()
    before = skips()

    @torch.compile(mode="reduce-overhead")
    def bump(x):
        x.add_(1)
        return x * 2

    y = torch.zeros(4, device="cuda")
    for _ in range(3):
        bump(y)
    result["skip_mutation"] = {"skips": skips() - before, "logged": logged("skipping cudagraphs")}
    records.clear()
    before = skips()

    @torch.compile(mode="reduce-overhead")
    def mixed(x, c):
        return x * 2, c + 1

    for _ in range(3):
        mixed(torch.ones(4, device="cuda"), torch.ones(4))
    result["skip_cpu_tensor"] = {"skips": skips() - before, "logged": logged("skipping cudagraphs")}
    records.clear()
    before = skips()

    @torch.compile(mode="reduce-overhead")
    def branch(x):
        return torch.cond(x.sum() > 0, lambda t: t * 2, lambda t: t - 1, (x,)) + 1

    for _ in range(3):
        branch(torch.ones(4, device="cuda"))
    result["skip_cond"] = {"skips": skips() - before, "logged": logged("skipping cudagraphs")}
    import torch._inductor.config as inductor_config
    result["graph_partition"] = getattr(inductor_config, "graph_partition", None)

# 5. the tiny GPT's decode step writing its KV cache in place; compiler caches off, so that
# the second variant cannot reuse what the first one compiled
if 5 in PARTS:
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config
    from graphcourse.gpulib.graphs import GPTConfig, TinyGPT, as_device_position
    from graphcourse.gpulib.compiled import compiled_loop_step

    inductor_config.fx_graph_cache = False
    if hasattr(functorch_config, "enable_autograd_cache"):
        functorch_config.enable_autograd_cache = False
    for static in (True, False):
        torch._dynamo.reset()
        records.clear()
        before = skips()
        model = TinyGPT(GPTConfig(n_layers=1)).cuda()
        cache = model.new_cache(1)
        tokens = torch.zeros(1, dtype=torch.long, device="cuda")
        pos = as_device_position(0, "cuda")
        step = compiled_loop_step(model, cache, tokens, pos, static=static)
        for _ in range(4):
            step()
        key = "decode_static" if static else "decode_plain"
        result[key] = {"skips": skips() - before, "logged": logged("skipping cudagraphs")}

print("DEMO-RESULT " + json.dumps(result))
'''
"""One child script: every failure mode of lesson 07, printed as one JSON line of observations."""

_PATH = re.compile(r"(?:/[\w.+@~-]+){2,}/([\w.+@-]+)")


def parse_demo_output(stdout: str) -> dict[str, Any]:
    """The observations the demo child printed (its ``DEMO-RESULT`` line), with file paths shortened to names."""
    for line in stdout.splitlines():
        if line.startswith("DEMO-RESULT "):
            data = json.loads(line[len("DEMO-RESULT "):])
            return json.loads(_PATH.sub(r"\1", json.dumps(data)))
    raise DemoError("the demo child printed no DEMO-RESULT line: it failed before the end (see its error lines).")


def run_demos(timeout_s: float = 300.0, parts: Any = None) -> dict[str, Any]:
    """Run :data:`DEMOS` (all parts, or `parts` of 1..5) in a child Python on a CUDA GPU; its observations.

    Raises DemoError with the child's errors when it printed none.
    """
    from ..core.child import run_snippet

    code = DEMOS
    if parts is not None:
        code = DEMOS.replace("PARTS = {1, 2, 3, 4, 5}", f"PARTS = {set(int(p) for p in parts)!r}", 1)
    result = run_snippet(code, timeout_s)
    try:
        return parse_demo_output(result.stdout)
    except DemoError as exc:
        raise DemoError(f"{exc} Child errors: {result.errors[-3:]}") from None


# --------------------------------------------------------------------------- a CPU stand-in for the output rule


STALE_MESSAGE = ("Error: accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run. "
                 "To prevent overwriting, clone the tensor outside of torch.compile() or call "
                 "torch.compiler.cudagraph_mark_step_begin() before each model invocation.")
"""torch's words (torch/_inductor/cudagraph_trees.py), which the stand-in raises with."""


class StaleOutputError(RuntimeError):
    """An output of :class:`OutputsValidUntilNextCall` read after the next call overwrote it."""


class StandInOutput:
    """One output of the stand-in: its values, readable until the function is called again (unless cloned)."""

    def __init__(self, values: list, owner: "OutputsValidUntilNextCall | None", generation: int) -> None:
        self._values, self._owner, self._generation = list(values), owner, generation

    def _check(self) -> list:
        if self._owner is not None and self._owner.calls != self._generation:
            raise StaleOutputError(STALE_MESSAGE)
        return self._values

    def tolist(self) -> list:
        """The values, as a plain list (raises StaleOutputError once the next call has overwritten them)."""
        return list(self._check())

    def clone(self) -> "StandInOutput":
        """A copy that no later call can overwrite (like tensor.clone())."""
        return StandInOutput(self._check(), None, 0)

    def __repr__(self) -> str:
        return f"StandInOutput({self._values if self._owner is None else '...'})"


class OutputsValidUntilNextCall:
    """A CPU stand-in for ``torch.compile(mode="reduce-overhead")``'s output rule, for exercises without a GPU.

    Wraps a function of plain lists; each call returns a :class:`StandInOutput` whose values
    stay readable only until the next call (then reading raises torch's message), unless cloned.
    A call takes back the previous call's outputs **before** it reads its own input, as CUDAGraph
    Trees do: when a warm-up or recording call ends, the next call's ``_run`` ends that generation
    (``try_end_curr_warmup`` -> ``dealloc_current_path_weakrefs`` in ``torch/_inductor/cudagraph_trees.py``)
    before ``_allocate_and_copy_recording_inputs`` copies the inputs, so feeding an output back in
    raw fails at the second call on a GPU too. It is stricter than torch in one way: CUDAGraph Trees
    raise only for outputs of the warm-up and recording calls, while an output of a replay read after
    the next call silently holds that call's values; the stand-in always raises, to make the
    mistake visible.
    """

    def __init__(self, fn: Callable[[list], list]) -> None:
        self.fn = fn
        self.calls = 0

    def __call__(self, x: Any) -> StandInOutput:
        """Take back the previous outputs, then call fn on x (a list, or a clone of an output) and return an output valid until the next call."""
        self.calls += 1  # the previous call's outputs are overwritten from here on, the input included
        values = x.tolist() if isinstance(x, StandInOutput) else list(x)
        result = list(self.fn(values))
        return StandInOutput(result, self, self.calls)
