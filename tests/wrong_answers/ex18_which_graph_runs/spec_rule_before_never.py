# misconception: the draft-token rule comes first, so a FULL request on a NEVER backend with draft tokens becomes PIECEWISE
# source: lesson 09 (vLLM applies its rules in order: FULL for mixed batches with a NEVER backend refuses to start)
# targets: spec_decode_downgrade
def resolve(requested, support, num_spec_tokens=0):
    mode = requested
    if MODES[mode][0] == "FULL" and num_spec_tokens > 0 and SUPPORT[support] < SUPPORT["UNIFORM_BATCH"]:
        return "PIECEWISE"
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
    runtime = decode if uniform else mixed
    return runtime, (num_tokens if runtime == "NONE" else padded)
