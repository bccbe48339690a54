"""The answers to each lesson's *Things to try*, computed from the same helpers the lesson runs (the toy, its prices,
the recorded figures), so an answer changes when what it reads changes; never typed.

The instructor kit (graphcourse.authoring.instructor, ``make instructor``) asks :func:`try_answer` for each item of a
lesson's *Things to try* list; lessons 10 to 13 keep theirs beside their own helpers (``try_answer`` in beyond, ranks,
debugging, below, engines and floors), and this module gathers them.
"""

from __future__ import annotations

from typing import Callable


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _try_02(item: str) -> str | None:
    from .widgets import launch_tax

    base = launch_tax()
    k, launch = base.kernel_us, base.launch_us
    if "launch µs" in item and "down" in item:
        at_kernel = launch_tax(launch_us=k)
        rows = ", ".join(f"{lu:g} µs: {launch_tax(launch_us=lu).speedup:.2f}x"
                         for lu in sorted({launch, launch / 2, k * 2, k}, reverse=True))
        return (f"With the default {base.n_kernels} kernels of {k:g} µs: {rows}. The speedup is about "
                f"launch ÷ kernel time, so it reaches 1x (here {at_kernel.speedup:.2f}x, the graph launch itself "
                f"costing a little) when a launch costs no more than a kernel ({k:g} µs): then the GPU, not the "
                f"CPU, sets the eager step time, and there is no waiting left for a graph to remove.")
    if "batch size" in item:
        sizes = [1, 16, 64, 128, 256, 512]
        rows = ", ".join(f"batch {b}: {launch_tax(batch_size=b).speedup:.2f}x" for b in sizes)
        even = next((b for b in range(1, 513) if not launch_tax(batch_size=b).launch_bound), None)
        where = (f"From batch {even} on a kernel takes at least as long as its launch ({launch:g} µs) and the "
                 f"speedup is {launch_tax(batch_size=even).speedup:.2f}x" if even else
                 "Within the slider's range a kernel never catches up with its launch")
        return (f"{rows}. {where}: the CPU launches faster than the GPU computes, each launch hides behind "
                f"the kernel before it, and the white gaps in the eager GPU lane close.")
    if "kernels per step" in item:
        rows = ", ".join(f"{n} kernels: {launch_tax(n_kernels=n).speedup:.2f}x" for n in (5, 10, 40, 100, 200))
        return (f"Hardly: {rows}. Each kernel adds one launch to the eager step and one kernel time to the "
                f"graphed step, so both grow in proportion and the ratio stays near launch ÷ kernel time; only "
                f"at a few kernels does the one graph launch per step weigh a little.")
    return None


def _try_04(item: str) -> str | None:
    import toygraph as tg
    from .widgets import bucket_choice

    if "power of two" in item:
        p2 = tg.powers_of_two(64)
        rows = ", ".join(f"{n} → bucket {tg.bucket_for(n, p2)}: {_pct(tg.waste_fraction(n, tg.bucket_for(n, p2)))}"
                         for n in (16, 17, 32, 33))
        return (f"{rows} padding. Crossing a power of two doubles the bucket, so the waste jumps from none to "
                f"nearly half, then shrinks as the batch grows towards the next power of two.")
    if "every 8" in item:
        e8 = tg.every_n(8, 64)
        worst = max(range(1, 65), key=lambda n: tg.waste_fraction(n, tg.bucket_for(n, e8)))
        b = tg.bucket_for(worst, e8)
        return (f"Buckets {', '.join(map(str, e8))}. The worst is batch {worst} in bucket {b}: "
                f"{_pct(tg.waste_fraction(worst, b))} padding. Above 8 a batch is never more than 7 rows short "
                f"of its bucket, and 7 rows are a large share of a small bucket and a small share of a large "
                f"one; below 8 the powers 1, 2, 4 keep the tiny batches close.")
    if "25%" in item:
        buckets, upper = [64], 64
        while upper > 1:  # the smallest bucket below `upper` that keeps every size it serves under 25%
            lower = next(b for b in range(1, upper) if all((upper - n) / upper < 0.25 for n in range(b + 1, upper + 1)))
            buckets.append(lower)
            upper = lower
        buckets.sort()
        worst = max(tg.waste_fraction(n, tg.bucket_for(n, buckets)) for n in range(1, 65))
        return (f"{len(buckets)} buckets: `{', '.join(map(str, buckets))}` (worst waste {_pct(worst)}). "
                f"Built from the top: a bucket b serves the sizes above 3/4 of b, so each bucket is the "
                f"smallest that reaches down to the next; every size from 1 to 64 stays graphed. Powers of "
                f"two need only 7 graphs but waste up to nearly half; every 8 needs "
                f"{len(tg.every_n(8, 64))}.")
    if "1, 8, 32" in item:
        choice = bucket_choice(40, "custom list", "1, 8, 32")
        rep = choice.overall
        return (f"Batches 33 to 64 ({rep.eager_batches} of 64 sizes) have no graph: they run eagerly, paying "
                f"every launch, and the toy warns (`EagerFallbackWarning`), as vLLM does. Batches 2 to 8 "
                f"pad into 8 and 9 to 32 into 32: {_pct(rep.waste_fraction)} of the graphed rows are padding.")
    return None


