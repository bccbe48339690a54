# misconception: new data reaches the graph by rebinding the input name (static_x = x)
# source: lesson 03 common mistakes (passing a new tensor instead of copying into the static input)
# targets: toy_copy_in cuda_structure
def capture_step(dev, step, example, warmup=2):
    static_x = dev.tensor(example)
    for _ in range(warmup):
        step(static_x)
    g = ToyGraph(dev, name="step")
    with graph(g):
        static_out = step(static_x)

    def run(x):
        nonlocal static_x
        static_x = dev.tensor(x)
        g.replay()
        return static_out.tolist()

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
        nonlocal static_x
        static_x = x.clone()
        g.replay()
        return static_out.clone()

    return run
