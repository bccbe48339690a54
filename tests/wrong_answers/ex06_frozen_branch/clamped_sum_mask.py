# misconception: clamping the sum to [0, 1] gives the 0/1 mask, and mask * a + (1 - mask) * b selects (true for integer batches only)
# source: plausible (torch.where written as arithmetic); the mask must be exactly 0 or 1 for every batch, a float sum between 0 and 1 included
# targets: eager_equal replay_follows_data
def step_graph_safe(x):
    h = launch(lambda v: [3 * a for a in v], x, name="scale")
    shifted = launch(lambda v: [a - 10 for a in v], h, name="shift")
    negated = launch(lambda v: [-a for a in v], h, name="negate")
    mask = launch(lambda v: [min(1, max(0, sum(v)))], h, name="mask")  # 1 when positive, 0 otherwise
    return launch(lambda m, a, b: [m[0] * ai + (1 - m[0]) * bi for ai, bi in zip(a, b)],
                  mask, shifted, negated, name="select")
