# misconception: every step replays, so ranks with no requests at all replay the smallest graph
# source: the exercise's rule (given the agreed sizes, when no rank has work there is no step); lesson 10 part 6
# targets: idle_ranks
def plan_step(batch_sizes, capture_sizes):
    largest = max(batch_sizes)
    fitting = [s for s in capture_sizes if s >= max(largest, 1)]
    if not fitting:
        return ["eager"] * len(batch_sizes)
    return [min(fitting)] * len(batch_sizes)
