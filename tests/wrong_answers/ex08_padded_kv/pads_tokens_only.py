# misconception: only the tokens need new data each step; the slots a graph was captured with will do
# source: lesson 03 (every input a replay reads must be copied into its static buffer)
# targets: rows_written
def pad_slots(slots, bucket):
    return list(slots) + [SCRATCH_SLOT] * (bucket - len(slots))


def decode_padded(graphs, tokens, slots):
    bucket = bucket_for(len(tokens), sorted(graphs))
    entry = graphs[bucket]
    entry["tokens"].copy_(pad_to(list(tokens), bucket, PAD_TOKEN))
    out = entry["graph"].replay()
    return out[:len(tokens)].tolist()
