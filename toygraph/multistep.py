"""Multi-step capture: K decode steps recorded into one graph, so the CPU launches once per K tokens.

Two twins of lesson 08's real loop:

* :func:`capture_steps` captures K calls of a host function that launches one step's kernels
  on static buffers (each step reads the token the previous one wrote: all on the device).
  One replay then runs K steps for a single graph launch.
* :func:`simulate_k_steps` puts that on the toy timeline: per launch the CPU does some host
  work (a scheduler, sampling bookkeeping) and one graph launch; the GPU runs K steps' kernels
  back to back. :func:`k_step_costs` tabulates time per token and CPU time per token for
  several K: the CPU's share shrinks about K-fold, while the GPU's time per token stays put:
  K steps per graph free the CPU, they do not make a GPU-bound step faster.
"""

from __future__ import annotations

from typing import Callable, Sequence

from .capture import ToyGraph, graph
from .errors import InvalidArgumentError
from .memory import ToyDevice
from .timeline import Clock, CostModel, Timeline, _kernel_list

__all__ = ["capture_steps", "k_step_costs", "simulate_k_steps"]


def _whole(name: str, value: object, least: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise InvalidArgumentError(f"{name} must be a whole number >= {least}, got {value!r}.")
    return value


def capture_steps(step: Callable[[], object], k: int, device: ToyDevice | None = None,
                  name: str | None = None) -> ToyGraph:
    """Capture `k` consecutive calls of `step` (which launches one decode step's kernels) into one ToyGraph.

    `step` must keep everything on the device: read its token from a buffer the previous step
    wrote (``launch(..., out=token)``), never look at a value from host code. Replay with
    ``g.replay()``: one launch, k steps.
    """
    _whole("k (steps per graph)", k)
    if not callable(step):
        raise InvalidArgumentError(f"step must be a function of no arguments that launches kernels, got {step!r}.")
    g = ToyGraph(device, name=name or f"{k} steps")
    with graph(g):
        for _ in range(k):
            step()
    return g


def simulate_k_steps(kernels: int | Sequence[float], k: int, tokens: int, *, host_us_per_launch: float = 0.0,
                     cost: CostModel | None = None) -> Timeline:
    """`tokens` decode steps of the given kernels, K per graph launch, each launch preceded by host work."""
    _whole("k (steps per graph)", k)
    _whole("tokens", tokens)
    if isinstance(host_us_per_launch, bool) or not isinstance(host_us_per_launch, (int, float)) \
            or host_us_per_launch < 0:
        raise InvalidArgumentError(f"host_us_per_launch must be a number of µs >= 0, got {host_us_per_launch!r}.")
    clock = Clock(cost)
    times = _kernel_list(kernels, clock.cost)
    done = 0
    while done < tokens:
        steps = min(k, tokens - done)
        if host_us_per_launch:
            clock.host(host_us_per_launch, "scheduler")
        clock.replay(f"{steps} steps", times * steps)
        clock.end_step()
        done += steps
    return clock.timeline


def k_step_costs(kernels: int | Sequence[float], ks: Sequence[int], tokens: int = 64, *,
                 host_us_per_launch: float = 0.0, cost: CostModel | None = None) -> list[dict[str, float]]:
    """For each K: µs per token, CPU busy µs per token and GPU busy share, from :func:`simulate_k_steps`."""
    rows = []
    for k in ks:
        t = simulate_k_steps(kernels, k, tokens, host_us_per_launch=host_us_per_launch, cost=cost)
        rows.append({
            "k": k,
            "us_per_token": t.total_us / tokens,
            "cpu_us_per_token": t.busy_us("cpu") / tokens,
            "gpu_us_per_token": t.busy_us("gpu") / tokens,
            "gpu_busy": t.gpu_utilization,
        })
    return rows
