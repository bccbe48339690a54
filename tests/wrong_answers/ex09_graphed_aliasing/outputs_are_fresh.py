# misconception: make_graphed_callables returns a new tensor per call, like the eager module
# source: lesson 03 (its toy twin copied outputs out, teaching the opposite); PyTorch docs: detached aliases
# targets: collect_values collect_after_next_call diff_values
def collect(f, xs):
    return [f(x) for x in xs]


def pairwise_diff(f, x1, x2):
    a = f(x1)
    b = f(x2)
    return [q - p for p, q in zip(a.tolist(), b.tolist())]
