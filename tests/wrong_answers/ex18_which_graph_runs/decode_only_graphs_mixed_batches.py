# misconception: FULL_DECODE_ONLY still has its full graphs for every size, so a mixed batch replays one too
# source: lesson 09 (FULL_DECODE_ONLY runs prefill and mixed batches without a graph)
# targets: decode_or_mixed
def resolve(requested, support, num_spec_tokens=0):
    mode = requested
    if MODES[mode][1] == "FULL" and support != "ALWAYS":
        if support == "NEVER":
            raise ValueError(f"{mode} needs full graphs and the backend never runs them")
        mode = "FULL_AND_PIECEWISE"
    if MODES[mode][0] == "FULL" and support == "NEVER":
        mode = "PIECEWISE"
    if MODES[mode][0] == "FULL" and num_spec_tokens > 0 and SUPPORT[support] < SUPPORT["UNIFORM_BATCH"]:
        mode = "PIECEWISE"
    return mode


def which_graph(mode, capture_sizes, query_lens, num_spec_tokens=0):
    num_tokens = sum(query_lens)
    sizes = sorted(capture_sizes)
    if mode == "NONE" or num_tokens > sizes[-1]:
        return "NONE", num_tokens
    padded = min(s for s in sizes if s >= num_tokens)
    uniform = all(q == 1 + num_spec_tokens for q in query_lens)
    decode, mixed = MODES[mode]
    runtime = decode if uniform or mode == "FULL_DECODE_ONLY" else mixed
    return runtime, (num_tokens if runtime == "NONE" else padded)
