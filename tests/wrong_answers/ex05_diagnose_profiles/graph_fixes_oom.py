# misconception: a launch-bound step gains from a graph even when memory is short (graphs save memory)
# source: lesson 01 rule 6, lesson 06 mistake 3
# targets: diagnosis
def profile_speedup(p):
    work = [p["kernel_us"]] * p["kernels"] + ([p["comm_us"]] if p["comm_us"] else [])
    return predicted_speedup(work, cost=H200_COSTS.with_(launch_us=p["launch_us"]))


def diagnose(p):
    if profile_speedup(p) >= 1.2:
        return True, "launch-bound"
    if p["comm_us"] >= p["kernels"] * p["kernel_us"]:
        return False, "communication-bound"
    if p["memory_used"] + p["graph_pool"] > 1.0:
        return False, "out of memory"
    return False, "compute-bound"
