# misconception: torch.cuda.Stream() makes a stream on the device the work will run on
# source: pytorch/pytorch#87794; torch/cuda/streams.py (without device=, a stream is made on the current device)
# targets: captures_on_device warmup_on_side_stream
def capture_on(device, step, example, warmup=2):
    import torch

    static_x = example.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            step(static_x)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=side):
        static_out = step(static_x)

    def run(x):
        static_x.copy_(x)
        g.replay()
        return static_out.clone()

    return run
