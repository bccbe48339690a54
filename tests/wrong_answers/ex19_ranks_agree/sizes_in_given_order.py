# misconception: capture sizes come sorted, so the first one that fits is the smallest
# source: the exercise's text (capture sizes in any order); lesson 04 (the smallest bucket that holds the batch)
# targets: one_size
def plan_step(batch_sizes, capture_sizes):
    if not any(batch_sizes):
        return None
    largest = max(batch_sizes)
    for s in capture_sizes:
        if s >= largest:
            return [s] * len(batch_sizes)
    return ["eager"] * len(batch_sizes)
