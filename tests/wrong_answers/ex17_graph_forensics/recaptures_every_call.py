# misconception: capturing afresh in every call keeps each replay right (new inputs, new temperature)
# source: lesson 11 (memory grows: every capture holds its own pool); lesson 03 (capture once, replay many times)
# targets: one_capture_many_replays
def first_divergence(eager, replayed, tol=1e-6):
    for name, want in eager.items():
        got = replayed.get(name)
        if got is None or len(got) != len(want):
            return name
        if any(abs(g - w) > tol for g, w in zip(got, want)):
            return name
    return None


def capture_step(dev, x, t):
    static_x, static_t = dev.tensor(x), dev.tensor(t)

    def run(values, temperature):
        static_x.copy_(values)
        static_t.copy_([temperature])
        g = ToyGraph(dev, name="decode_step")
        with graph(g, check_input_liveness=True):
            outs = step_eager(dev, static_x, static_t)
        g.replay()
        return {name: buf.tolist() for name, buf in outs.items()}
    return run
