# misconception: call f again for the first input after the second call, to get its result back
# source: plausible: right values, at the price of a replay per refresh
# targets: replays
def collect(f, xs):
    return [f(x).tolist() for x in xs]


def pairwise_diff(f, x1, x2):
    f(x1)
    second = f(x2).tolist()
    first = f(x1).tolist()
    return [b - a for a, b in zip(first, second)]
