# misconception: the step may scale its input in place (out=x): the batch is a temporary, and replay copies a fresh one in anyway
# source: plausible (in-place ops save a buffer); the caller's batch is the caller's: a step that overwrites it changes what the caller reads next
# targets: eager_equal
def step_graph_safe(x):
    h = launch(lambda v: [3 * a for a in v], x, name="scale", out=x)  # in place
    shifted = launch(lambda v: [a - 10 for a in v], h, name="shift")
    negated = launch(lambda v: [-a for a in v], h, name="negate")
    mask = launch(lambda v: [1 if sum(v) > 0 else 0], h, name="mask")
    return launch(lambda m, a, b: [ai if m[0] else bi for ai, bi in zip(a, b)],
                  mask, shifted, negated, name="select")
