"""Lesson 12's GPU side: the CUDA graph API below PyTorch, through cuda.core (NVIDIA's Python API for CUDA).

``python -m graphcourse.gpulib.below_torch [out.json]`` records, on a GPU, into ``data/below_torch.json``:

* **one small graph built three ways**: stream capture through torch (``torch.cuda.graph``), stream
  capture through cuda.core (``GraphBuilder``, kernels of our own compiled with NVRTC), and explicit
  nodes and edges (``GraphDefinition``); each checked against torch's eager result and read back as
  its DOT file (``cudaGraphDebugDotPrint``);
* **changing a graph without capturing it again**: a scalar of the first kernel changes before every
  launch; the time per change of updating the instantiated graph in place (``Graph.update``, i.e.
  ``cuGraphExecUpdate``), of capturing and instantiating again, of torch's capture again, and of
  PyTorch's own answer, a device tensor the kernel reads (``fill_``, no graph change at all);
* **upload**: the first launch of a new executable graph with and without ``upload_stream``
  (``GraphCompleteOptions``), which moves the upload out of the first launch.

Times are wall-clock µs on the host (``time.perf_counter``), each path run in turn in every repeat,
median, min and max over repeats; the GPU work per launch is three tiny kernels, so the figures are
the API's costs, not the kernels'.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from typing import Any

from .bench import spread  # the course's one summary of repeats: median, min, max (and n)
from .bench_cli import write_json  # while_node and the tests import it from here too

__all__ = ["KERNELS", "three_ways", "update_vs_recapture", "first_launch", "provenance", "write_json", "record"]

KERNELS = r"""
extern "C" __global__ void scale(const float* x, float* y, float a, unsigned long long n) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}
extern "C" __global__ void shift(const float* x, float* y, float b, unsigned long long n) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + b;
}
extern "C" __global__ void relu(const float* x, float* y, unsigned long long n) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""


class _Kit:
    """The device, a stream, the three compiled kernels, the buffers (torch tensors) and a launch config."""

    def __init__(self, n: int) -> None:
        import numpy as np
        import torch
        from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch

        self.np, self.torch, self.launch_fn = np, torch, launch
        torch.cuda.init()
        self.device = Device(torch.cuda.current_device())
        self.device.set_current()
        self.stream = self.device.create_stream()
        prog = Program(KERNELS, code_type="c++", options=ProgramOptions(std="c++17", arch=f"sm_{self.device.arch}"))
        mod = prog.compile("cubin")
        self.scale, self.shift, self.relu = (mod.get_kernel(k) for k in ("scale", "shift", "relu"))
        self.n = n
        gen = torch.Generator(device="cuda").manual_seed(0)
        self.x = torch.randn(n, device="cuda", generator=gen)
        self.y, self.z, self.out = (torch.empty(n, device="cuda") for _ in range(3))
        self.config = LaunchConfig(grid=(n + 255) // 256, block=256)

    def p(self, t: Any) -> Any:
        return self.np.uint64(t.data_ptr())

    def record_into(self, target: Any, a: float, b: float) -> None:
        """Launch the three kernels onto `target` (a GraphBuilder or a stream)."""
        np, n = self.np, self.np.uint64(self.n)
        self.launch_fn(target, self.config, self.scale, self.p(self.x), self.p(self.y), np.float32(a), n)
        self.launch_fn(target, self.config, self.shift, self.p(self.y), self.p(self.z), np.float32(b), n)
        self.launch_fn(target, self.config, self.relu, self.p(self.z), self.p(self.out), n)

    def builder(self, a: float, b: float) -> Any:
        gb = self.device.create_graph_builder().begin_building()
        self.record_into(gb, a, b)
        return gb.end_building()

    def expected(self, a: float, b: float) -> Any:
        return self.torch.relu(self.x * a + b)


def _dot_shape(write: Any) -> dict[str, Any]:
    """Write a DOT file with `write(path)` and read its shape (nodes, edges, kernels)."""
    from .beyond import parse_dot

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "g.dot")
        write(path)
        text = open(path).read()
    shape = parse_dot(text)
    return {"nodes": shape.nodes, "edges": shape.edges, "kernels": shape.kernels,
            "longest_path": shape.longest_path, "kinds": shape.kinds, "dot": text}


def three_ways(n: int = 1 << 16, a: float = 2.0, b: float = 1.0) -> dict[str, Any]:
    """The same three-kernel graph built by torch's capture, cuda.core's capture and explicit nodes."""
    from cuda.core.graph import GraphDefinition

    kit = _Kit(n)
    torch = kit.torch
    out: dict[str, Any] = {"n": n, "a": a, "b": b}

    def right(result: Any, launch: Any, sync: Any) -> bool:
        """Zero the graph's output, launch it once, wait: did it compute relu(x * a + b)?"""
        result.zero_()
        launch()
        sync()
        return bool(torch.allclose(result, kit.expected(a, b)))

    # 1. torch: stream capture of torch's own kernels
    static = torch.empty(n, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        static.copy_(torch.relu(kit.x * a + b))
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph(keep_graph=True)
    g.enable_debug_mode()
    with torch.cuda.graph(g, stream=s):
        static.copy_(torch.relu(kit.x * a + b))
    def dump(path: str) -> None:
        import warnings

        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="DEBUG: calling")  # torch's TORCH_WARN progress notes
            try:
                g.debug_dump(path)
            except RuntimeError:  # newer torch routes debug_dump through cuda-bindings; 2.11 has the C++ one
                torch._C._CUDAGraph.debug_dump(g, path)

    shape = _dot_shape(dump)
    g.instantiate()
    out["torch_capture"] = dict(shape, right=right(static, g.replay, torch.cuda.synchronize))

    # 2. cuda.core: stream capture of our own kernels
    gb = kit.builder(a, b)
    shape = _dot_shape(gb.debug_dot_print)
    exe = gb.complete()
    out["cuda_core_capture"] = dict(shape, right=right(kit.out, lambda: exe.launch(kit.stream), kit.stream.sync))

    # 3. explicit nodes and edges: each launch depends on the node it is called on
    np_, n64 = kit.np, kit.np.uint64(n)
    gdef = GraphDefinition()
    n1 = gdef.launch(kit.config, kit.scale, kit.p(kit.x), kit.p(kit.y), np_.float32(a), n64)
    n2 = n1.launch(kit.config, kit.shift, kit.p(kit.y), kit.p(kit.z), np_.float32(b), n64)
    n2.launch(kit.config, kit.relu, kit.p(kit.z), kit.p(kit.out), n64)
    shape = _dot_shape(gdef.debug_dot_print)
    exe2 = gdef.instantiate()
    out["explicit_nodes"] = dict(shape, right=right(kit.out, lambda: exe2.launch(kit.stream), kit.stream.sync))
    return out


