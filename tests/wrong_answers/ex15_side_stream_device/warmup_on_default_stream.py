# misconception: the warm-up can run anywhere on the right device; only the capture needs a side stream
# source: lesson 03 (warm up on a side stream: the default stream's caches and workspaces are not the capture's)
# targets: warmup_on_side_stream
def capture_on(device, step, example, warmup=2):
    import torch

    with torch.cuda.device(device):
        static_x = example.clone()
        for _ in range(warmup):
            step(static_x)
        side = torch.cuda.Stream(device=device)
        side.wait_stream(torch.cuda.current_stream(device))
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=side):
            static_out = step(static_x)

    def run(x):
        static_x.copy_(x)
        g.replay()
        return static_out.clone()

    return run
