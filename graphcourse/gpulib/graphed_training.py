"""A graphed training step: whole-step and partial capture, capturable optimizers, autocast (lesson 10; part of
:mod:`graphcourse.gpulib.beyond`)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import Tensor, nn

from ..core.child import run_snippet
from .graphs import cuda_time_us, require_cuda

# --------------------------------------------------------------------------- a training step


@dataclass(frozen=True)
class TrainConfig:
    """A small MLP regression where launch overhead dominates: width x depth, a batch, dropout, AdamW."""

    width: int = 256
    depth: int = 4
    batch: int = 32
    dropout: float = 0.1
    lr: float = 3e-3
    steps: int = 40
    seed: int = 0


def make_model(config: TrainConfig, device: str | torch.device = "cpu") -> nn.Module:
    """The same weights for the same seed, on any device."""
    torch.manual_seed(config.seed)
    layers: list[nn.Module] = []
    for _ in range(config.depth - 1):
        layers += [nn.Linear(config.width, config.width), nn.ReLU(), nn.Dropout(config.dropout)]
    layers.append(nn.Linear(config.width, config.width))
    return nn.Sequential(*layers).to(device)


def make_optimizer(model: nn.Module, config: TrainConfig, capturable: bool) -> torch.optim.Optimizer:
    """AdamW; ``capturable=True`` keeps its step count on the device so ``step()`` can be captured."""
    return torch.optim.AdamW(model.parameters(), lr=config.lr, capturable=capturable)


def make_batches(config: TrainConfig, device: str | torch.device = "cpu", distinct: int = 4) -> list[tuple[Tensor, Tensor]]:
    """`steps` (input, target) pairs from a fixed CPU generator, cycling through `distinct` batches: the same data everywhere.

    The target is a fixed random linear map of the input; cycling a few batches lets a short run show its
    loss falling (the point is the graph's timing and the curve's agreement, not generalisation).
    """
    gen = torch.Generator().manual_seed(config.seed + 1)
    target_w = torch.randn(config.width, config.width, generator=gen) / config.width ** 0.5
    pairs = []
    for _ in range(distinct):
        x = torch.randn(config.batch, config.width, generator=gen)
        pairs.append((x.to(device), (x @ target_w).to(device)))
    return [pairs[i % distinct] for i in range(config.steps)]


def _autocast(device: torch.device, dtype: torch.dtype | None):
    import contextlib

    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=dtype, cache_enabled=False)


def train_eager(config: TrainConfig, device: str | torch.device = "cpu", capturable: bool = False,
                autocast_dtype: torch.dtype | None = None, rng_seed: int = 123) -> list[float]:
    """The plain training loop: the loss of each step, from the same weights, data and dropout seed."""
    device = torch.device(device)
    model = make_model(config, device)
    opt = make_optimizer(model, config, capturable)
    loss_fn = nn.MSELoss()
    torch.manual_seed(rng_seed)
    losses = []
    for x, y in make_batches(config, device):
        opt.zero_grad(set_to_none=True)
        with _autocast(device, autocast_dtype):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return [float(v) for v in torch.stack(losses).cpu()]


class WholeStepGraph:
    """Forward, loss, backward and ``optimizer.step()`` captured as one graph (docs: "Whole-network capture").

    Static input and target buffers; warm-up on a side stream; ``zero_grad(set_to_none=True)`` just before
    capture so backward allocates the ``.grad`` tensors from the graph's pool; AdamW with ``capturable=True``.
    Warm-up moved the weights and the optimizer state, so they are put back afterwards (in place: the graph
    holds their addresses), and the run starts from the same point as an eager one.
    """

    def __init__(self, config: TrainConfig, autocast_dtype: torch.dtype | None = None, warmup: int = 3) -> None:
        require_cuda("capturing a training step")
        self.config = config
        device = torch.device("cuda")
        self.model = make_model(config, device)
        self.opt = make_optimizer(self.model, config, capturable=True)
        self.loss_fn = nn.MSELoss()
        x0, y0 = make_batches(config, device)[0]
        self.static_x, self.static_y = x0.clone(), y0.clone()
        initial = [p.detach().clone() for p in self.model.parameters()]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(warmup):
                self.opt.zero_grad(set_to_none=True)
                with _autocast(device, autocast_dtype):
                    loss = self.loss_fn(self.model(self.static_x), self.static_y)
                loss.backward()
                self.opt.step()
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        self.opt.zero_grad(set_to_none=True)
        start = time.perf_counter()
        with torch.cuda.graph(self.graph, stream=side):
            with _autocast(device, autocast_dtype):
                self.static_loss = self.loss_fn(self.model(self.static_x), self.static_y)
            self.static_loss.backward()
            self.opt.step()
        torch.cuda.synchronize()
        self.capture_s = time.perf_counter() - start
        with torch.no_grad():                        # back to the starting point, in place
            for p, p0 in zip(self.model.parameters(), initial):
                p.copy_(p0)
            for state in self.opt.state.values():
                for value in state.values():
                    if torch.is_tensor(value):
                        value.zero_()                # AdamW's fresh state: step 0, zero moments

    def step(self, x: Tensor, y: Tensor) -> Tensor:
        """One training step: copy the batch into the static buffers, replay; the static loss tensor."""
        self.static_x.copy_(x)
        self.static_y.copy_(y)
        self.graph.replay()
        return self.static_loss

    def train(self, rng_seed: int = 123) -> list[float]:
        """The loss of each step over the config's batches (seeded as :func:`train_eager`)."""
        torch.manual_seed(rng_seed)
        losses = [self.step(x, y).detach().clone() for x, y in make_batches(self.config, "cuda")]
        return [float(v) for v in torch.stack(losses).cpu()]


