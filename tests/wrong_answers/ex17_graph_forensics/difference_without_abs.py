# misconception: a layer differs when replayed minus eager is above the tolerance (the sign does not matter)
# source: plausible (a one-sided test); lesson 11 compares the absolute difference
# targets: tolerance
def first_divergence(eager, replayed, tol=1e-6):
    for name, want in eager.items():
        got = replayed.get(name)
        if got is None or len(got) != len(want) or any(g - w > tol for g, w in zip(got, want)):
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

