# misconception: a generator can be registered with the graph once the capture has begun, just before its first draw
# source: lesson 10 (register_generator_state before capture; PyTorch refuses it during capture)
# targets: registered_generator
def make_dropout_step(dev, gen, example, p):
    static_x = dev.tensor(example)
    g = ToyGraph(dev, name="dropout")
    with graph(g):
        if not gen.default:
            g.register_generator_state(gen)  # too late: the capture has begun
        u = rand(gen, len(example))
        static_out = launch(lambda v, r: dropout(v, r, p), static_x, u, name="dropout")

    def run(x):
        static_x.copy_(x)
        g.replay()
        return static_out.tolist()

    return run
