# misconception: the step may write the next token over the one it was given (out=tok): one buffer, nothing to allocate
# source: plausible; lesson 03 (the input is the caller's: a step that overwrites it destroys what the caller still holds)
# targets: step_captures
def decode_step(tok):
    return launch(next_token, tok, name="model", out=tok)  # in place: the token buffer moves on


def decode_on_device(dev, first_token, steps):
    tok = dev.tensor([first_token])
    kept = []
    for _ in range(steps):
        decode_step(tok)
        kept.append(tok.clone())  # a device copy of this step's token: no sync
    return launch(lambda *ts: [t[0] for t in ts], *kept, name="gather").tolist()
