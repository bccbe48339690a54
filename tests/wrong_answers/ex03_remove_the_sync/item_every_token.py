# misconception: .item() per token is a cheap read; only the final list needs the values
# source: lesson 05 (the cost of .item() in the token loop), lesson 06 mistake 2
# targets: one_sync
def decode_step(tok):
    return launch(next_token, tok, name="model")


def decode_on_device(dev, first_token, steps):
    tok = dev.tensor([first_token])
    tokens = []
    for _ in range(steps):
        tok = decode_step(tok)
        tokens.append(tok.item())
    return tokens
