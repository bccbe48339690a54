# misconception: a dict's keys have no order, so walk the layer names sorted to be deterministic
# source: plausible (old Python dicts were unordered); lesson 11 walks the layers in the order the step runs them
# targets: finds_first_layer
def first_divergence(eager, replayed, tol=1e-6):
    for name in sorted(eager):
        want, got = eager[name], replayed.get(name)
        if got is None or len(got) != len(want) or any(abs(g - w) > tol for g, w in zip(got, want)):
            return name
    return None


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

