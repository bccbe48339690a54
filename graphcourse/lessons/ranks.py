"""Lesson 10's toy ranks: a step with a collective captured on every rank, and one serving step replayed.

Thin wrappers over :mod:`toygraph.ranks` so the lesson's cells stay a few lines: each rank's graph
``"step"`` runs a stand-in layer (doubling its static buffer) and then all-reduces the buffer, as a
layer that exchanges results between ranks does (an expert-parallel MoE layer of data-parallel
ranks, or a tensor-parallel layer's all-reduce).
"""

from __future__ import annotations

from typing import Sequence

from toygraph.buckets import pad_to
from toygraph.ranks import CollectiveHang, RankBuffer, RankGraph, World

__all__ = ["capture_step", "run_plan", "serve_step"]


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


def run_plan(plan: object, batch_sizes: Sequence[int], capture_sizes: Sequence[int], *,
             timeout_steps: int = 20) -> dict:
    """Run one step's plan on toy ranks and say what came of it (ex19's check, lesson 10's rule).

    Every rank holds a graph per capture size (the stand-in layer, then an all-reduce), captured at
    start-up. ``plan`` is what each rank runs this step: a list with one entry per rank, a capture
    size (the rank copies its batch, padded, into that graph's buffer and replays it) or
    ``"eager"`` (the rank runs the layer and the all-reduce eagerly, its rows padded to the
    largest batch because the toy's all-reduce needs equal sizes; vLLM pads only while a graph mode
    is on, and eager ranks run their own counts), or ``None`` (that rank
    sits the step out); a plan that is ``None`` itself means no rank runs. Rank i's requests are rows of i + 1. Returns ``{"rows": [...]}`` per rank, or
    ``{"hang": message}`` when the ranks' collectives do not meet (the toy's watchdog), or
    ``{"error": message}`` for a plan that no rank could run.
    """
    n = len(batch_sizes)
    sizes = sorted(set(int(s) for s in capture_sizes))
    if plan is None:
        return {"ran": "nothing"}
    if not isinstance(plan, (list, tuple)) or len(plan) != n:
        return {"error": f"a plan is None or a list of {n} entries, one per rank; got {plan!r:.80}"}
    for i, entry in enumerate(plan):
        if entry is None:
            continue
        if entry != "eager" and not (isinstance(entry, int) and not isinstance(entry, bool) and entry in sizes):
            return {"error": f"rank {i}'s entry {entry!r:.40} is neither a capture size {sizes} nor 'eager'"}
        if entry != "eager" and batch_sizes[i] > entry:
            return {"error": f"rank {i} has {batch_sizes[i]} requests: they do not fit a graph of {entry}"}
    world = World(n, timeout_steps=timeout_steps)
    graphs: list[dict[int, tuple[RankBuffer, RankGraph]]] = []
    for r in world.ranks:
        mine = {}
        for s in sizes:
            buf, g = r.tensor([0.0] * s), r.graph(f"step{s}")
            with g.capture():
                r.launch(lambda x: [v * 2 for v in x], buf, name="layer")
                r.all_reduce(buf)
            mine[s] = (buf, g)
        graphs.append(mine)
    widest = max(batch_sizes)
    out: list[RankBuffer] = []
    try:
        for r, entry, rows in zip(world.ranks, plan, batch_sizes):
            mine = [float(r.index + 1)] * rows
            if entry is None:
                out.append(r.tensor(mine or [0.0]))
                continue
            if entry == "eager":
                buf = r.tensor(pad_to(mine, widest))
                r.launch(lambda x: [v * 2 for v in x], buf, name="layer")
                r.all_reduce(buf)
            else:
                buf, g = graphs[r.index][entry]
                buf.copy_(pad_to(mine, entry))
                g.replay()
            out.append(buf)
        world.synchronize()
    except CollectiveHang as e:
        return {"hang": str(e)}
    return {"rows": [b.tolist() for b in out]}


def try_answer(item: str) -> str | None:
    """The computed answer to lesson 10's Things to try item on run_plan, or None for another item."""
    if "run_plan" not in item:
        return None
    from toygraph.ranks import shared_bucket

    batches, sizes = [0, 3, 9], [1, 2, 4, 8, 16]
    size = shared_bucket(batches, sizes)
    ok = run_plan([size] * 3, batches, sizes)
    own = run_plan([1, 4, 16], batches, sizes)
    out = run_plan([None, 4, 16], batches, sizes)
    firsts = [r[0] for r in ok["rows"]]
    eager = run_plan(["eager"] * 3, batches, sizes)
    return (f"Every rank replaying the graph of {size} (the bucket of the largest batch, 9; rank 0 replays "
            f"padding) finishes, and every rank gets back the same rows, the first {firsts[0]:g} = 2·2 + 2·3 "
            f"(rank 0 adds zeros). Buckets of each rank's own batch ([1, 4, 16]) hang: "
            f"{own['hang'].split(': ')[0]}. Rank 0 sitting out ([None, 4, 16]) hangs too: "
            f"{out['hang'].split('; ')[0]}, and {out['hang'].split('): ')[1].split('. ')[0]}. Every rank eager "
            f"{'finishes as well' if 'rows' in eager else 'hangs'}, but without the graph. ex19 asks for the "
            f"rule, for any batches and sizes.")
