# misconception: a step that reads EOS in tok has finished, so masking on the token as well as on done is harmless
# source: lesson 08, "End-of-sequence on the device" (done alone says a sequence is finished; a sequence may start from the EOS token with done = 0)
# targets: tokens
def capture_k_steps(dev, tok, done, k):
    out = dev.tensor([EOS] * k)
    g = tg.ToyGraph(dev, name=f"{k} decode steps")
    with tg.graph(g):
        for i in range(k):
            tg.launch(lambda t, d: [EOS if d[0] or t[0] == EOS else next_token(t)[0]], tok, done, out=tok)
            tg.launch(lambda t, d: [int(d[0] == 1 or t[0] == EOS)], tok, done, out=done)
            tg.launch(lambda t: list(t), tok, out=out[i:i + 1])
    return g, out
