# misconception: only the rank whose batch is too large runs eagerly; the others still replay their graphs
# source: lesson 10 part 6 (a batch too large for every bucket runs eagerly on every rank, together; graphed against eager is a mismatch)
# targets: too_large toy_ranks
def plan_step(batch_sizes, capture_sizes):
    if not any(batch_sizes):
        return None
    top = max(capture_sizes)
    small = [n for n in batch_sizes if n <= top]
    size = min(s for s in capture_sizes if s >= max(small)) if small else top
    return ["eager" if n > top else size for n in batch_sizes]
