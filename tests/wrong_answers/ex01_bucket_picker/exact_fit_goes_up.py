# misconception: a batch that exactly fills a bucket needs the next one up ("there must be room to spare")
# source: lesson 04, "One batch, one bucket"
# targets: smallest_bucket
def pick_bucket(batch_size, buckets):
    fitting = [b for b in buckets if b > batch_size]
    return min(fitting) if fitting else None


def pad_batch(batch, size, pad_value=0):
    if len(batch) > size:
        raise ValueError("batch larger than the bucket")
    return list(batch) + [pad_value] * (size - len(batch))
