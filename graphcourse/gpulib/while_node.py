"""A real WHILE node on the GPU: the tiny GPT decodes until every sequence has emitted end-of-sequence, in one launch.

PyTorch (2.11 on the course's H200, 2.13 here) captures IF nodes (``begin_capture_to_if_node``) but
no WHILE node, so lesson 08's decode-until-end-of-sequence loop ran only on the toy. Below PyTorch,
CUDA's graph API has it: a conditional node of type WHILE runs its body graph again and again while
its condition handle is non-zero, and a kernel in the body sets the handle
(``cudaGraphSetConditional``), all on the device (CUDA programming guide, "Conditional Graph Nodes";
CUDA 12.3+ for WHILE).

How the pieces fit, and why this way:

1. torch captures **one decode step** into a ``torch.cuda.CUDAGraph(keep_graph=True)``, so that its
   ``cudaGraph_t`` survives ``capture_end`` (``raw_cuda_graph()``); its private memory pool stays
   torch's, held by that object for as long as the loop is used. The step reads and writes only
   static tensors: the token, the position, the done flags, the output row.
2. ``cuda.core`` (NVIDIA's Python API for CUDA) builds the outer graph: a conditional handle whose
   default is 1, a WHILE node, and in its body the torch step as a **child graph node** (CUDA copies
   the child graph into the body) followed by ``keep_going``, a kernel of our own compiled with
   NVRTC, which sets the handle to 0 once every sequence is done or the position reaches the limit.
3. One ``graph.launch(stream)`` then decodes all the tokens; the CPU reads the result once.

Torch's kernels are not captured *into* the body's stream directly: the caching allocator would
then allocate for a capture it does not know, outside any graph pool. Capturing with torch and
adding the result as a child graph keeps every allocation in torch's pool.
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["KEEP_GOING", "WhileDecoder", "choose_eos", "run_while_demo", "record"]

KEEP_GOING = r"""
#include <cuda_device_runtime_api.h>
extern "C" __global__ void keep_going(cudaGraphConditionalHandle handle, const bool* done,
                                      const long long* pos, const long long* limit, int batch) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    bool left = false;
    for (int i = 0; i < batch; ++i) left = left || !done[i];
    cudaGraphSetConditional(handle, (left && *pos < *limit) ? 1u : 0u);
}
"""


class WhileDecoder:
    """Greedy decoding of the tiny GPT in one graph launch: a WHILE node around a torch-captured step."""

    def __init__(self, model: Any, batch: int, eos_id: int, *, warmup_iters: int = 2) -> None:
        import numpy as np
        import torch
        from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch

        self.torch, self.np = torch, np
        self.model, self.batch, self.eos_id = model, batch, eos_id
        dev = model.head.weight.device
        self.max_len = model.config.max_len
        self.cache = model.new_cache(batch)
        self.tokens = torch.zeros(batch, dtype=torch.long, device=dev)
        self.pos = torch.zeros((), dtype=torch.long, device=dev)
        self.done = torch.zeros(batch, dtype=torch.bool, device=dev)
        self.out = torch.full((batch, self.max_len), eos_id, dtype=torch.long, device=dev)
        self.limit = torch.zeros((), dtype=torch.long, device=dev)

        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(warmup_iters):
                self._step()
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()
        clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
        if clear is not None:
            clear()
        self.step_graph = torch.cuda.CUDAGraph(keep_graph=True)
        with torch.cuda.graph(self.step_graph, stream=stream):
            self._step()
        torch.cuda.synchronize()

        self.device = Device(dev.index or 0)
        self.device.set_current()
        self.stream = self.device.create_stream()
        prog = Program(KEEP_GOING, code_type="c++",
                       options=ProgramOptions(std="c++17", arch=f"sm_{self.device.arch}",
                                              include_path=_cuda_include()))
        self.kernel = prog.compile("cubin").get_kernel("keep_going")
        self._launch, self._config = launch, LaunchConfig(grid=1, block=1)
        self.graph = self._build()

    def _step(self) -> None:
        """One decode step on static tensors: next token, masked once done, written at its position."""
        nxt = self.model.decode_step(self.tokens, self.pos, self.cache)
        nxt = nxt.masked_fill(self.done, self.eos_id)
        self.done.logical_or_(nxt == self.eos_id)
        self.out.index_copy_(1, self.pos.view(1), nxt.view(-1, 1))
        self.tokens.copy_(nxt)
        self.pos.add_(1)

    def _build(self) -> Any:
        from cuda.bindings import driver

        np = self.np
        gb = self.device.create_graph_builder().begin_building()
        create = getattr(gb, "create_condition", None) or gb.create_conditional_handle  # cuda.core 1.x, 0.x
        condition = create(default_value=1)
        handle = int(getattr(condition, "handle", condition))
        body = gb.while_loop(condition)
        body.begin_building()
        _add_child_graph(body, self.step_graph.raw_cuda_graph(), driver)
        self._launch(body, self._config, self.kernel, np.uint64(handle), np.uint64(self.done.data_ptr()),
                     np.uint64(self.pos.data_ptr()), np.uint64(self.limit.data_ptr()), np.int32(self.batch))
        body.end_building()
        gb.end_building()
        return gb.complete()

    def start(self, prompt: Any, max_new: int) -> None:
        """Prefill `prompt` [batch, time] eagerly and set the state; the loop stops after `max_new` tokens at most."""
        torch = self.torch
        self.cache.reset_()
        self.done.zero_()
        self.out.fill_(self.eos_id)
        prompt = prompt.to(self.tokens.device)
        for i in range(prompt.shape[1] - 1):
            self.pos.fill_(i)
            self.model.decode_step(prompt[:, i], self.pos, self.cache)
        self.tokens.copy_(prompt[:, -1])
        self.pos.fill_(prompt.shape[1] - 1)
        self.first = prompt.shape[1] - 1
        self.limit.fill_(min(self.max_len, self.first + max_new))
        torch.cuda.synchronize()

    def run(self) -> tuple[Any, int]:
        """One launch of the WHILE graph: the tokens [batch, steps] and how many steps ran."""
        torch = self.torch
        torch.cuda.synchronize()
        self.graph.launch(self.stream)
        self.stream.sync()
        steps = int(self.pos.item()) - self.first
        return self.out[:, self.first:self.first + steps].clone(), steps


def _cuda_include() -> list[str]:
    import os

    found = [p for p in ("/usr/local/cuda/include",) if os.path.isdir(p)]
    try:
        import nvidia.cuda_runtime as rt  # the pip wheel's headers, where the toolkit is absent
        found.append(os.path.join(os.path.dirname(rt.__file__), "include"))
    except Exception:
        pass
    return found


def _add_child_graph(builder: Any, raw_graph: int, driver: Any) -> None:
    """Add a cudaGraph_t as a child node at the builder's capture point (as cuda.core's GraphBuilder.add_child)."""
    stream_handle = builder.stream.handle
    status, _, graph_out, *deps, n = _ret(driver.cuStreamGetCaptureInfo(stream_handle))
    child = driver.CUgraph(raw_graph)
    node = _ret(driver.cuGraphAddChildGraphNode(graph_out, list(deps[0])[:n] if n else None, n, child))
    update = [[node]] + [None] * (len(deps) - 1)
    _ret(driver.cuStreamUpdateCaptureDependencies(
        stream_handle, *update, 1, driver.CUstreamUpdateCaptureDependencies_flags.CU_STREAM_SET_CAPTURE_DEPENDENCIES))


def _ret(result: Any) -> Any:
    """cuda-bindings' (error, value...) tuple: the value(s), or a RuntimeError naming the error."""
    from cuda.bindings import driver

    err, *rest = result
    if err != driver.CUresult.CUDA_SUCCESS:
        _, name = driver.cuGetErrorName(err)
        raise RuntimeError(f"CUDA driver error {name.decode() if isinstance(name, bytes) else name}")
    return rest[0] if len(rest) == 1 else tuple(rest)


