# misconception: torch.cuda.current_stream() is the stream the step's work is on, so the side stream may wait on it (and it on the side stream) with no device named
# source: lesson 10 (each device has its own current stream; a process starts on cuda:0); pytorch/pytorch#87794
# targets: warmup_on_side_stream
def capture_on(device, step, example, warmup=2):
    import torch

    static_x = example.clone()
    side = torch.cuda.Stream(device=device)
    side.wait_stream(torch.cuda.current_stream())  # cuda:0's current stream, not the step's device's
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
