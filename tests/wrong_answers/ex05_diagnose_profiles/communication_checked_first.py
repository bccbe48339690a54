# misconception: an all-reduce that takes at least the kernels' time rules the step out before any speedup is predicted
# source: lesson 06 mistake 4 (collectives are captured; a graph still removes the launches around them); the exercise: the 1.2x rule comes first, communication only explains a speedup that fell short
# targets: diagnosis
def profile_speedup(p):
    work = [p["kernel_us"]] * p["kernels"] + ([p["comm_us"]] if p["comm_us"] else [])
    return predicted_speedup(work, cost=H200_COSTS.with_(launch_us=p["launch_us"]))


def diagnose(p):
    if p["memory_used"] + p["graph_pool"] > 1.0:
        return False, "out of memory"
    if p["comm_us"] and p["comm_us"] >= p["kernels"] * p["kernel_us"]:
        return False, "communication-bound"  # the all-reduce dominates: nothing to gain
    if profile_speedup(p) >= 1.2:
        return True, "launch-bound"
    return False, "compute-bound"
