# misconception: comparing one summary per layer (its sum) is as good as comparing every value
# source: plausible (checksums of activations); lesson 11 compares outputs value by value, where differences cannot cancel
# targets: finds_first_layer
def first_divergence(eager, replayed, tol=1e-6):
    for name, want in eager.items():
        got = replayed.get(name)
        if got is None or len(got) != len(want) or abs(sum(got) - sum(want)) > tol:
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

