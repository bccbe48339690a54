# misconception: copy an output out only when the same bucket is about to replay again
# source: plausible reading of "the next replay overwrites the static output" (of the same graph only)
# targets: values
def serve(pool, batches):
    results, last = [], {}
    for i, batch in enumerate(batches):
        bucket = bucket_for(len(batch), pool.buckets)
        if bucket in last:
            j = last[bucket]
            results[j] = results[j].tolist()
        out = pool.replay(bucket, pad_to(batch, bucket))
        results.append(out[:len(batch)])
        last[bucket] = i
    return [r if isinstance(r, list) else r.tolist() for r in results]
