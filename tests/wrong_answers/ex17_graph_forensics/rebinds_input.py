# misconception: new data reaches the graph by making a new buffer under the input's name
# source: lesson 11 (an input rebound instead of copied into the captured buffer); lesson 03 common mistakes
# targets: replays_match_eager
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
    g = ToyGraph(dev, name="decode_step")
    with graph(g, check_input_liveness=True):
        outs = step_eager(dev, static_x, static_t)

    def run(values, temperature):
        nonlocal static_x, static_t
        static_x = dev.tensor(values)  # a new buffer: the graph still reads the old address
        static_t = dev.tensor([temperature])
        g.replay()
        return {name: buf.tolist() for name, buf in outs.items()}
    return run
