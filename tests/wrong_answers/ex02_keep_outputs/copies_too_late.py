# misconception: copying the outputs once at the end is as good as copying each one out right away
# source: plausible: the copy is there, but after the next replay has already overwritten the earlier outputs
# targets: values_after_all_replays
def replay_all(g, batches):
    outs = [g.replay(batch) for batch in batches]
    return [list(out) for out in outs]
