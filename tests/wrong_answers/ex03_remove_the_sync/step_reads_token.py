# misconception: the step may read its token back (e.g. to log it) as long as the loop syncs once
# source: lesson 03 (no syncs during capture), lesson 06 mistake 2
# targets: step_captures
def decode_step(tok):
    nxt = launch(next_token, tok, name="model")
    nxt.item()  # "just to check it"
    return nxt


def decode_on_device(dev, first_token, steps):
    tok = dev.tensor([first_token])
    kept = []
    for _ in range(steps):
        tok = launch(next_token, tok, name="model")
        kept.append(tok)
    return launch(lambda *ts: [t[0] for t in ts], *kept, name="gather").tolist()
