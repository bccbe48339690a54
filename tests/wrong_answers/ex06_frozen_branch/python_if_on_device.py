# misconception: a Python `if` on the step's own data is fine inside a captured step
# source: lesson 01 rule 5, lesson 06 mistake 8
# targets: captures replay_follows_data
def step_graph_safe(x):
    h = launch(lambda v: [3 * a for a in v], x, name="scale")
    if sum(h) > 0:
        return launch(lambda v: [a - 10 for a in v], h, name="shift")
    return launch(lambda v: [-a for a in v], h, name="negate")
