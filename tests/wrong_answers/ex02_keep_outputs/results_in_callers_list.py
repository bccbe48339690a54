# misconception: the batches are consumed once replayed, so their list can hold the results (no new list to allocate)
# source: plausible (in-place reuse of the input, as an in-place op); the caller still owns its batches
# targets: values_after_all_replays
def replay_all(g, batches):
    for i, batch in enumerate(batches):
        batches[i] = g.replay(batch).tolist()  # each batch's slot now holds its result
    return batches
