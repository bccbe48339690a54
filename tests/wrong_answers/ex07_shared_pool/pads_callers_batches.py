# misconception: padding each batch in place before its replay is fine: the results are cut back to the batch's own rows anyway
# source: lesson 04, common mistakes ("Returning the padded rows"): the caller still needs its real rows, and its batches unchanged
# targets: values
def serve(pool, batches):
    results = []
    for batch in batches:
        n = len(batch)
        bucket = bucket_for(n, pool.buckets)
        batch.extend([0] * (bucket - n))  # pad in place
        out = pool.replay(bucket, batch)
        results.append(out[:n].tolist())
    return results
