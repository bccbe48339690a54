# way: PyTorch's CUDA-semantics recipe: warm up on one side stream, capture on another, both on the step's device
# source: docs.pytorch.org/docs/stable/notes/cuda.html (whole-network capture), lesson 03
def capture_on(device, step, example, warmup=2):
    import torch

    with torch.cuda.device(device):
        static_x = example.clone()
        warm = torch.cuda.Stream(device=device)
        warm.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(warm):
            for _ in range(warmup):
                step(static_x)
        torch.cuda.current_stream(device).wait_stream(warm)
        g = torch.cuda.CUDAGraph()
        capture = torch.cuda.Stream(device=device)
        capture.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.graph(g, stream=capture):
            static_out = step(static_x)

    def run(x):
        static_x.copy_(x)
        g.replay()
        return static_out.clone()

    return run
