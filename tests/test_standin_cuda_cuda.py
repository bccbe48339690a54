"""The stand-in for torch.cuda that ex15 grades against, checked against the real torch.cuda on a GPU.

Each fact runs in a child Python (a fresh process: torch.cuda.graph's own stream not made yet; a failed capture
cannot spoil this one). A wrong answer of ex15 ends on two real GPUs as it ends on the stand-in: refused when the
work on the data's GPU needs new memory during the capture, an empty graph (torch's warning, stale replays) when
it does not. The two-GPU trap itself (a side stream on the wrong GPU refused during capture, both fixes,
the default capture stream kept on cuda:0) is kept by tests/test_two_gpu_cuda.py (lesson 10).
"""

from __future__ import annotations

import json
import warnings

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

from graphcourse.core.child import run_snippet  # noqa: E402
from graphcourse.lessons.standin_cuda import (CAPTURE_ERROR, DEFAULT_STREAM_ERROR, EMPTY_GRAPH_WARNING,  # noqa: E402
                                              AcceleratorError, StandInCuda, calling_with)


def _result(code: str) -> dict:
    done = run_snippet(code, timeout_s=180)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, done.summary()
    return json.loads(lines[-1][len("RESULT "):])


def test_streams_and_the_graphs_own_stream_as_the_stand_in_has_them():
    found = _result('''
import json, torch
r = {"stream_device": torch.cuda.Stream().device.index, "current": torch.cuda.current_device()}
r["default_before"] = torch.cuda.graph.default_capture_stream is None
x = torch.ones(4, device="cuda")
g1, g2 = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
with torch.cuda.graph(g1):
    y1 = x * 2
first = torch.cuda.graph.default_capture_stream
with torch.cuda.graph(g2):
    y2 = x * 3
r["made_once"] = torch.cuda.graph.default_capture_stream is first
r["device_of_own_stream"] = first.device.index
s = torch.cuda.Stream()
with torch.cuda.stream(s):
    r["stream_ctx_current"] = torch.cuda.current_stream() == s
r["restored"] = torch.cuda.current_stream() == torch.cuda.default_stream()
print("RESULT " + json.dumps(r))
''')
    m = StandInCuda(1)
    cuda = m.torch.cuda
    assert found["stream_device"] == found["current"] == cuda.Stream().device_index == 0
    assert found["default_before"] and cuda.graph.default_capture_stream is None
    assert found["made_once"] and found["device_of_own_stream"] == 0
    assert found["stream_ctx_current"] and found["restored"]


def test_capture_on_the_default_stream_is_refused_with_the_stand_ins_message():
    done = run_snippet('''
import torch
g = torch.cuda.CUDAGraph()
g.capture_begin()
''', timeout_s=180)
    assert not done.ok and DEFAULT_STREAM_ERROR in done.stderr.replace("\n", " "), done.summary()


def test_a_refused_call_during_capture_reads_as_the_stand_ins_error():
    done = run_snippet('''
import torch
x = torch.ones(4, device="cuda")
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    y = x * 2
    y.sum().item()   # a sync: refused during capture
''', timeout_s=180)
    assert done.capture_refused, done.summary()
    first, search = CAPTURE_ERROR.splitlines()
    assert first in done.stderr, done.summary()
    assert search in done.stderr, done.summary()  # "Search for `cudaErrorStreamCaptureUnsupported' ..."


def _answer_and_wrong(name: str | None) -> str:
    """The model answer of ex15 (or a wrong answer of it) as source, for a child process."""
    import nbformat

    from graphcourse.authoring import build_exercises as be

    if name is not None:
        return (be.ROOT / "tests" / "wrong_answers" / "ex15_side_stream_device" / f"{name}.py").read_text()
    path = be.SOLUTIONS_DIR / "09_production_exercises.ipynb"
    nb = nbformat.read(path, as_version=4)
    ex = next(e for e in be.layout_of(nb, path.name).exercises if e.id == "ex15_side_stream_device")
    return nb.cells[ex.answer].source


