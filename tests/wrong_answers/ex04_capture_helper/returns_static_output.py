# misconception: the graph's output is the caller's to keep: no copy out
# source: lesson 01 rule 2, lesson 03 step 5
# targets: toy_copy_out cuda_structure
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
        return static_out

    return run


def capture_cuda(step, example, warmup=3):
    import torch

    static_x = example.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            step(static_x)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_out = step(static_x)

    def run(x):
        static_x.copy_(x)
        g.replay()
        return static_out

    return run