def choose_eos(rows: list[list[int]], min_steps: int = 16) -> int:
    """A token every sequence emits, none before step `min_steps`; of those, the one that ends the loop first.

    The tiny GPT's weights are random, so no token means end-of-sequence; choosing one that every
    sequence reaches, at different steps and not at once, lets the loop run a while and stop early.
    Ties go to the smallest token id. A ValueError when no token qualifies.
    """
    common = set(rows[0]).intersection(*map(set, rows[1:]))
    late = [t for t in common if min(row.index(t) for row in rows) >= min_steps]
    if not late:
        raise ValueError(f"no token appears in every sequence, first at step {min_steps} or later")
    return min(late, key=lambda t: (max(row.index(t) for row in rows), t))


def run_while_demo(batch: int = 4, max_new: int = 96, seed: int = 0, repeats: int = 7, k: int = 8) -> dict[str, Any]:
    """Decode with the WHILE graph and with a host loop of one-step replays; same tokens? how long? how many steps?"""
    import torch

    from .graphs import GPTConfig, TinyGPT

    torch.manual_seed(seed)
    model = TinyGPT(GPTConfig()).cuda().eval()
    with torch.no_grad():
        # the weights are random, so no token means end-of-sequence: decode without one first, then take
        # a token every sequence emits, so that the loop can stop early; prompts are drawn until one
        # batch shares such a token (the prompt seed tried is recorded)
        dec = WhileDecoder(model, batch, eos_id=-1)
        for prompt_seed in range(seed, seed + 200):
            gen = torch.Generator(device="cuda").manual_seed(prompt_seed)
            prompt = torch.randint(0, model.config.vocab_size, (batch, 8), device="cuda", generator=gen)
            dec.start(prompt, max_new)
            ref, _ = dec.run()
            try:
                eos_id = choose_eos(ref.tolist())
            except ValueError:
                continue
            if max(row.index(eos_id) for row in ref.tolist()) < max_new - 8:
                break
        else:
            raise RuntimeError(f"no prompt of seeds {seed}..{seed + 199} gives {batch} sequences a common token")
        dec = WhileDecoder(model, batch, eos_id=eos_id)
        while_ms, host_ms = [], []
        for r in range(repeats + 1):  # run 0 is untimed: the first launch uploads the graph
            dec.start(prompt, max_new)
            t0 = time.perf_counter()
            tokens, steps = dec.run()
            if r:
                while_ms.append((time.perf_counter() - t0) * 1e3)
            # the host loop: one replay of the step graph per token, a sync to read `done` after each
            dec.start(prompt, max_new)
            host_steps = 0
            t0 = time.perf_counter()
            while host_steps < max_new:
                dec.step_graph.replay()
                host_steps += 1
                if bool(dec.done.all().item()):
                    break
            if r:
                host_ms.append((time.perf_counter() - t0) * 1e3)
            host_tokens = dec.out[:, dec.first:dec.first + host_steps].clone()
        # lesson 08's way: K steps per launch of an ordinary graph, finished sequences masked, the host
        # checking `done` after each launch
        from .device_loop import MultiStepDecoder

        k_ms, k_steps = [], 0
        multi = MultiStepDecoder(model, batch, k, eos_id=eos_id)
        for r in range(repeats + 1):
            multi.start(prompt)
            k_steps = 0
            t0 = time.perf_counter()
            while k_steps < max_new:
                multi.launch()
                k_steps += k
                if bool(multi.state.done.all().item()):
                    break
            if r:
                k_ms.append((time.perf_counter() - t0) * 1e3)
    from .bench import spread as summary  # the course's one summary of repeats

    first_eos = [int((row == eos_id).nonzero()[0].item()) if bool((row == eos_id).any()) else None
                 for row in tokens]
    return {"batch": batch, "max_new": max_new, "eos_id": eos_id, "model_seed": seed, "prompt_seed": prompt_seed,
            "while_steps": steps, "host_steps": host_steps, "same_tokens": bool(torch.equal(tokens, host_tokens)),
            "while_ms": summary(while_ms), "host_ms": summary(host_ms), "k": k, "k_steps": k_steps,
            "k_ms": summary(k_ms), "repeats": repeats, "first_eos_per_sequence": first_eos}


def record(out: Any = None) -> dict[str, Any]:
    """Run the demo at batch 1 and 4 and write data/while_node.json with provenance (a GPU machine only)."""
    from ..core.paths import DATA_DIR
    from .below_torch import provenance, write_json

    data: dict[str, Any] = {"provenance": dict(
        provenance("python -m graphcourse.gpulib.while_node"),
        timing="wall-clock ms of one whole decode (launch to result on the host), median, min and max over "
               "interleaved repeats, after a first untimed run")}
    data["runs"] = [run_while_demo(batch=b, seed=s) for b, s in ((1, 0), (4, 0))]
    write_json(out or DATA_DIR / "while_node.json", data)
    return data


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(record(sys.argv[1] if len(sys.argv) > 1 else None), indent=1))
