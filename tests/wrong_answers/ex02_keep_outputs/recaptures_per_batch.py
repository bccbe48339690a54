# misconception: a fresh graph per batch gives fresh outputs (capture per call, paying capture and a pool each time)
# source: lesson 03 (capture once, replay many times)
# targets: one_replay_per_batch
from toygraph import ToyGraph


def replay_all(g, batches):
    out = []
    for batch in batches:
        fresh = ToyGraph(name="fresh")
        for op in g.ops:
            fresh.record(op)
        out.append(fresh.replay(batch))
    return out
