# misconception: random ops cannot be captured, so run dropout eagerly at every step
# source: lesson 10 (PyTorch registers the generator with the graph: dropout is captured and differs per replay)
# targets: one_graph
def make_dropout_step(dev, gen, example, p):
    def run(x):
        u = rand(gen, len(x))
        return launch(lambda v, r: dropout(v, r, p), dev.tensor(x), u, name="dropout").tolist()

    return run
