# misconception: the graphed callable's kernels can be run eagerly for the same result (the graph is optional)
# source: lesson 02 (the launch tax); was a graph replayed at all?
# targets: replays
def _eager(f, x):
    values = list(x)
    for op in f.graph.ops:
        values = list(op(values))
    return values


def collect(f, xs):
    return [_eager(f, x) for x in xs]


def pairwise_diff(f, x1, x2):
    return [b - a for a, b in zip(_eager(f, x1), _eager(f, x2))]
