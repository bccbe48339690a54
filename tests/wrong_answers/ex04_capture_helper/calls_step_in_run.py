# misconception: run(x) may call the step eagerly: the graph was captured, that is what counts
# source: lesson 02 (the launch tax); was a graph replayed at all?
# targets: toy_replays cuda_structure
def capture_step(dev, step, example, warmup=2):
    static_x = dev.tensor(example)
    for _ in range(warmup):
        step(static_x)
    g = ToyGraph(dev, name="step")
    with graph(g):
        static_out = step(static_x)

    def run(x):
        return step(dev.tensor(x)).tolist()

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
        return step(x).clone()

    return run
