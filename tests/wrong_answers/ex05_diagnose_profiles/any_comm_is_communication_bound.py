# misconception: a step with an all-reduce that a graph does not help is communication-bound, whatever the all-reduce costs
# source: lesson 06 mistake 4; the exercise's rule: communication-bound only when comm_us is at least the kernels' total time
# targets: diagnosis
def profile_speedup(p):
    work = [p["kernel_us"]] * p["kernels"] + ([p["comm_us"]] if p["comm_us"] else [])
    return predicted_speedup(work, cost=H200_COSTS.with_(launch_us=p["launch_us"]))


def diagnose(p):
    if p["memory_used"] + p["graph_pool"] > 1.0:
        return False, "out of memory"
    if profile_speedup(p) >= 1.2:
        return True, "launch-bound"
    if p["comm_us"] > 0:  # it has an all-reduce, and the graph did not help: the communication is to blame
        return False, "communication-bound"
    return False, "compute-bound"
