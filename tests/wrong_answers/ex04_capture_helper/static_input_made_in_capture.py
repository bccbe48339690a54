# misconception: the static input belongs to the graph, so it is made inside the capture block (after a warm-up on a scratch copy)
# source: lesson 03 step 1 (allocate the static input before capture); on a GPU a tensor made during capture is filled by a node of the graph, and every replay fills it again over the data copied in
# targets: toy_copy_in cuda_structure
def capture_step(dev, step, example, warmup=2):
    scratch = dev.tensor(example)
    for _ in range(warmup):
        step(scratch)
    g = ToyGraph(dev, name="step")
    with graph(g):
        static_x = dev.tensor(example)  # the graph's own input, made with it
        static_out = step(static_x)

    def run(x):
        static_x.copy_(x)
        g.replay()
        return static_out.tolist()

    return run


def capture_cuda(step, example, warmup=3):
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        scratch = example.clone()
        for _ in range(warmup):
            step(scratch)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=side):
        static_x = example.clone()  # the graph's own input, made with it
        static_out = step(static_x)

    def run(x):
        static_x.copy_(x)
        g.replay()
        return static_out.clone()

    return run
