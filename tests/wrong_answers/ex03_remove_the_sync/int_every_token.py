# misconception: int(tok[0]) is a cheap conversion, not a sync, so reading each token as it comes is free
# source: lesson 01 (a value on the host waits for the GPU), lesson 05 (the cost of .item())
# targets: one_sync
def decode_step(tok):
    return launch(next_token, tok, name="model")


def decode_on_device(dev, first_token, steps):
    tok = dev.tensor([first_token])
    tokens = []
    for _ in range(steps):
        tok = decode_step(tok)
        tokens.append(int(tok[0]))
    return tokens
