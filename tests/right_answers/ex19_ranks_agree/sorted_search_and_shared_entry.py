# way: walks the sorted sizes with next(...) and a default of "eager", one shared entry for every rank; no work tested with all()
# source: lesson 10 part 6 (shared_bucket: the bucket of the largest batch, for every rank); toygraph.ranks.shared_bucket
def plan_step(batch_sizes, capture_sizes):
    if all(n == 0 for n in batch_sizes):
        return None
    need = max(batch_sizes)
    entry = next((s for s in sorted(capture_sizes) if s >= need), "eager")
    return [entry for _ in batch_sizes]