def update_vs_recapture(changes: int = 300, repeats: int = 15, n: int = 1 << 16) -> dict[str, Any]:
    """µs per change of the first kernel's scalar, then one launch: four ways, each in turn in every repeat."""
    kit = _Kit(n)
    torch = kit.torch
    b = 1.0

    exe = kit.builder(1.0, b).complete()
    a_dev = torch.ones((), device="cuda")
    static = torch.empty(n, device="cuda")
    s = torch.cuda.Stream()

    def torch_step(a_value: Any) -> None:
        static.copy_(torch.relu(kit.x * a_value + b))

    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        torch_step(a_dev)
    torch.cuda.current_stream().wait_stream(s)
    g_dev = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g_dev, stream=s):
        torch_step(a_dev)  # PyTorch's way: the scalar lives in a device tensor the kernel reads
    torch.cuda.synchronize()

    def update(a: float) -> None:
        exe.update(kit.builder(a, b))
        exe.launch(kit.stream)

    def reinstantiate(a: float) -> None:
        kit.builder(a, b).complete().launch(kit.stream)

    graphs: list[Any] = []

    def torch_recapture(a: float) -> None:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s):
            torch_step(a)
        g.replay()
        graphs.append(g)  # kept until the repeat ends: a replayed graph's pool must outlive its launch

    def device_scalar(a: float) -> None:
        a_dev.fill_(a)
        g_dev.replay()

    paths = {"update": update, "reinstantiate": reinstantiate, "torch_recapture": torch_recapture,
             "device_scalar": device_scalar}
    times: dict[str, list[float]] = {k: [] for k in paths}
    for r in range(repeats + 1):  # repeat 0 warms every path up and is not kept
        for name, fn in paths.items():
            torch.cuda.synchronize()
            kit.stream.sync()
            t0 = time.perf_counter()
            for i in range(changes):
                fn(1.0 + (i % 7) * 0.25)
            kit.stream.sync()
            torch.cuda.synchronize()
            if r:
                times[name].append((time.perf_counter() - t0) * 1e6 / changes)
            graphs.clear()
    a_last = 1.0 + ((changes - 1) % 7) * 0.25
    right = {"update": bool(torch.allclose(kit.out, kit.expected(a_last, b))),
             "device_scalar": bool(torch.allclose(static, kit.expected(a_last, b)))}
    return {"changes_per_repeat": changes, "repeats": repeats, "n": n,
            "us_per_change": {k: spread(v) for k, v in times.items()}, "right": right}


def first_launch(repeats: int = 15, n: int = 1 << 16) -> dict[str, Any]:
    """µs of a new executable graph's first launch (to completion), without and with upload at instantiation."""
    from cuda.core.graph import GraphCompleteOptions

    kit = _Kit(n)
    plain, uploaded = [], []
    for r in range(repeats + 1):
        for target, opts in ((plain, None), (uploaded, GraphCompleteOptions(upload_stream=kit.stream))):
            exe = kit.builder(2.0, 1.0).complete(opts)
            kit.stream.sync()
            t0 = time.perf_counter()
            exe.launch(kit.stream)
            kit.stream.sync()
            if r:
                target.append((time.perf_counter() - t0) * 1e6)
    return {"repeats": repeats, "plain_us": spread(plain), "uploaded_us": spread(uploaded)}


def provenance(command: str) -> dict[str, Any]:
    """Where the cuda.core recordings were made: GPU, driver, CUDA, torch, cuda-core and cuda-bindings, date."""
    from importlib.metadata import version

    from .bench_cli import provenance as measured_on

    return measured_on(command.removeprefix("python -m "), cuda_core=version("cuda-core"),
                       cuda_bindings=version("cuda-bindings"))


def record(path: Any = None) -> dict[str, Any]:
    """Every part, each guarded so that one failure cannot lose the rest; written atomically with provenance."""
    from ..core.paths import DATA_DIR

    data: dict[str, Any] = {"provenance": dict(
        provenance("python -m graphcourse.gpulib.below_torch"),
        timing="wall-clock µs on the host (time.perf_counter), the paths run in turn in every repeat; "
               "median, min and max over repeats after one untimed repeat")}
    for key, fn in (("three_ways", three_ways), ("update", update_vs_recapture), ("first_launch", first_launch)):
        try:
            data[key] = fn()
        except Exception as exc:  # recorded, not lost: the lesson says what could not be run
            data[key] = {"error": f"{type(exc).__name__}: {exc}".splitlines()[0]}
    write_json(path or DATA_DIR / "below_torch.json", data)
    return data


if __name__ == "__main__":
    import sys

    print(json.dumps(record(sys.argv[1] if len(sys.argv) > 1 else None), indent=1))
