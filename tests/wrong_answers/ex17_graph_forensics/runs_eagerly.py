# misconception: once graph and eager disagree, the safe fix is to run the step eagerly (the graph was the bug)
# source: lesson 11 (reproduce with graphs on and off to find the cause, then fix the capture); lesson 02 (the launch tax a graph removes)
# targets: one_capture_many_replays
def first_divergence(eager, replayed, tol=1e-6):
    for name, want in eager.items():
        got = replayed.get(name)
        if got is None or len(got) != len(want):
            return name
        if any(abs(g - w) > tol for g, w in zip(got, want)):
            return name
    return None


def capture_step(dev, x, t):
    static_x, static_t = dev.tensor(x), dev.tensor(t)

    def run(values, temperature):
        static_x.copy_(values)
        static_t.copy_([temperature])
        outs = step_eager(dev, static_x, static_t)
        return {name: buf.tolist() for name, buf in outs.items()}
    return run
