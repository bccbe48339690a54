"""What lesson 11's cells call: the toy twins of graphs that go wrong, and the GPU's recorded (or live) reports.

The real-GPU scenarios live in :mod:`graphcourse.gpulib.debugging` (each in its own process);
``python -m graphcourse.gpulib.bench_debugging`` records them into ``data/debugging.json``, which this
module reads: the lesson prints the recorded lines on every machine, and runs the same scenario live
in a cell of its own where a CUDA GPU is here.
"""

from __future__ import annotations

import textwrap
from typing import Any, Callable

import toygraph as tg
from toygraph import ToyDevice, ToyGraph, graph, launch

from ..core.paths import DATA_DIR
from ..core.recorded import provenance_label, recorded_or_why
from ..gpulib.debugging import Bisection, bisect_first_failure, first_divergence

__all__ = ["COMMAND", "recorded", "toy_op", "toy_forty_ops_fails", "toy_bisect", "toy_layers",
           "capture_failure_lines", "freed_lines", "sanitizer_lines", "layer_lines", "bisection_lines",
           "wrapped", "short"]

COMMAND = "python -m graphcourse.gpulib.bench_debugging"


def recorded(path: Any = None) -> tuple[dict[str, Any] | None, str]:
    """``(data, label)`` of the recorded run, or ``(None, why not)``."""
    return recorded_or_why(path or DATA_DIR / "debugging.json", COMMAND,
                           lambda data: provenance_label(data, f"CUDA {data['provenance'].get('cuda')}"))


# --------------------------------------------------------------------------- toy: bisect forty ops


def toy_op(i: int, guilty: int = 27) -> Callable[[Any], Any]:
    """The toy's op `i` of the forty: a kernel launch, except op `guilty`, which reads a value on the host."""
    def run(t: Any) -> Any:
        if i == guilty:
            if t.item() > 1e9:  # a host read of a device value: a sync, refused during capture
                return t
            return launch(lambda v: [a + 0.5 for a in v], t, name=f"op{i}")
        if i % 2:
            return launch(lambda v: [round(a * 1.01 + 0.1, 6) for a in v], t, name=f"op{i}")
        return launch(lambda v: [max(a, 0.0) - 0.01 for a in v], t, name=f"op{i}")
    return run


def toy_forty_ops_fails(k: int, guilty: int = 27) -> str | None:
    """Capture the toy's first `k` ops in a fresh toy graph; the error, or None when it captured."""
    dev = ToyDevice()
    x = dev.tensor([1.0])
    g = ToyGraph(dev, name=f"first {k} ops")
    try:
        with graph(g):
            t = x
            for i in range(k):
                t = toy_op(i, guilty)(t)
    except tg.CaptureError as exc:
        return f"CaptureError: {str(exc).splitlines()[0]}"
    return None


def toy_bisect(n_ops: int = 40, guilty: int = 27) -> Bisection:
    """Bisect the toy's forty-op capture: which op makes it fail?"""
    return bisect_first_failure(n_ops, lambda k: toy_forty_ops_fails(k, guilty))


# --------------------------------------------------------------------------- toy: compare layer by layer


LAYERS = ("fc1", "scale", "act", "fc2")


def _toy_step(x: Any, settings: dict[str, float]) -> dict[str, Any]:
    """Four toy layers; 'scale' multiplies by settings['factor'], a Python value read when it is launched."""
    factor = settings["factor"]
    out = {"fc1": launch(lambda v: [0.5 * a + 0.25 for a in v], x, name="fc1")}
    out["scale"] = launch(lambda v: [a * factor for a in v], out["fc1"], name="scale")
    out["act"] = launch(lambda v: [max(a, 0.0) for a in v], out["scale"], name="act")
    out["fc2"] = launch(lambda v: [2.0 * a - 1.0 for a in v], out["act"], name="fc2")
    return out


def toy_layers(values: list[float] | None = None, factor_after: float = 0.5) -> dict[str, Any]:
    """Capture the toy step at factor 1.0, change the factor, then compare each layer: eager against replay.

    The graph's layer outputs live in its pool, so after a replay each layer's buffer holds what that
    layer computed: the toy needs no hooks to tap them.
    """
    dev = ToyDevice()
    settings = {"factor": 1.0}
    x = dev.tensor(list(values or [1.0, -2.0, 3.0]), name="x")
    g = ToyGraph(dev, name="step")
    with graph(g):
        taps = _toy_step(x, settings)
    settings["factor"] = factor_after  # e.g. a temperature changed between requests
    g.replay()
    graphed = {name: taps[name].tolist() for name in LAYERS}
    eager = {name: buf.tolist() for name, buf in _toy_step(x, settings).items()}
    first, gaps = first_divergence(eager, graphed)
    return {"eager": eager, "graphed": graphed, "first_divergent": first, "max_abs_gap": gaps}


# --------------------------------------------------------------------------- reading the GPU's reports


def capture_failure_lines(failures: dict[str, Any] | None) -> str:
    """One block per capture failure: the code in the capture, then CUDA's error chain."""
    if not failures:
        return "not recorded yet"
    out = []
    for name, found in failures.items():
        if "error" in found and "errors" not in found:
            out.append(f"{name}: the recording failed: {found['error']}")
            continue
        out.append(f"{name}:" + ("  captured (no error)" if found["captured"] else ""))
        for k, err in enumerate(found["errors"]):
            out.append(wrapped(err, ("  error: " if k == 0 else "  then:  ")))
    return "\n".join(out)


