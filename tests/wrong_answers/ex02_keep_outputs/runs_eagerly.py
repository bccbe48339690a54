# misconception: the graph is an optimisation the answer can skip: compute the outputs eagerly instead of replaying
# source: lesson 02 (the launch tax a graph removes); "was a graph replayed at all?"
# targets: one_replay_per_batch
def replay_all(g, batches):
    out = []
    for batch in batches:
        values = list(batch)
        for op in g.ops:
            values = list(op(values))
        out.append(values)
    return out
