# misconception: the launch cost is a constant of the GPU: the default price serves every profile
# source: lesson 02 (the launch cost depends on the machine and the framework)
# targets: speedup
def profile_speedup(p):
    work = [p["kernel_us"]] * p["kernels"] + ([p["comm_us"]] if p["comm_us"] else [])
    return predicted_speedup(work, cost=H200_COSTS)


def diagnose(p):
    if p["memory_used"] + p["graph_pool"] > 1.0:
        return False, "out of memory"
    if profile_speedup(p) >= 1.2:
        return True, "launch-bound"
    if p["comm_us"] >= p["kernels"] * p["kernel_us"]:
        return False, "communication-bound"
    return False, "compute-bound"
