# misconception: a replay reads the Python value a kernel uses afresh, so rebinding it changes the graph
# source: lessons 03 and 05 (Python values are baked at capture)
# targets: follows_temperature
TEMPERATURE = 1.0


def make_tempered_step(dev, example):
    static_x = dev.tensor(example)
    g = ToyGraph(dev, name="tempered")
    with graph(g):
        static_out = launch(lambda v: [a / TEMPERATURE for a in v], static_x)

    def run(x):
        static_x.copy_(x)
        g.replay()
        return static_out.tolist()

    def set_temperature(t):
        global TEMPERATURE
        TEMPERATURE = t

    return run, set_temperature