def _try_09(item: str) -> str | None:
    from . import serving as S
    from toygraph.serving import expected_waste

    lists = S.candidate_lists(256)

    def wastes(mix: dict) -> dict:
        return {name: expected_waste(sizes, mix).waste_fraction for name, sizes in lists.items()}

    if "mean" in item:
        before, after = wastes(S.chat_batch_distribution(256, 24)), wastes(S.chat_batch_distribution(256, 12))
        rows = ", ".join(f"{n} ({len(lists[n])}) {_pct(before[n])} → {_pct(after[n])}" for n in lists)
        return (f"Waste at mean 24 → mean 12: {rows}. With smaller batches the gaps at the small end matter "
                f"more: \"every 32\" sends every batch from 5 to 32 into the graph of 32, so it gets worse, while "
                f"the lists that are fine below 32 (vLLM's, SGLang's, every 4) rise much less.")
    if "interactivity" in item:
        mix = S.chat_batch_distribution(256)
        base, inter = S.vllm_default_sizes(), S.vllm_default_sizes(performance_mode="interactivity")
        wb, wi = expected_waste(base, mix).waste_fraction, expected_waste(inter, mix).waste_fraction
        return (f"{len(inter)} sizes instead of {len(base)} ({len(inter) - len(base)} more, every size from 1 to "
                f"32); waste on the chat mix {_pct(wb)} → {_pct(wi)}: the extra graphs sit exactly where the "
                f"assumed mix puts most batches.")
    if "uniform" in item:
        mix = S.uniform_distribution(256)
        w = wastes(mix)
        return (f"Powers of two waste {_pct(w['powers of two'])} of the graphed rows, vLLM's rule (up to 256) "
                f"{_pct(w['vLLM default'])}, every 16 {_pct(w['every 16'])}. On a uniform mix most batches are "
                f"large, where powers of two leave gaps of up to 127 rows and a stride of 8 at most 7.")
    return None


def _try_10(item: str) -> str | None:
    from . import beyond, ranks

    return beyond.try_answer(item) or ranks.try_answer(item)


def _try_11(item: str) -> str | None:
    from .debugging import try_answer

    return try_answer(item)


def _try_12(item: str) -> str | None:
    from .below import try_answer

    return try_answer(item)


def _try_09_engines(item: str) -> str | None:
    from .engines import try_answer

    return _try_09(item) or try_answer(item)


def _try_13(item: str) -> str | None:
    from .floors import try_answer

    return try_answer(item)


ANSWERS = {"02": _try_02, "04": _try_04, "09": _try_09_engines, "10": _try_10, "11": _try_11, "12": _try_12,
               "13": _try_13}


def try_answer(lesson: str, item: str) -> str | None:
    """The computed answer to `item` of lesson `lesson` ("02"), or None where the course has none yet."""
    fn: Callable[[str], str | None] | None = ANSWERS.get(lesson)
    return fn(item) if fn else None
