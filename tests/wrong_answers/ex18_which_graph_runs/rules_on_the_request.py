# misconception: each downgrade rule looks at the requested mode, so at most one of them applies
# source: lesson 09 (vLLM applies its rules in order to the mode so far: FULL can become FULL_AND_PIECEWISE, then PIECEWISE)
# targets: spec_decode_downgrade
def resolve(requested, support, num_spec_tokens=0):
    if MODES[requested][1] == "FULL" and support != "ALWAYS":
        if support == "NEVER":
            raise ValueError(f"{requested} needs full graphs and the backend never runs them")
        return "FULL_AND_PIECEWISE"
    if MODES[requested][0] == "FULL" and support == "NEVER":
        return "PIECEWISE"
    if MODES[requested][0] == "FULL" and num_spec_tokens > 0 and SUPPORT[support] < SUPPORT["UNIFORM_BATCH"]:
        return "PIECEWISE"
    return requested


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
