# misconception: one results list, refilled at every call, is as safe as a fresh one (the values in it are copies)
# source: lesson 03/04 (what is handed out must outlive the next use of the memory it came from), here with a Python list
# targets: values
_results = []


def serve(pool, batches):
    _results.clear()  # reuse one list, as the pool reuses its memory
    for batch in batches:
        bucket = bucket_for(len(batch), pool.buckets)
        out = pool.replay(bucket, pad_to(batch, bucket))
        _results.append(out[:len(batch)].tolist())
    return _results
