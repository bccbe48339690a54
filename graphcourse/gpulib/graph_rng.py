"""Random numbers in a graph: the generator's seed and offset in device memory, registered generators (lesson 10;
part of :mod:`graphcourse.gpulib.beyond`)."""

from __future__ import annotations

from typing import Any

import torch

from ..core.child import result_line, run_snippet
from .graphs import require_cuda

# --------------------------------------------------------------------------- random numbers in a graph


def _captured_dropout(x: Any, p: float) -> tuple[Any, Any]:
    """One dropout of x, warmed up and captured on a side stream: (the graph, its static output)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.nn.functional.dropout(x, p, training=True)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=side):
        out = torch.nn.functional.dropout(x, p, training=True)
    return g, out


def dropout_replays(p: float = 0.5, n: int = 1 << 20, replays: int = 4, seed: int = 7) -> dict[str, Any]:
    """Capture one dropout of a vector of ones; replay it: fraction dropped per replay, and whether replays differ."""
    require_cuda("dropout in a CUDA graph")
    x = torch.ones(n, device="cuda")
    g, out = _captured_dropout(x, p)
    torch.manual_seed(seed)
    masks = []
    for _ in range(replays):
        g.replay()
        masks.append(out.clone())
    eager = [torch.nn.functional.dropout(x, p, training=True) for _ in range(replays)]
    kept_values = torch.unique(torch.stack(masks)).tolist()
    pairs = [(i, j) for i in range(replays) for j in range(i + 1, replays)]
    return {
        "p": p, "n": n, "replays": replays,
        "dropped_fraction": [float((m == 0).float().mean()) for m in masks],
        "eager_dropped_fraction": [float((m == 0).float().mean()) for m in eager],
        "values": [round(v, 6) for v in kept_values],
        "replays_differ": all(not torch.equal(masks[i], masks[j]) for i, j in pairs),
        "agreement_between_replays": float((masks[0] == masks[1]).float().mean()) if replays > 1 else None,
    }


def replay_matches_eager_sequence(p: float = 0.5, n: int = 1 << 16, steps: int = 3, seed: int = 11) -> dict[str, Any]:
    """After ``torch.manual_seed(seed)``, does replay k draw what the k-th eager call after the same seed drew?"""
    require_cuda("comparing graph replays with eager calls")
    x = torch.ones(n, device="cuda")
    g, out = _captured_dropout(x, p)
    gen = torch.cuda.default_generators[torch.cuda.current_device()]
    torch.manual_seed(seed)
    offsets = [gen.get_offset()]
    eager = []
    for _ in range(steps):
        eager.append(torch.nn.functional.dropout(x, p, training=True))
        offsets.append(gen.get_offset())
    torch.manual_seed(seed)
    replay_offsets = [gen.get_offset()]
    same = []
    for k in range(steps):
        g.replay()
        replay_offsets.append(gen.get_offset())
        same.append(bool(torch.equal(out, eager[k])))
    return {"steps": steps, "replay_equals_eager": same, "eager_offsets": offsets, "replay_offsets": replay_offsets}


_GENERATOR_SNIPPET = '''
import json, torch
gen = torch.Generator(device="cuda").manual_seed(3)
x = torch.empty(4096, device="cuda")
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    x.uniform_(generator=gen)
torch.cuda.synchronize()
g = torch.cuda.CUDAGraph()
REGISTER = {register}
if REGISTER:
    g.register_generator_state(gen)
result = {{"registered": REGISTER, "has_register_generator_state": hasattr(g, "register_generator_state")}}
with torch.cuda.graph(g, stream=side):
    x.uniform_(generator=gen)
draws = []
for _ in range(3):
    g.replay()
    draws.append(x.clone())
torch.cuda.synchronize()
result["replays_differ"] = not torch.equal(draws[0], draws[1]) and not torch.equal(draws[1], draws[2])
result["offset_after"] = gen.get_offset()
print("RESULT " + json.dumps(result))
'''


def generator_snippet(register: bool) -> str:
    """A child process that draws from a non-default CUDA generator inside a graph, registered or not."""
    return _GENERATOR_SNIPPET.format(register=bool(register))


def generator_facts(timeout_s: float = 60.0) -> dict[str, Any]:
    """What happens with a generator the graph knows (registered) and one it does not, each in a child process."""
    out: dict[str, Any] = {}
    for name, register in (("registered", True), ("unregistered", False)):
        done = run_snippet(generator_snippet(register), timeout_s=timeout_s)
        out[name] = {"returncode": done.returncode, "errors": done.errors[:6], "result": result_line(done.stdout)}
    return out
