# misconception: tok[0] is the token's value; keeping it per step gives the tokens without any sync
# source: lesson 01 (indexing a buffer gives a view on the device, as a tensor's index does)
# targets: same_tokens
def decode_step(tok):
    return launch(next_token, tok, name="model")


def decode_on_device(dev, first_token, steps):
    tok = dev.tensor([first_token])
    tokens = []
    for _ in range(steps):
        tok = decode_step(tok)
        tokens.append(tok[0])
    return tokens
