# misconception: a batch that exactly fills a capture size needs the next size up
# source: lesson 04 (a size that fits exactly is used as it is); the exercise's text
# targets: one_size too_large
def plan_step(batch_sizes, capture_sizes):
    if not any(batch_sizes):
        return None
    largest = max(batch_sizes)
    fitting = [s for s in capture_sizes if s > largest]
    if not fitting:
        return ["eager"] * len(batch_sizes)
    return [min(fitting)] * len(batch_sizes)
