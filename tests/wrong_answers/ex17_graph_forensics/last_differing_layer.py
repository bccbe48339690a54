# misconception: the layer to blame is the deepest one that differs (where the error is largest)
# source: lesson 11 (the first layer that differs points at the cause; the ones after it only inherit its error)
# targets: finds_first_layer
def first_divergence(eager, replayed, tol=1e-6):
    found = None
    for name, want in eager.items():
        got = replayed.get(name)
        if got is None or len(got) != len(want) or any(abs(g - w) > tol for g, w in zip(got, want)):
            found = name
    return found


def capture_step(dev, x, t):
    static_x, static_t = dev.tensor(x), dev.tensor(t)
    g = ToyGraph(dev, name="decode_step")
    with graph(g, check_input_liveness=True):
        outs = step_eager(dev, static_x, static_t)

    def run(values, temperature):
        static_x.copy_(values)
        static_t.copy_([temperature])
        g.replay()
        return {name: buf.tolist() for name, buf in outs.items()}
    return run

