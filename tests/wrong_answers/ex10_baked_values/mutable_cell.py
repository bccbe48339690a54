# misconception: a mutable Python container (a list) read by the kernel is shared with the graph, so mutating it works
# source: plausible; capture bakes what the kernel reads, containers included
# targets: follows_temperature
def make_tempered_step(dev, example):
    static_x = dev.tensor(example)
    temp = [1.0]
    g = ToyGraph(dev, name="tempered")
    with graph(g):
        static_out = launch(lambda v: [a / temp[0] for a in v], static_x)

    def run(x):
        static_x.copy_(x)
        g.replay()
        return static_out.tolist()

    def set_temperature(t):
        temp[0] = t

    return run, set_temperature
