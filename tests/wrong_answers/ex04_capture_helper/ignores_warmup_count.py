# misconception: one warm-up call does every set-up, so the warmup count can be ignored
# source: lesson 03 step 2 (warm up a few times: some set-up, autotuning or DDP's, takes several calls); the helper's own warmup argument
# targets: toy_warmup
def capture_step(dev, step, example, warmup=2):
    static_x = dev.tensor(example)
    step(static_x)  # one call sets the step up
    g = ToyGraph(dev, name="step")
    with graph(g):
        static_out = step(static_x)

    def run(x):
        static_x.copy_(x)
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
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=side):
        static_out = step(static_x)

    def run(x):
        static_x.copy_(x)
        g.replay()
        return static_out.clone()

    return run
