# misconception: a Python list of random numbers made when the step is built serves as the mask of every replay
# source: lesson 10; lessons 03 and 05 (Python values are baked at capture)
# targets: new_mask_per_replay same_as_eager
import random as _host_random


def make_dropout_step(dev, gen, example, p):
    mask = [_host_random.Random(gen.seed).random() for _ in example]
    static_x = dev.tensor(example)
    g = ToyGraph(dev, name="dropout")
    with graph(g):
        static_out = launch(lambda v: dropout(v, mask, p), static_x, name="dropout")

    def run(x):
        static_x.copy_(x)
        g.replay()
        return static_out.tolist()

    return run
