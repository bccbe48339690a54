# misconception: a mode the backend cannot run falls back to no graph at all, NONE, rather than to piecewise graphs
# source: lesson 09 (attention compiled piecewise keeps the piecewise graphs: vLLM sets PIECEWISE or FULL_AND_PIECEWISE)
# targets: downgrades
def resolve(requested, support, num_spec_tokens=0):
    mode = requested
    if MODES[mode][1] == "FULL" and support != "ALWAYS":
        if support == "NEVER":
            raise ValueError(f"{mode} needs full graphs and the backend never runs them")
        mode = "NONE"
    if MODES[mode][0] == "FULL" and support == "NEVER":
        mode = "NONE"
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
    runtime = decode if uniform else mixed
    return runtime, (num_tokens if runtime == "NONE" else padded)
