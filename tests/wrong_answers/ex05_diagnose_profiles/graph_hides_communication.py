# misconception: a graph hides communication too: leave the all-reduce out of the step's GPU work
# source: lesson 06 mistake 4
# targets: speedup
def profile_speedup(p):
    work = [p["kernel_us"]] * p["kernels"]
    return predicted_speedup(work, cost=H200_COSTS.with_(launch_us=p["launch_us"]))


def diagnose(p):
    if p["memory_used"] + p["graph_pool"] > 1.0:
        return False, "out of memory"
    if profile_speedup(p) >= 1.2:
        return True, "launch-bound"
    if p["comm_us"] >= p["kernels"] * p["kernel_us"]:
        return False, "communication-bound"
    return False, "compute-bound"
