# misconception: any slot will do for a padded row, rows are independent (pad with slot 0)
# source: lesson 04 as first written ("any pad value works")
# targets: live_rows_untouched rows_written
def pad_slots(slots, bucket):
    return list(slots) + [0] * (bucket - len(slots))


def decode_padded(graphs, tokens, slots):
    bucket = bucket_for(len(tokens), sorted(graphs))
    entry = graphs[bucket]
    entry["tokens"].copy_(pad_to(list(tokens), bucket, PAD_TOKEN))
    entry["slots"].copy_(pad_slots(slots, bucket))
    out = entry["graph"].replay()
    return out[:len(tokens)].tolist()

