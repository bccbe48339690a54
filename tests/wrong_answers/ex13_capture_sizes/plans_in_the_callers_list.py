# misconception: the candidates list is the function's to sort and trim: the plan can be built in it
# source: lesson 04 common mistakes (pad_in_place: the caller still needs its own list); an engine plans again with the same candidates
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
    order = candidates  # plan in place: sort and trim the list handed in
    order.sort(reverse=True)
    while len(order) > 1 and order[1] >= max(traffic):
        order.pop(0)
    while pool_mib(order) > budget_mib:
        if len(order) == 1:
            raise ValueError("even the largest graph alone is over the budget")
        drop = min(order[1:], key=lambda s: (padding_waste(traffic, [o for o in order if o != s]), s))
        order.remove(drop)
    return order
