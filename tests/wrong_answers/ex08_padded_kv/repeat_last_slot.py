# misconception: padding with a copy of the last real row is harmless (it writes the same row again)
# source: plausible; the padded row writes its own (pad) key over the real row's
# targets: rows_written
def pad_slots(slots, bucket):
    return list(slots) + [slots[-1]] * (bucket - len(slots))


def decode_padded(graphs, tokens, slots):
    bucket = bucket_for(len(tokens), sorted(graphs))
    entry = graphs[bucket]
    entry["tokens"].copy_(pad_to(list(tokens), bucket, PAD_TOKEN))
    entry["slots"].copy_(pad_slots(slots, bucket))
    out = entry["graph"].replay()
    return out[:len(tokens)].tolist()

