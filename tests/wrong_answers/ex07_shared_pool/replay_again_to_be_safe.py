# misconception: after another graph of the pool replayed, replaying your own graph again brings your output back
# source: plausible: fixes the values at the price of an extra replay per batch
# targets: arrival_order
def serve(pool, batches):
    results = []
    for batch in batches:
        bucket = bucket_for(len(batch), pool.buckets)
        pool.replay(bucket, pad_to(batch, bucket))
        out = pool.replay(bucket, pad_to(batch, bucket))
        results.append(out[:len(batch)].tolist())
    return results
