# misconception: a graph replays the very same kernels, so its outputs equal eager's bit for bit: compare with ==
# source: lesson 11 (compare within a tolerance: another kernel choice or summation order changes the last bits)
# targets: tolerance
def first_divergence(eager, replayed, tol=1e-6):
    for name, want in eager.items():
        if replayed.get(name) != want:
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

