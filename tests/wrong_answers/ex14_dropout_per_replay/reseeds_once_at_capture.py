# misconception: reseeding the generator once, when the step is built, makes the run reproducible and still random per replay
# source: lesson 10 (replay k draws what the k-th eager step would from the generator's current offset; manual_seed sets that offset back to 0)
# targets: same_as_eager
def make_dropout_step(dev, gen, example, p):
    gen.manual_seed(gen.seed)  # start the stream from the beginning, once: reproducible runs
    static_x = dev.tensor(example)
    g = ToyGraph(dev, name="dropout")
    if not gen.default:
        g.register_generator_state(gen)
    with graph(g):
        u = rand(gen, len(example))
        static_out = launch(lambda v, r: dropout(v, r, p), static_x, u, name="dropout")

    def run(x):
        static_x.copy_(x)
        g.replay()
        return static_out.tolist()

    return run
