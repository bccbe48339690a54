# misconception: a graph looks after every generator its kernels draw from, as it does the device's default one
# source: lesson 10 (register_generator_state: a generator other than the default must be registered before capture)
# targets: registered_generator
def make_dropout_step(dev, gen, example, p):
    static_x = dev.tensor(example)
    g = ToyGraph(dev, name="dropout")
    with graph(g):  # no g.register_generator_state(gen): fine for the default generator, refused for another one
        u = rand(gen, len(example))
        static_out = launch(lambda v, r: dropout(v, r, p), static_x, u, name="dropout")

    def run(x):
        static_x.copy_(x)
        g.replay()
        return static_out.tolist()

    return run
