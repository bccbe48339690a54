# misconception: the temperature is a plain number, so the layer can read it from Python at every replay
# source: lesson 11 (a Python value read at capture is baked into the graph); lesson 06 (baked values); toygraph.freeze
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
    static_x = dev.tensor(x)
    temperature = t.tolist()[0]
    g = ToyGraph(dev, name="decode_step")
    with graph(g, check_input_liveness=True):
        outs = {}
        h = outs["embed"] = launch(embed, static_x, name="embed")
        h = outs["scale"] = launch(lambda v: [a / temperature for a in v], h, name="scale")
        h = outs["mix"] = launch(mix, h, name="mix")
        outs["head"] = launch(head, h, name="head")

    def run(values, new_temperature):
        nonlocal temperature
        static_x.copy_(values)
        temperature = new_temperature  # rebinds the name; the graph baked the old value
        g.replay()
        return {name: buf.tolist() for name, buf in outs.items()}
    return run
