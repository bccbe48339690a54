# misconception: inside torch.cuda.device(device), torch.cuda.graph's own side stream is made on that device
# source: pytorch/pytorch#87794 (a comment's fix); torch/cuda/graphs.py (a class attribute, made once, then shared)
# targets: captures_on_device
def capture_on(device, step, example, warmup=2):
    import torch

    with torch.cuda.device(device):
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
        return static_out.clone()

    return run
