# misconception: a batch above the largest bucket goes to the largest bucket (and is cut to fit) instead of running eagerly
# source: lesson 04, "Above the largest bucket"
# targets: above_largest padding
def pick_bucket(batch_size, buckets):
    fitting = [b for b in buckets if b >= batch_size]
    return min(fitting) if fitting else max(buckets)


def pad_batch(batch, size, pad_value=0):
    rows = list(batch)[:size]
    return rows + [pad_value] * (size - len(rows))
