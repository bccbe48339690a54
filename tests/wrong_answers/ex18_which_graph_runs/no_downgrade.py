# misconception: the requested cudagraph_mode is the one that runs: the backend's support only matters for speed
# source: lesson 09 (vLLM checks the request against the attention backend's AttentionCGSupport and downgrades it)
# targets: downgrades spec_decode_downgrade
def resolve(requested, support, num_spec_tokens=0):
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
