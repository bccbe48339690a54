# misconception: rank 0 leads: every rank replays the bucket of rank 0's batch
# source: lesson 10 part 6 (the ranks agree on the LARGEST batch, so that every rank's requests fit)
# targets: one_size idle_ranks toy_ranks
def plan_step(batch_sizes, capture_sizes):
    if not any(batch_sizes):
        return None
    if max(batch_sizes) > max(capture_sizes):
        return ["eager"] * len(batch_sizes)
    size = min(s for s in capture_sizes if s >= max(batch_sizes[0], 1))
    return [size] * len(batch_sizes)
