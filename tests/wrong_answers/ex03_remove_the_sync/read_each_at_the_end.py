# misconception: a sync costs nothing once the loop is over, so reading each kept buffer at the end is "one sync"
# source: plausible; lesson 05 measures a sync per read
# targets: one_sync
def decode_step(tok):
    return launch(next_token, tok, name="model")


def decode_on_device(dev, first_token, steps):
    tok = dev.tensor([first_token])
    kept = []
    for _ in range(steps):
        tok = decode_step(tok)
        kept.append(tok)
    return [t.item() for t in kept]
