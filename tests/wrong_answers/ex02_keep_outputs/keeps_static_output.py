# misconception: replay returns a fresh result each time, so keeping it is safe
# source: lesson 01 rule 2, lesson 03 step 5
# targets: values_after_all_replays still_right_after_one_more_replay
def replay_all(g, batches):
    return [g.replay(batch) for batch in batches]
