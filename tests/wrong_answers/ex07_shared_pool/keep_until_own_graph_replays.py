# misconception: an output stays valid until its own graph replays again; other graphs of the pool cannot touch it
# source: lesson 03/04 (an output must be read before any other graph of that pool replays)
# targets: values
def serve(pool, batches):
    kept = []
    for batch in batches:
        bucket = bucket_for(len(batch), pool.buckets)
        kept.append(pool.replay(bucket, pad_to(batch, bucket))[:len(batch)])
    return [k.tolist() for k in kept]
