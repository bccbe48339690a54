# misconception: graphs that share a pool must replay in the order they were captured (largest first)
# source: lesson 03 as first written (corrected by pytorch/pytorch#166975)
# targets: arrival_order
def serve(pool, batches):
    order = sorted(range(len(batches)), key=lambda i: -bucket_for(len(batches[i]), pool.buckets))
    results = [None] * len(batches)
    for i in order:
        batch = batches[i]
        bucket = bucket_for(len(batch), pool.buckets)
        out = pool.replay(bucket, pad_to(batch, bucket))
        results[i] = out[:len(batch)].tolist()
    return results
