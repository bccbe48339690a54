# misconception: one results list, refilled at every call, is as safe as a fresh one (the values in it are copies)
# source: lesson 01 rule 2 (a buffer reused by the next call overwrites what the previous caller kept), here with a Python list
# targets: still_right_after_one_more_replay
_results = []


def replay_all(g, batches):
    _results.clear()  # reuse one list, as the graph reuses its static output
    for batch in batches:
        _results.append(g.replay(batch).tolist())
    return _results
