# misconception: the step can check `done` in Python while capturing
# source: lesson 08 (a host read of a device value is a sync, refused during capture)
# targets: tokens one_launch_per_k_tokens no_sync_in_replay finished_and_restarted
def capture_k_steps(dev, tok, done, k):
    out = dev.tensor([EOS] * k)
    g = tg.ToyGraph(dev, name=f"{k} decode steps")
    with tg.graph(g):
        for i in range(k):
            if done.item():
                tg.launch(lambda t: [EOS], tok, out=tok)
            else:
                tg.launch(next_token, tok, out=tok)
            tg.launch(lambda t, d: [int(d[0] == 1 or t[0] == EOS)], tok, done, out=done)
            tg.launch(lambda t: list(t), tok, out=out[i:i + 1])
    return g, out
