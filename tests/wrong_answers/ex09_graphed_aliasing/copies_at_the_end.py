# misconception: copying the results once all calls are done is as good as copying each right away
# source: plausible; by then every result is the last call's
# targets: collect_values diff_values
def collect(f, xs):
    outs = [f(x) for x in xs]
    return [o.tolist() for o in outs]


def pairwise_diff(f, x1, x2):
    a, b = f(x1), f(x2)
    a, b = a.tolist(), b.tolist()
    return [q - p for p, q in zip(a, b)]
