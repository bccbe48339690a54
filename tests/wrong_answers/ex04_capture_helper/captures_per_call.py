# misconception: capturing inside run(x) keeps each call fresh
# source: lesson 03 (capture once; each capture holds its own pool)
# targets: toy_replays cuda_structure
def capture_step(dev, step, example, warmup=2):
    static_x = dev.tensor(example)
    for _ in range(warmup):
        step(static_x)

    def run(x):
        static_x.copy_(x)
        g = ToyGraph(dev, name="step")
        with graph(g):
            out = step(static_x)
        g.replay()
        return out.tolist()

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

    def run(x):
        static_x.copy_(x)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = step(static_x)
        g.replay()
        return out.clone()

    return run
