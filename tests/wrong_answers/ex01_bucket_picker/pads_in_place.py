# misconception: padding the caller's list in place is fine, the padded rows are dropped later anyway
# source: lesson 04, common mistakes ("Returning the padded rows"): the caller still needs its real rows
# targets: padding
def pick_bucket(batch_size, buckets):
    fitting = [b for b in buckets if b >= batch_size]
    return min(fitting) if fitting else None


def pad_batch(batch, size, pad_value=0):
    if len(batch) > size:
        raise ValueError("batch larger than the bucket")
    batch.extend([pad_value] * (size - len(batch)))
    return batch
