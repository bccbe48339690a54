# misconception: torch.cuda.set_device(device) first, and every stream lands on the right GPU (nothing else changes)
# source: torch.cuda.set_device's docs ("Usage of this function is discouraged in favor of device")
# targets: leaves_process_as_found
def capture_on(device, step, example, warmup=2):
    import torch

    torch.cuda.set_device(device)
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