_RUN_EX15 = '''
import json, torch
last = torch.cuda.device_count() - 1
g0 = torch.cuda.CUDAGraph()        # as an engine does first: a graph on cuda:0 with the graph's own stream
a0 = torch.zeros(4, device="cuda:0")
with torch.cuda.graph(g0):
    b0 = a0 * 2
before = torch.cuda.current_device()
x1, x2 = (torch.randn(ROWS, COLS, device=f"cuda:{last}") for _ in range(2))
run = capture_on(last, lambda t: (t * 2 + 1).relu(), x1.clone())
y1, y2 = run(x1), run(x2)
torch.cuda.synchronize(last)
r = {"y2": bool(torch.allclose(y2, (x2 * 2 + 1).relu())), "y1": bool(torch.allclose(y1, (x1 * 2 + 1).relu())),
     "device_kept": torch.cuda.current_device() == before, "gpus": torch.cuda.device_count()}
print("RESULT " + json.dumps(r))
'''
SHAPES = {"small": (8, 16), "large": (1024, 3072)}  # 512 bytes (cached segments have room); 12 MiB (they do not)


def _run_ex15(source: str, shape: str) -> str:
    rows, cols = SHAPES[shape]
    return source + "\n" + _RUN_EX15.replace("ROWS", str(rows)).replace("COLS", str(cols))


def _real_outcome(done) -> str:
    """How torch ended the run: "refused", "empty graph" (warned, replays wrong), "captured" or "other"."""
    if done.capture_refused:
        return "refused"
    if not done.ok:
        return "other"
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    found = json.loads(lines[-1][len("RESULT "):]) if lines else {}
    warned = " ".join(EMPTY_GRAPH_WARNING.split()) in " ".join(done.stderr.split())
    if found.get("y2") is False and warned:
        return "empty graph"
    if found.get("y2") and found.get("y1") and not warned:
        return "captured"
    return "other"


def _standin_outcome(source: str, shape: str, n_devices: int) -> str:
    """The same run on the stand-in (same devices, same first capture on cuda:0, same step and sizes)."""
    m = StandInCuda(n_devices)
    cuda = m.torch.cuda
    with cuda.graph(cuda.CUDAGraph()):
        m.op("first model", lambda v: [2 * a for a in v], m.tensor([0.0] * 4, device=0))
    namespace: dict = {}
    exec(source, namespace)  # the answer's source defines capture_on

    def step(t):
        h = m.op("scale", lambda v: [2 * a for a in v], t)
        h = m.op("shift", lambda v: [a + 1 for a in v], h)
        return m.op("relu", lambda v: [max(a, 0.0) for a in v], h)

    last = n_devices - 1
    rows, cols = SHAPES[shape]
    x1 = m.tensor([float(k % 7 - 3) for k in range(rows * cols)], device=last)
    x2 = m.tensor([float(k % 5 - 2) for k in range(rows * cols)], device=last)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            run = calling_with(m.torch, namespace["capture_on"], last, step, x1.clone())
        except AcceleratorError as err:
            return "refused" if str(err) == CAPTURE_ERROR else "other"
    warned = any(str(w.message) == EMPTY_GRAPH_WARNING for w in seen)
    y1 = calling_with(m.torch, run, x1).values
    y2 = calling_with(m.torch, run, x2).values
    right = lambda y, x: y == [max(2 * a + 1, 0.0) for a in x.values]  # noqa: E731
    if not right(y2, x2) and warned:
        return "empty graph"
    if right(y1, x1) and right(y2, x2) and not warned:
        return "captured"
    return "other"


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_model_answer_of_ex15_captures_for_real_on_the_last_gpu(shape):
    done = run_snippet(_run_ex15(_answer_and_wrong(None), shape), timeout_s=180)
    assert _real_outcome(done) == "captured", done.summary()
    assert '"device_kept": true' in done.stdout, done.summary()
    assert _standin_outcome(_answer_and_wrong(None), shape, torch.cuda.device_count()) == "captured"


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")
@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("wrong", ["graph_own_stream", "device_context_only", "stream_on_current_device",
                                   "relaxed_mode"])
def test_a_wrong_answer_of_ex15_fails_on_two_gpus_as_it_fails_on_the_stand_in(wrong, shape):
    """torch refuses the capture when the work on the data's GPU needs new memory (a cudaMalloc), and otherwise
    records an empty graph (a warning, replays that leave stale outputs); the stand-in must make the same call."""
    done = run_snippet(_run_ex15(_answer_and_wrong(wrong), shape), timeout_s=180)
    real = _real_outcome(done)
    assert real in ("refused", "empty graph"), done.summary()
    assert _standin_outcome(_answer_and_wrong(wrong), shape, torch.cuda.device_count()) == real, done.summary()
