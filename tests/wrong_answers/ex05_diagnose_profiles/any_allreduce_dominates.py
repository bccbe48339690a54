# misconception: a step with an all-reduce is communication-bound: tensor-parallel decode gains nothing from graphs
# source: lesson 06 mistake 4 (as first written), issue: collectives are captured in graphs
# targets: diagnosis
def profile_speedup(p):
    work = [p["kernel_us"]] * p["kernels"] + ([p["comm_us"]] if p["comm_us"] else [])
    return predicted_speedup(work, cost=H200_COSTS.with_(launch_us=p["launch_us"]))


def diagnose(p):
    if p["memory_used"] + p["graph_pool"] > 1.0:
        return False, "out of memory"
    if p["comm_us"] > 0:
        return False, "communication-bound"
    if profile_speedup(p) >= 1.2:
        return True, "launch-bound"
    if p["comm_us"] >= p["kernels"] * p["kernel_us"]:
        return False, "communication-bound"
    return False, "compute-bound"
