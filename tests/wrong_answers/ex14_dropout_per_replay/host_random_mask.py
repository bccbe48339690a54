# misconception: draw the mask on the host with Python's random at every run and copy it in: new numbers each time
# source: lesson 10 (the generator's stream, drawn on the device; a host draw is neither the generator's nor free)
# targets: same_as_eager offset_advances
import random as _host_random


def make_dropout_step(dev, gen, example, p):
    host = _host_random.Random(gen.seed)
    static_x = dev.tensor(example)
    static_u = dev.tensor([0.0] * len(example))
    g = ToyGraph(dev, name="dropout")
    with graph(g):
        static_out = launch(lambda v, r: dropout(v, r, p), static_x, static_u, name="dropout")

    def run(x):
        static_x.copy_(x)
        static_u.copy_([host.random() for _ in x])  # a new mask, from the host's generator
        g.replay()
        return static_out.tolist()

    return run
