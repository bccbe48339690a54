# misconception: once captured, a finished sequence stops by itself
# source: lesson 08, "End-of-sequence on the device"
# targets: tokens finished_and_restarted
def capture_k_steps(dev, tok, done, k):
    out = dev.tensor([EOS] * k)
    g = tg.ToyGraph(dev, name=f"{k} decode steps")
    with tg.graph(g):
        for i in range(k):
            tg.launch(next_token, tok, out=tok)
            tg.launch(lambda t: list(t), tok, out=out[i:i + 1])
    return g, out
