# misconception: the bucket list is sorted, so the first bucket that holds the batch is the smallest
# source: plausible (engines keep sorted lists; a config file need not)
# targets: unsorted_buckets
def pick_bucket(batch_size, buckets):
    for b in buckets:
        if b >= batch_size:
            return b
    return None


def pad_batch(batch, size, pad_value=0):
    if len(batch) > size:
        raise ValueError("batch larger than the bucket")
    return list(batch) + [pad_value] * (size - len(batch))
