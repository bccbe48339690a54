# misconception: a batch above every capture size runs in the largest graph, on every rank
# source: lesson 10 part 6 and lesson 04 (above the largest size there is no graph: every rank runs eagerly)
# targets: too_large toy_ranks
def plan_step(batch_sizes, capture_sizes):
    if not any(batch_sizes):
        return None
    largest = max(batch_sizes)
    fitting = [s for s in capture_sizes if s >= largest] or [max(capture_sizes)]
    return [min(fitting)] * len(batch_sizes)
