# misconception: removing the sync means computing the tokens on the CPU (no device reads, so no syncs)
# source: plausible; the model runs on the GPU, its kernels must still be launched
# targets: model_on_device
def decode_step(tok):
    return launch(next_token, tok, name="model")


def decode_on_device(dev, first_token, steps):
    out, t = [], first_token
    for _ in range(steps):
        t = (t * 31 + 7) % 97
        out.append(t)
    dev.synchronize()
    return out