def wrapped(text: str, first: str, width: int = 100) -> str:
    """`text` after `first`, wrapped at word boundaries, later lines indented under the text."""
    return textwrap.fill(text, width=width, initial_indent=first, subsequent_indent=" " * len(first),
                         break_long_words=False, break_on_hyphens=False)


def short(text: str, width: int = 140) -> str:
    """The first `width` characters of `text` or fewer, cut at a word boundary and marked ' ...' when cut."""
    return textwrap.shorten(" ".join(text.split()), width=width, placeholder=" ...")


def bisection_lines(found: dict[str, Any] | None) -> str:
    """The recorded bisection: each capture tried, the verdict, and the first failing prefix's error."""
    if not found or "tries" not in found:
        return f"not recorded yet: {found}"
    b = Bisection(found["n_ops"], found["first_bad"], [tuple(t) for t in found["tries"]])
    return "\n".join(b.lines() + [f"{len(b.tries)} captures in {found['seconds']:.0f} s",
                                   wrapped(found["error"], "the first failing prefix said: ")])


def freed_lines(found: dict[str, Any] | None) -> str:
    """What the freed-input program printed, where it stopped, and its errors."""
    if not found:
        return "not recorded yet"
    out = [f"  printed: {ln}" for ln in found["printed"]]
    if found["returncode"] == 0:
        out.append("  exit code 0: no error at all")
    else:
        out.append(f"  exit code {found['returncode']}; replay() returned before the error: "
                   f"{'yes' if found['replay_returned'] else 'no'}")
        out += [wrapped(e, "  error: " if k == 0 else "  then:  ") for k, e in enumerate(found["errors"])]
    return "\n".join(out)


def sanitizer_lines(found: dict[str, Any] | None, first: int = 12) -> str:
    """compute-sanitizer's report: its `first` memcheck lines, its summary, and the program's last line."""
    if not found:
        return "not recorded yet"
    if "error" in found and "lines" not in found:
        return f"compute-sanitizer could not run: {found['error']}"
    head = [f"$ {found['command']}   ({found.get('version', '')})"]
    shown = [ln for ln in found["lines"] if "ERROR SUMMARY" not in ln][:first] or ["  (no memcheck error)"]
    tail = [f"... {found['summary'] or '(no summary printed)'}; exit code {found['returncode']}"]
    if found.get("printed"):
        tail.append(f"the program's last line: {found['printed'][-1]}")
    return "\n".join(head + shown + tail)


def layer_lines(found: dict[str, Any] | None) -> str:
    """Each layer's largest |graph - eager|, and the first layer that differs."""
    if not found:
        return "not recorded yet"
    if "error" in found and "max_abs_gap" not in found:
        return f"the recording failed: {found['error']}"
    rows = [f"  {name:<6} largest |graph - eager| = {gap:.4g}" for name, gap in found["max_abs_gap"].items()]
    first = found["first_divergent"] or "none: graph and eager agree"
    return "\n".join(rows + [f"first layer that differs: {first}"])


# --------------------------------------------------------------------------- the instructor kit's answers


def try_answer(item: str) -> str | None:
    """The computed answer to one of lesson 11's "Things to try" items, or None for an item it does not know."""
    if "toy_bisect(guilty=0)" in item:
        first, last, none = toy_bisect(40, 0), toy_bisect(40, 39), toy_bisect(40, 99)
        return (f"Guilty op 0: {len(first.tries)} captures; op 39: {len(last.tries)} (at most 1 + ceil(log2 40) "
                f"= 7: one of all 40 ops, then a halving per capture until one op is left). No guilty op: "
                f"{len(none.tries)} capture, and it says \"{none.lines()[-1]}\": the whole region captures, so "
                f"the failure is not in the capture (look at the replay).")
    if "factor_after=1.0" in item:
        found = toy_layers(factor_after=1.0)
        gaps = ", ".join(f"{k} {v:g}" for k, v in found["max_abs_gap"].items())
        return (f"No layer is named ({layer_lines(found).splitlines()[-1]}; the largest gaps: {gaps}): the "
                f"factor after capture is the one the graph baked, so eager and replay compute the same numbers. "
                f"The comparison finds where they part; when nothing changed since capture, they do not.")
    if "z.address" in item:
        dev = ToyDevice()
        x = dev.tensor([1.0, 1.0, 1.0], name="x")
        address = x.address
        dev.free(x)
        z = dev.tensor([5.0, 5.0, 5.0, 5.0], name="z")
        taken = z.address == address
        return (f"z.address == x's old address: {taken}. A toy block holds many more values than three or "
                f"four (lesson 01: a block is 512 bytes, as PyTorch rounds small allocations), so four values "
                f"still fit the freed block and the replay reads z's 5.0s: the wrong answer is the same.")
    if "gpu.freed_input(True, True)" in item:
        data, _ = recorded()
        blocking = (data or {}).get("freed_returned_blocking", {})
        sync = (data or {}).get("capture_failures", {}).get("a sync: .item() in the step", {})
        return (f"With CUDA_LAUNCH_BLOCKING=1 the illegal memory access surfaces at g.replay() itself (the "
                f"recorded run: replay() returned before the error: "
                f"{'yes' if blocking.get('replay_returned') else 'no'}). The sync's first error is "
                f"\"{(sync.get('errors') or ['?'])[0]}\"; the second, 'operation failed due to a previous error "
                f"during capture', is its aftermath.")
    return None
