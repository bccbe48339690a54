# misconception: the ranks agree on the largest batch itself; any agreed size is a graph
# source: lesson 10 part 6 (one capture size: the smallest bucket that holds the largest batch); lesson 04 (a graph replays the size it captured)
# targets: one_size toy_ranks
def plan_step(batch_sizes, capture_sizes):
    if not any(batch_sizes):
        return None
    largest = max(batch_sizes)
    if largest > max(capture_sizes):
        return ["eager"] * len(batch_sizes)
    return [largest] * len(batch_sizes)
