# misconception: recapturing when the temperature changes is the way to change a baked value
# source: plausible; correct values, but a capture and a pool per change
# targets: captures_once
def make_tempered_step(dev, example):
    state = {}

    def capture(t):
        static_x = dev.tensor(example)
        g = ToyGraph(dev, name="tempered")
        with graph(g):
            static_out = launch(lambda v: [a / t for a in v], static_x)
        state.update(x=static_x, g=g, out=static_out)

    capture(1.0)

    def run(x):
        state["x"].copy_(x)
        state["g"].replay()
        return state["out"].tolist()

    return run, capture
