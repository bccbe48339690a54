# misconception: indexing a device buffer (tok[0]) is not a sync, only .item() is
# source: lesson 01 (rule 4: any host read of device memory waits for the GPU)
# targets: one_sync
def decode_step(tok):
    return launch(next_token, tok, name="model")


def decode_on_device(dev, first_token, steps):
    tok = dev.tensor([first_token])
    tokens = []
    for _ in range(steps):
        tok = decode_step(tok)
        tokens.append(tok[0])
    return tokens
