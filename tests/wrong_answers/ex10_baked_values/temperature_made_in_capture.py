# misconception: a buffer made inside the capture block is as good as one made before it (only the kernels are recorded)
# source: lesson 03 (allocate static inputs before capture); on a GPU the fill that makes it (torch.full, torch.ones) is captured and replayed, resetting the temperature at every replay
# targets: follows_temperature
def make_tempered_step(dev, example):
    static_x = dev.tensor(example)
    g = ToyGraph(dev, name="tempered")
    with graph(g):
        static_t = dev.tensor([1.0])  # made during the capture: on a GPU its fill is a node of the graph
        static_out = launch(lambda v, t: [a / t[0] for a in v], static_x, static_t, name="divide")

    def run(x):
        static_x.copy_(x)
        g.replay()
        return static_out.tolist()

    def set_temperature(t):
        static_t.copy_([t])

    return run, set_temperature
