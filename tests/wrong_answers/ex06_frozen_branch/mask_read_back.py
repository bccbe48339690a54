# misconception: computing the mask on the device is enough; reading it back with .item() to pick the branch is fine
# source: lesson 03 (no syncs during capture), lesson 06 mistakes 2 and 8
# targets: captures replay_follows_data
def step_graph_safe(x):
    h = launch(lambda v: [3 * a for a in v], x, name="scale")
    shifted = launch(lambda v: [a - 10 for a in v], h, name="shift")
    negated = launch(lambda v: [-a for a in v], h, name="negate")
    mask = launch(lambda v: [1 if sum(v) > 0 else 0], h, name="mask")
    return shifted if mask.item() else negated
