"""The stand-in for torch.cuda that ex15 grades against, checked against the real torch.cuda on a GPU.

Each fact runs in a child Python (a fresh process: torch.cuda.graph's own stream not made yet; a failed capture
cannot spoil this one). The two-GPU trap itself (a side stream on the wrong GPU refused during capture, both fixes,
the default capture stream kept on cuda:0) is kept by tests/test_two_gpu_cuda.py (lesson 10).
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

from graphcourse.lessons.child import run_snippet  # noqa: E402
from graphcourse.lessons.standin_cuda import CAPTURE_ERROR, DEFAULT_STREAM_ERROR, StandInCuda  # noqa: E402


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
x1, x2 = (torch.randn(8, 16, device=f"cuda:{last}") for _ in range(2))
run = capture_on(last, lambda t: (t * 2 + 1).relu(), x1.clone())
y1, y2 = run(x1), run(x2)
torch.cuda.synchronize(last)
r = {"y2": bool(torch.allclose(y2, (x2 * 2 + 1).relu())), "y1": bool(torch.allclose(y1, (x1 * 2 + 1).relu())),
     "device_kept": torch.cuda.current_device() == before, "gpus": torch.cuda.device_count()}
print("RESULT " + json.dumps(r))
'''


def test_the_model_answer_of_ex15_captures_for_real_on_the_last_gpu():
    found = _result(_answer_and_wrong(None) + "\n" + _RUN_EX15)
    assert found["y2"] and found["y1"] and found["device_kept"], found


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")
@pytest.mark.parametrize("wrong", ["graph_own_stream", "device_context_only", "stream_on_current_device"])
def test_a_wrong_answer_of_ex15_is_refused_on_two_gpus_as_the_stand_in_refuses_it(wrong):
    done = run_snippet(_answer_and_wrong(wrong) + "\n" + _RUN_EX15, timeout_s=180)
    assert done.capture_refused, done.summary()
