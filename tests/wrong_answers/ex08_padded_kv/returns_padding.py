# misconception: the caller can ignore the padded rows' next tokens
# source: lesson 04 common mistakes (returning the padded rows)
# targets: next_tokens
def pad_slots(slots, bucket):
    return list(slots) + [SCRATCH_SLOT] * (bucket - len(slots))


def decode_padded(graphs, tokens, slots):
    bucket = bucket_for(len(tokens), sorted(graphs))
    entry = graphs[bucket]
    entry["tokens"].copy_(pad_to(list(tokens), bucket, PAD_TOKEN))
    entry["slots"].copy_(pad_slots(slots, bucket))
    return entry["graph"].replay().tolist()
