# misconception: the final output is what matters: if the last layer differs, that is the layer to blame
# source: lesson 11 (compare graph and eager layer by layer: every layer after the first wrong one is wrong too, and a wrong layer can be masked later)
# targets: finds_first_layer
def first_divergence(eager, replayed, tol=1e-6):
    last = list(eager)[-1]
    got, want = replayed.get(last), eager[last]
    if got is None or len(got) != len(want) or any(abs(g - w) > tol for g, w in zip(got, want)):
        return last
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

