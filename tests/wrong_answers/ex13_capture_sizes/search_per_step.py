# misconception: the lookup is the sorted list of sizes, searched at every step (no table built once)
# source: lesson 09 (vLLM builds bs_to_padded_graph_size once so that a step costs one index)
# targets: lookup_table above_largest
import bisect


def build_lookup(sizes, max_batch):
    return sorted(set(sizes))  # each step bisects this list


def padding_waste(traffic, sizes):
    ordered = sorted(set(sizes))
    computed = wasted = 0
    for n, steps in traffic.items():
        i = bisect.bisect_left(ordered, n)
        if i == len(ordered):
            continue
        computed += steps * ordered[i]
        wasted += steps * (ordered[i] - n)
    return wasted / computed if computed else 0.0


def choose_sizes(traffic, candidates, budget_mib):
    ordered = sorted(set(candidates))
    holding = [c for c in ordered if c >= max(traffic)]
    keep = ordered[:ordered.index(holding[0]) + 1] if holding else ordered
    order = sorted(keep, reverse=True)
    while pool_mib(order) > budget_mib:
        if len(order) == 1:
            raise ValueError("even the largest graph alone is over the budget")
        drop = min(order[1:], key=lambda s: (padding_waste(traffic, [o for o in order if o != s]), s))
        order.remove(drop)
    return order

