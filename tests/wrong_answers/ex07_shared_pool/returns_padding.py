# misconception: the padded rows' results are harmless to hand back
# source: lesson 04 common mistakes (returning the padded rows)
# targets: values
def serve(pool, batches):
    results = []
    for batch in batches:
        bucket = bucket_for(len(batch), pool.buckets)
        results.append(pool.replay(bucket, pad_to(batch, bucket)).tolist())
    return results
