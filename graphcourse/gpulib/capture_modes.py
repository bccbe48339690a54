"""capture_error_mode: what each cudaStreamCaptureMode refuses, and in which thread (lesson 10; part of
:mod:`graphcourse.gpulib.beyond`)."""

from __future__ import annotations

from typing import Any


from ..core.child import result_line, run_snippet

# --------------------------------------------------------------------------- capture_error_mode

CAPTURE_MODES = ("global", "thread_local", "relaxed")

_MODE_SNIPPET = '''
import json, threading, torch
MODE, WHERE = {mode!r}, {where!r}
torch.ones(1, device="cuda")                       # context made before the capture
result = {{"mode": MODE, "where": WHERE}}
go, done = threading.Event(), threading.Event()

def unsafe_call():
    try:
        big = torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda")   # a fresh cudaMalloc
        result["unsafe_call"] = "ok"
        del big
    except Exception as exc:
        result["unsafe_call"] = (type(exc).__name__ + ": " + str(exc)).splitlines()[0]

def other_thread():
    go.wait()
    unsafe_call()
    done.set()

if WHERE == "other thread":
    t = threading.Thread(target=other_thread)
    t.start()
x = torch.ones(1024, device="cuda")
s = torch.cuda.Stream()
g = torch.cuda.CUDAGraph()
try:
    with torch.cuda.graph(g, stream=s, capture_error_mode=MODE):
        y = x * 2
        if WHERE == "other thread":
            go.set()
            done.wait(20)
        else:
            with torch.cuda.stream(torch.cuda.Stream()):   # not the capturing stream: torch does not
                unsafe_call()                              # switch the mode to relaxed for this one
        z = y + 1
    g.replay()
    torch.cuda.synchronize()
    result["capture"] = "ok, replay gives " + str(float(z[0]))
except Exception as exc:
    result["capture"] = (type(exc).__name__ + ": " + str(exc)).splitlines()[0]
print("RESULT " + json.dumps(result))
'''


def capture_mode_snippet(mode: str, where: str) -> str:
    """A child process: capture with `mode` while a 256 MiB cudaMalloc happens in `where` ('other thread' or 'same thread')."""
    if mode not in CAPTURE_MODES:
        raise ValueError(f"capture_error_mode is one of {CAPTURE_MODES}, got {mode!r}.")
    if where not in ("other thread", "same thread"):
        raise ValueError(f"where is 'other thread' or 'same thread', got {where!r}.")
    return _MODE_SNIPPET.format(mode=mode, where=where)


def capture_mode_matrix(timeout_s: float = 60.0) -> dict[str, dict[str, Any]]:
    """For each capture_error_mode and each place of the unsafe call: what the call and the capture did."""
    table: dict[str, dict[str, Any]] = {}
    for mode in CAPTURE_MODES:
        for where in ("other thread", "same thread"):
            done = run_snippet(capture_mode_snippet(mode, where), timeout_s=timeout_s)
            found = result_line(done.stdout) or {}
            table.setdefault(mode, {})[where] = {
                "unsafe_call": found.get("unsafe_call", "no result"),
                "capture": found.get("capture", (done.errors or ["no result"])[-1]),
                "returncode": done.returncode,
            }
    return table
