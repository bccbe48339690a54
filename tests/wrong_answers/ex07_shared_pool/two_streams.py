# misconception: graphs of one pool can overlap on two streams to serve faster
# source: lesson 03/04 (graphs sharing a pool must never run at the same time)
# targets: values one_at_a_time
def serve(pool, batches):
    results = []
    for i, batch in enumerate(batches):
        bucket = bucket_for(len(batch), pool.buckets)
        out = pool.replay(bucket, pad_to(batch, bucket), stream="main" if i % 2 == 0 else "side")
        results.append(out[:len(batch)])
    return [r.tolist() for r in results]
