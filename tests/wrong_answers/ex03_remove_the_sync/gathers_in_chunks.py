# misconception: a gather kernel takes a bounded number of buffers, so gather 32 at a time (one read each) and it is still "one sync"
# source: plausible (kernel argument limits); lesson 05 measures a sync per read, however many values it brings back
# targets: one_sync
def decode_step(tok):
    return launch(next_token, tok, name="model")


def decode_on_device(dev, first_token, steps):
    tok = dev.tensor([first_token])
    kept = []
    for _ in range(steps):
        tok = decode_step(tok)
        kept.append(tok)
    tokens = []
    for i in range(0, len(kept), 32):  # at most 32 buffers per gather kernel
        tokens += launch(lambda *ts: [t[0] for t in ts], *kept[i:i + 32], name="gather").tolist()
    return tokens
