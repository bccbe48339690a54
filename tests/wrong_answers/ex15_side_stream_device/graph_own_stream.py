# misconception: warming up on a side stream of the right device is enough; torch.cuda.graph picks a fitting stream
# source: pytorch/pytorch#87794 (the issue's own recipe); torch/cuda/graphs.py (graph.default_capture_stream)
# targets: captures_on_device
def capture_on(device, step, example, warmup=2):
    import torch

    static_x = example.clone()
    side = torch.cuda.Stream(device=device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(warmup):
            step(static_x)
    torch.cuda.current_stream(device).wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_out = step(static_x)

    def run(x):
        static_x.copy_(x)
        g.replay()
        return static_out.clone()

    return run
