# misconception: the graphs' memory is small next to the weights and the KV cache: no need to plan for it
# source: issue 13 (serving engines' users report out-of-memory during capture); lesson 09 capture memory
# targets: within_budget
def build_lookup(sizes, max_batch):
    ordered = sorted(set(sizes))
    table, i = [0], 0
    for n in range(1, max_batch + 1):
        while i < len(ordered) and ordered[i] < n:
            i += 1
        table.append(ordered[i] if i < len(ordered) else None)
    return table


def padding_waste(traffic, sizes):
    table = build_lookup(sizes, max(traffic, default=0))
    computed = wasted = 0
    for n, steps in traffic.items():
        size = table[n]
        if size is None:
            continue
        computed += steps * size
        wasted += steps * (size - n)
    return wasted / computed if computed else 0.0


def choose_sizes(traffic, candidates, budget_mib):
    ordered = sorted(set(candidates))
    holding = [c for c in ordered if c >= max(traffic)]
    keep = ordered[:ordered.index(holding[0]) + 1] if holding else ordered
    return sorted(keep, reverse=True)
