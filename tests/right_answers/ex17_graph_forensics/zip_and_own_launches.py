# way: compares with zip and a helper, checks lengths first; captures the layers by hand into buffers made with dev.empty
# source: lesson 11 (compare layer by layer; keep the graph's own inputs and copy into them)
def first_divergence(eager, replayed, tol=1e-6):
    def off(want, got):
        return got is None or len(got) != len(want) or max(
            (abs(w - g) for w, g in zip(want, got)), default=0.0) > tol

    return next((name for name in eager if off(eager[name], replayed.get(name))), None)


def capture_step(dev, x, t):
    own_x, own_t = dev.empty(len(x)), dev.empty(1)
    own_x.copy_(x)
    own_t.copy_(t)
    g = ToyGraph(dev, name="forensics")
    with graph(g, check_input_liveness=True):
        e = launch(embed, own_x, name="embed")
        s = launch(scale, e, own_t, name="scale")
        m = launch(mix, s, name="mix")
        h = launch(head, m, name="head")
    kept = list(zip(LAYERS, (e, s, m, h)))

    def run(values, temperature):
        own_x.copy_(list(values))
        own_t.copy_([float(temperature)])
        g.replay()
        return {name: buf.tolist() for name, buf in kept}
    return run
