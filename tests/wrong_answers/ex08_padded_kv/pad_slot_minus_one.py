# misconception: -1 marks a padded row and kernels skip it (true of vLLM's PAD_SLOT_ID, not of every kernel)
# source: vLLM's PAD_SLOT_ID; this exercise's cache has a scratch row instead
# targets: next_tokens rows_written
def pad_slots(slots, bucket):
    return list(slots) + [-1] * (bucket - len(slots))


def decode_padded(graphs, tokens, slots):
    bucket = bucket_for(len(tokens), sorted(graphs))
    entry = graphs[bucket]
    entry["tokens"].copy_(pad_to(list(tokens), bucket, PAD_TOKEN))
    entry["slots"].copy_(pad_slots(slots, bucket))
    out = entry["graph"].replay()
    return out[:len(tokens)].tolist()

