# misconception: a batch is served by the largest graph it fills, the one just below it (the rest spills over)
# source: plausible (rounding to the nearest size below); lesson 04 "One batch, one bucket", lesson 09 padded lookup
# targets: lookup_table waste
def build_lookup(sizes, max_batch):
    ordered = sorted(set(sizes))
    table = [0]
    for n in range(1, max_batch + 1):
        below = [s for s in ordered if s <= n]
        table.append(below[-1] if below else None)
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
    order = sorted(keep, reverse=True)
    while pool_mib(order) > budget_mib:
        if len(order) == 1:
            raise ValueError("even the largest graph alone is over the budget")
        drop = min(order[1:], key=lambda s: (padding_waste(traffic, [o for o in order if o != s]), s))
        order.remove(drop)
    return order

