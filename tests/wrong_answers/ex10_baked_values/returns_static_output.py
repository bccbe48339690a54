# misconception: the static output can be handed out as the result
# source: lesson 01 rule 2
# targets: follows_temperature results_are_copies
def make_tempered_step(dev, example):
    static_x = dev.tensor(example)
    temp = dev.tensor([1.0])
    g = ToyGraph(dev, name="tempered")
    with graph(g):
        static_out = launch(lambda v, t: [a / t[0] for a in v], static_x, temp)

    def run(x):
        static_x.copy_(x)
        g.replay()
        return static_out

    def set_temperature(t):
        temp.copy_([t])

    return run, set_temperature
