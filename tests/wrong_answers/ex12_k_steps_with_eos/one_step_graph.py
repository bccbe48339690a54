# misconception: K steps per graph means replaying a one-step graph K times
# source: lesson 08, "K decode steps in one graph"
# targets: tokens one_launch_per_k_tokens finished_and_restarted
def capture_k_steps(dev, tok, done, k):
    out = dev.tensor([EOS])
    g = tg.ToyGraph(dev, name="one decode step")
    with tg.graph(g):
        tg.launch(lambda t, d: [EOS if d[0] else next_token(t)[0]], tok, done, out=tok)
        tg.launch(lambda t, d: [int(d[0] == 1 or t[0] == EOS)], tok, done, out=done)
        tg.launch(lambda t: list(t), tok, out=out)
    return g, out
