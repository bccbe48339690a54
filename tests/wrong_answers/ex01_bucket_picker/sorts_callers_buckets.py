# misconception: sorting the caller's bucket list in place is harmless: the same buckets, only in order
# source: plausible (list.sort() is the usual way to sort); the bucket list is the caller's (an engine's config, its graphs kept in that order)
# targets: unsorted_buckets
def pick_bucket(batch_size, buckets):
    buckets.sort()  # sorted once, the first bucket that holds the batch is the smallest
    for b in buckets:
        if b >= batch_size:
            return b
    return None


def pad_batch(batch, size, pad_value=0):
    if len(batch) > size:
        raise ValueError("batch larger than the bucket")
    return list(batch) + [pad_value] * (size - len(batch))
