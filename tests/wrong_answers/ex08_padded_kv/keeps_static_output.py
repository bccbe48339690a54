# misconception: the slice of the static output is the caller's to keep
# source: lesson 01 rule 2; a slice of a buffer is a view of it
# targets: next_tokens copy_out
def pad_slots(slots, bucket):
    return list(slots) + [SCRATCH_SLOT] * (bucket - len(slots))


def decode_padded(graphs, tokens, slots):
    bucket = bucket_for(len(tokens), sorted(graphs))
    entry = graphs[bucket]
    entry["tokens"].copy_(pad_to(list(tokens), bucket, PAD_TOKEN))
    entry["slots"].copy_(pad_slots(slots, bucket))
    return entry["graph"].replay()[:len(tokens)]
