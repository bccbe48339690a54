"""Lesson 10's toy ranks: a step with a collective captured on every rank, and one serving step replayed.

Thin wrappers over :mod:`toygraph.ranks` so the lesson's cells stay a few lines: each rank's graph
``"step"`` runs a stand-in layer (doubling its static buffer) and then all-reduces the buffer, as a
layer that exchanges results between ranks does (an expert-parallel MoE layer of data-parallel
ranks, or a tensor-parallel layer's all-reduce).
"""

from __future__ import annotations

from typing import Sequence

from toygraph.buckets import pad_to
from toygraph.ranks import RankBuffer, RankGraph, World

__all__ = ["capture_step", "serve_step"]


def capture_step(sizes: Sequence[int], *, timeout_steps: int = 50,
                    **world_kw: object) -> tuple[World, list[RankBuffer], list[RankGraph]]:
    """A world of len(sizes) ranks; rank i captured graph 'step' (layer, then all-reduce) on a buffer of sizes[i]."""
    world = World(len(sizes), timeout_steps=timeout_steps, **world_kw)  # type: ignore[arg-type]
    bufs = [r.tensor([0.0] * n) for r, n in zip(world.ranks, sizes)]
    graphs = [r.graph("step") for r in world.ranks]
    for r, g, b in zip(world.ranks, graphs, bufs):
        with g.capture():
            r.launch(lambda x: [v * 2 for v in x], b, name="layer")
            r.all_reduce(b)
    return world, bufs, graphs


def serve_step(bufs: Sequence[RankBuffer], graphs: Sequence[RankGraph], batches: Sequence[Sequence[float]],
               skip: Sequence[int] = ()) -> None:
    """Each rank copies its batch, padded to its buffer, into the static buffer and replays; ranks in skip do not."""
    for i, (b, g, rows) in enumerate(zip(bufs, graphs, batches)):
        if i in skip:
            continue
        b.copy_(pad_to(list(rows), len(b)))
        g.replay()
