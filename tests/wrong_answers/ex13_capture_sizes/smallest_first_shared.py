# misconception: graphs of one pool share memory whatever the order: capture smallest first, count the largest once
# source: lesson 09 (capture largest first: "so that the smaller shapes can reuse the memory pool", vLLM, SGLang)
# targets: capture_order within_budget
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
    order = ordered[:ordered.index(holding[0]) + 1] if holding else ordered

    def shared(sizes):  # the largest graph's memory once, plus what each graph keeps
        return work_mib(max(sizes)) + KEEP_MIB * len(sizes)

    while shared(order) > budget_mib:
        if len(order) == 1:
            raise ValueError("even the largest graph alone is over the budget")
        drop = min(order[:-1], key=lambda s: (padding_waste(traffic, [o for o in order if o != s]), s))
        order.remove(drop)
    return order
