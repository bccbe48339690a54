# misconception: EOS in tok already says the sequence is finished, so done need not be written (reading tok is enough)
# source: lesson 08, "End-of-sequence on the device" (the flag is the loop's state: a sequence may start from the EOS token and is not finished until done says so)
# targets: tokens
def capture_k_steps(dev, tok, done, k):
    out = dev.tensor([EOS] * k)
    g = tg.ToyGraph(dev, name=f"{k} decode steps")
    with tg.graph(g):
        for i in range(k):
            tg.launch(lambda t, d: [EOS if d[0] or t[0] == EOS else next_token(t)[0]], tok, done, out=tok)
            tg.launch(lambda t: list(t), tok, out=out[i:i + 1])
    return g, out