def partial_step(config: TrainConfig, capturable: bool = False) -> tuple[Callable[[Tensor, Tensor], Tensor], Any]:
    """The model's forward and backward graphed with ``make_graphed_callables``; loss and optimizer eager.

    Returns ``(step, model)``: ``step(x, y)`` runs one training step and returns the loss.
    """
    require_cuda("make_graphed_callables")
    model = make_model(config, "cuda")
    opt = make_optimizer(model, config, capturable)
    loss_fn = nn.MSELoss()
    sample = torch.randn(config.batch, config.width, device="cuda")
    graphed = torch.cuda.make_graphed_callables(model, (sample,))

    def step(x: Tensor, y: Tensor) -> Tensor:
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(graphed(x), y)
        loss.backward()
        opt.step()
        return loss

    return step, graphed


def train_partial(config: TrainConfig, rng_seed: int = 123) -> list[float]:
    """The loss of each step with the model graphed by ``make_graphed_callables``."""
    step, _ = partial_step(config)
    torch.manual_seed(rng_seed)
    losses = [step(x, y).detach() for x, y in make_batches(config, "cuda")]
    return [float(v) for v in torch.stack(losses).cpu()]


def time_training(config: TrainConfig, repeats: int = 5, steps_per_timing: int = 50) -> dict[str, list[float]]:
    """µs per training step, eager / whole-step graph / partial graph (and bf16 autocast pairs), interleaved."""
    require_cuda("timing training steps")
    batches = make_batches(config, "cuda")
    x, y = batches[0]
    eager_model = make_model(config, "cuda")
    eager_opt = make_optimizer(eager_model, config, capturable=False)
    loss_fn = nn.MSELoss()

    def eager_step(dtype: torch.dtype | None = None) -> Callable[[], None]:
        def run() -> None:
            eager_opt.zero_grad(set_to_none=True)
            with _autocast(torch.device("cuda"), dtype):
                loss = loss_fn(eager_model(x), y)
            loss.backward()
            eager_opt.step()
        return run

    whole = WholeStepGraph(config)
    whole_bf16 = WholeStepGraph(config, autocast_dtype=torch.bfloat16)
    part, _ = partial_step(config)
    timers = {
        "eager": eager_step(),
        "graph": lambda: whole.step(x, y),
        "partial": lambda: part(x, y),
        "eager_bf16": eager_step(torch.bfloat16),
        "graph_bf16": lambda: whole_bf16.step(x, y),
    }
    samples: dict[str, list[float]] = {k: [] for k in timers}
    for _ in range(repeats):
        for name, fn in timers.items():
            samples[name].append(cuda_time_us(fn, iters=steps_per_timing, warmup=5))
    samples["capture_s"] = [whole.capture_s]
    return samples


def count_kernels_per_step(config: TrainConfig) -> int | None:
    """Kernels one eager training step launches (torch.profiler); None if the profiler sees none."""
    from .graphs import kernel_profile

    model = make_model(config, "cuda")
    opt = make_optimizer(model, config, capturable=False)
    loss_fn = nn.MSELoss()
    x, y = make_batches(config, "cuda")[0]

    def run() -> None:
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()

    try:
        return int(round(kernel_profile(run, iters=3).kernels_per_call))
    except Exception:
        return None


NONCAPTURABLE_SNIPPET = '''
import json, torch
model = torch.nn.Linear(64, 64).cuda()
opt = torch.optim.AdamW(model.parameters())          # capturable=False, the default
x = torch.randn(8, 64, device="cuda")
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    for _ in range(3):
        opt.zero_grad(set_to_none=True)
        model(x).sum().backward()
        opt.step()
torch.cuda.current_stream().wait_stream(side)
g = torch.cuda.CUDAGraph()
opt.zero_grad(set_to_none=True)
with torch.cuda.graph(g, stream=side):
    model(x).sum().backward()
    opt.step()
print("RESULT " + json.dumps({"captured": True}))
'''
"""A child process capturing AdamW's step without ``capturable=True``."""


def noncapturable_refusal(timeout_s: float = 60.0) -> dict[str, Any]:
    """What capturing a non-capturable AdamW step does (a child process: the capture may fail)."""
    done = run_snippet(NONCAPTURABLE_SNIPPET, timeout_s=timeout_s)
    return {"returncode": done.returncode, "errors": done.errors[:6]}


def autocast_cache_refusal() -> str:
    """What ``make_graphed_callables`` says under autocast with its weight-cast cache on (the default)."""
    require_cuda("make_graphed_callables")
    model = nn.Linear(8, 8).cuda()
    try:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            torch.cuda.make_graphed_callables(model, (torch.randn(4, 8, device="cuda"),))
    except RuntimeError as exc:
        return str(exc).splitlines()[0]
    return "no error"
