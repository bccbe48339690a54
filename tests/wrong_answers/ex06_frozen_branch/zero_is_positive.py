# misconception: the boundary does not matter: a sum of 0 may go either way (>= instead of >)
# source: plausible; the exercise's step negates a batch whose sum is 0
# targets: eager_equal edge_captures
def step_graph_safe(x):
    h = launch(lambda v: [3 * a for a in v], x, name="scale")
    shifted = launch(lambda v: [a - 10 for a in v], h, name="shift")
    negated = launch(lambda v: [-a for a in v], h, name="negate")
    mask = launch(lambda v: [1 if sum(v) >= 0 else 0], h, name="mask")
    return launch(lambda m, a, b: [ai if m[0] else bi for ai, bi in zip(a, b)], mask, shifted, negated)
