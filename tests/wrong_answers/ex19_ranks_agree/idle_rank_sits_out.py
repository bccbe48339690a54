# misconception: a rank with no requests has nothing to replay and sits the step out
# source: lesson 10 part 6 (a rank that skips a replay leaves the others waiting; vLLM's execute_dummy_batch)
# targets: idle_ranks toy_ranks
def plan_step(batch_sizes, capture_sizes):
    if not any(batch_sizes):
        return None
    largest = max(batch_sizes)
    fitting = [s for s in capture_sizes if s >= largest]
    if not fitting:
        return ["eager" if n else None for n in batch_sizes]
    return [min(fitting) if n else None for n in batch_sizes]
