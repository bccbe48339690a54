# misconception: reseed the generator before each replay so that every replay starts from a known state
# source: lesson 10 (the generator's offset must move on at every replay; a reseed sets it back to 0)
# targets: new_mask_per_replay same_as_eager offset_advances
def make_dropout_step(dev, gen, example, p):
    seed = gen.seed
    static_x = dev.tensor(example)
    g = ToyGraph(dev, name="dropout")
    with graph(g):
        u = rand(gen, len(example))
        static_out = launch(lambda v, r: dropout(v, r, p), static_x, u, name="dropout")

    def run(x):
        gen.manual_seed(seed)  # "reproducible": every replay now draws the same numbers
        static_x.copy_(x)
        g.replay()
        return static_out.tolist()

    return run
