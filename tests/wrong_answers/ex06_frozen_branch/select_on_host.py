# misconception: selecting in Python after both branches ran on the device keeps the step on the device
# source: plausible; the selection reads device values, a sync that capture refuses
# targets: captures replay_follows_data
def step_graph_safe(x):
    h = launch(lambda v: [3 * a for a in v], x, name="scale")
    shifted = launch(lambda v: [a - 10 for a in v], h, name="shift")
    negated = launch(lambda v: [-a for a in v], h, name="negate")
    chosen = shifted.tolist() if sum(h.tolist()) > 0 else negated.tolist()
    return launch(lambda v: list(chosen), h, name="select")
