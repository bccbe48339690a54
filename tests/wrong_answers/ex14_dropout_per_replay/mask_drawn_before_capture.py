# misconception: draw the dropout mask once, before the capture, and let the graph apply it at every replay
# source: lesson 10 (random numbers in a graph); PyTorch's CUDA graph notes (RNG is safe only when drawn in capture)
# targets: new_mask_per_replay same_as_eager offset_advances
def make_dropout_step(dev, gen, example, p):
    static_x = dev.tensor(example)
    u = rand(gen, len(example))  # drawn eagerly, once: a buffer whose contents never change
    g = ToyGraph(dev, name="dropout")
    with graph(g):
        static_out = launch(lambda v, r: dropout(v, r, p), static_x, u, name="dropout")

    def run(x):
        static_x.copy_(x)
        g.replay()
        return static_out.tolist()

    return run
