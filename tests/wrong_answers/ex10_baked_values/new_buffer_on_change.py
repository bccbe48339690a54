# misconception: putting the new temperature in a new device buffer reaches the graph
# source: lesson 01 rule 1 (addresses are baked: copy into the captured buffer)
# targets: follows_temperature
def make_tempered_step(dev, example):
    static_x = dev.tensor(example)
    temp = dev.tensor([1.0])
    g = ToyGraph(dev, name="tempered")
    with graph(g):
        static_out = launch(lambda v, t: [a / t[0] for a in v], static_x, temp)

    def run(x):
        static_x.copy_(x)
        g.replay()
        return static_out.tolist()

    def set_temperature(t):
        nonlocal temp
        temp = dev.tensor([t])

    return run, set_temperature
