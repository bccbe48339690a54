# misconception: a flag computed on the host from a copy of the data picks the branch at every replay
# source: this exercise's step_with_branch; lesson 01 rule 5
# targets: replay_follows_data
_positive = {"now": True}


def step_graph_safe(x):
    h = launch(lambda v: [3 * a for a in v], x, name="scale")
    flag = _positive["now"]
    return launch(lambda v: [a - 10 if flag else -a for a in v], h, name="branch")
