# misconception: padding is always zeros, whatever value the caller asks for ("any pad value works")
# source: lesson 04, common mistakes (padding with values that change the real rows)
# targets: padding
def pick_bucket(batch_size, buckets):
    fitting = [b for b in buckets if b >= batch_size]
    return min(fitting) if fitting else None


def pad_batch(batch, size, pad_value=0):
    if len(batch) > size:
        raise ValueError("batch larger than the bucket")
    return list(batch) + [0] * (size - len(batch))
