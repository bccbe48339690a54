# misconception: a batch is uniform when its tokens add up to (1 + k) per request, whatever each request has
# source: lesson 09 (speculative decoding: a uniform batch has exactly 1 + k query tokens in every request)
# targets: spec_decode_batches
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
    uniform = num_tokens == len(query_lens) * (1 + num_spec_tokens)
    decode, mixed = MODES[mode]
    runtime = decode if uniform else mixed
    return runtime, (num_tokens if runtime == "NONE" else padded)
