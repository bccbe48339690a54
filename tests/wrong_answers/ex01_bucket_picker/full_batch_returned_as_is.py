# misconception: a batch that already fills its bucket needs no padding, so the caller's own list can be handed back
# source: lesson 04, common mistakes: the padded batch is the graph's input, a new list; the caller still owns its rows
# targets: padding edge_cases
def pick_bucket(batch_size, buckets):
    fitting = [b for b in buckets if b >= batch_size]
    return min(fitting) if fitting else None


def pad_batch(batch, size, pad_value=0):
    if len(batch) > size:
        raise ValueError("batch larger than the bucket")
    if len(batch) == size:
        return batch  # an exact fit: nothing to pad, no copy needed
    return list(batch) + [pad_value] * (size - len(batch))
