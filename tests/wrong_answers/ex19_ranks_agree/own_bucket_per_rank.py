# misconception: each rank pads to the bucket of its own batch, as one GPU does
# source: lesson 10 part 6 (ranks that pad to their own buckets replay collectives of different sizes: a hang); lesson 04
# targets: one_size toy_ranks
def plan_step(batch_sizes, capture_sizes):
    if not any(batch_sizes):
        return None
    sizes = sorted(capture_sizes)
    if max(batch_sizes) > sizes[-1]:
        return ["eager"] * len(batch_sizes)
    return [min(s for s in sizes if s >= max(n, 1)) for n in batch_sizes]
