# attack: answers raise KeyboardInterrupt, SystemExit and GeneratorExit from inside the functions the checks call
# honest: ex01_bucket_picker
# where: others
def _boom(*a, **k):
    raise KeyboardInterrupt
for _name in ("pick_bucket", "pad_batch", "replay_all", "decode_step", "decode_on_device", "capture_step",
              "capture_cuda", "profile_speedup", "diagnose", "step_graph_safe", "serve", "serve_shared",
              "pad_slots", "decode_padded", "collect", "pairwise_diff", "make_step", "set_scale", "run"):
    globals()[_name] = _boom
