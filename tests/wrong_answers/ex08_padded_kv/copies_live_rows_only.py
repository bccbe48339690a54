# misconception: the padded rows' static entries still hold the scratch slot from capture, so copying the batch's own rows in is enough
# source: lesson 03 (every input a replay reads must be copied in, every step: a padded entry keeps what an earlier, fuller batch left there)
# targets: live_rows_untouched
def pad_slots(slots, bucket):
    return list(slots) + [SCRATCH_SLOT] * (bucket - len(slots))


def decode_padded(graphs, tokens, slots):
    n = len(tokens)
    bucket = bucket_for(n, sorted(graphs))
    entry = graphs[bucket]
    entry["tokens"][:n].copy_(list(tokens))  # the padded tail was captured with PAD_TOKEN and SCRATCH_SLOT
    entry["slots"][:n].copy_(list(slots))
    out = entry["graph"].replay()
    return out[:n].tolist()
