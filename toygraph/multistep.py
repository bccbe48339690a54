"""Several decode steps in one graph: one launch for K tokens, and a WHILE node to stop at end-of-sequence.

A graph of one decode step costs one graph launch per token, and the host reads each token
(a sync) to decide whether to go on. Capturing K steps in one graph pays one launch per K
tokens; the tokens go into a static buffer on the device, read once per replay. Stopping at
an end-of-sequence token without asking the CPU needs a decision inside the graph: a WHILE
node (CUDA 12.3, :mod:`toygraph.conditional`) whose condition a kernel sets after each step.

:class:`DecodeLoop` captures such a loop around a one-token step kernel (``[token] -> [next]``).
Where it simplifies: one sequence (batch 1), and the step is one kernel; a model's step is a
few hundred.
"""

from __future__ import annotations

from typing import Callable

from ._guard import Guarded
from .capture import ToyGraph, graph, launch
from .conditional import ConditionalNode, while_node
from .errors import InvalidArgumentError
from .memory import ToyDevice, default_device

__all__ = ["DecodeLoop"]

PAD = -1
"""What the token buffer holds where no token was produced (after an end-of-sequence token)."""


def _same(values: list) -> list:
    return values


def _put(ring: list, token: list, count: list) -> list:
    """Write the token at position count of the ring (a kernel: it reads and writes device memory)."""
    out = list(ring)
    out[count[0]] = token[0]
    return out


class DecodeLoop(Guarded):
    """K decode steps captured in one graph: `run(first_token)` replays once and reads the tokens once."""

    def __init__(self, step: Callable[[list], list], steps: int, *, eos: int | None = None,
                 device: ToyDevice | None = None, name: str = "decode loop") -> None:
        if not callable(step):
            raise InvalidArgumentError(f"step must be a kernel from [token] to [next token], got {step!r}.")
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise InvalidArgumentError(f"steps must be a whole number >= 1, got {steps!r}.")
        self.steps, self.eos = steps, eos
        self.device = device or default_device()
        dev = self.device
        self.token = dev.tensor([0])  # the static input: the token to continue from
        self.tokens = dev.tensor([PAD] * steps)  # the static output: the tokens produced
        self.graph = ToyGraph(dev, name=name)
        self.loop: ConditionalNode | None = None
        with graph(self.graph):
            self.tokens.copy_([PAD] * steps)  # a baked copy: each replay starts from an empty buffer
            if eos is None:
                for i in range(steps):  # unrolled: 2 kernels a step, one launch for them all
                    launch(step, self.token, out=self.token, name=f"step {i}")
                    launch(_same, self.token, out=self.tokens[i:i + 1], name=f"keep {i}")  # a view
            else:
                count, go = dev.tensor([0]), dev.tensor([1])
                count.copy_([0])
                go.copy_([1])

                def body() -> None:
                    launch(step, self.token, out=self.token, name="step")
                    launch(_put, self.tokens, self.token, count, out=self.tokens, name="keep")
                    launch(lambda c: [c[0] + 1], count, out=count, name="count")
                    launch(lambda t, c: [int(t[0] != eos and c[0] < steps)], self.token, count, out=go,
                           name="go on?")  # sets the WHILE node's condition, on the device

                self.loop = while_node(go, body, name="until eos", max_iterations=steps)

    def run(self, first_token: int) -> list:
        """The tokens after first_token (up to and including eos, at most `steps`): one replay, one sync."""
        self.token.copy_([first_token])
        self.graph.replay()
        produced = self.tokens.tolist()  # the one sync
        return [t for t in produced if t != PAD]

    def __repr__(self) -> str:
        kind = f"until {self.eos} (WHILE node)" if self.eos is not None else "unrolled"
        return f"DecodeLoop({self.steps} steps, {kind}, {self.graph!r})"
