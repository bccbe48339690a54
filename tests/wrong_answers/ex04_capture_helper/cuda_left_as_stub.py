# misconception: the real-PyTorch half can stay unanswered on a machine without a GPU: its check cannot run there anyway
# source: issue: a CPU grader once gave the untouched capture_cuda full marks (a skipped check counted as passed)
# targets: cuda_structure
def capture_step(dev, step, example, warmup=2):
    static_x = dev.tensor(example)
    for _ in range(warmup):
        step(static_x)
    g = ToyGraph(dev, name="step")
    with graph(g):
        static_out = step(static_x)

    def run(x):
        static_x.copy_(x)
        g.replay()
        return static_out.tolist()

    return run


def capture_cuda(step, example, warmup=3):
    # YOUR CODE HERE
    raise NotImplementedError("the same helper with torch.cuda.graph: return its run function")
