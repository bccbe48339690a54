# misconception: many kernels means launch-bound, whatever their length
# source: plausible: counting kernels instead of comparing their time with the launch cost
# targets: diagnosis
def profile_speedup(p):
    work = [p["kernel_us"]] * p["kernels"] + ([p["comm_us"]] if p["comm_us"] else [])
    return predicted_speedup(work, cost=H200_COSTS.with_(launch_us=p["launch_us"]))


def diagnose(p):
    if p["memory_used"] + p["graph_pool"] > 1.0:
        return False, "out of memory"
    if p["kernels"] >= 100:
        return True, "launch-bound"
    if p["comm_us"] >= p["kernels"] * p["kernel_us"]:
        return False, "communication-bound"
    return False, "compute-bound"
