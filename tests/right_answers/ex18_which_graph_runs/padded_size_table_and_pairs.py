# way: vLLM's own shape: the mode as a (decode, mixed) pair downgraded half by half, and a padded-size table built once (as CudagraphDispatcher._compute_bs_to_padded_graph_size does) instead of a search
# source: lesson 09 (vLLM's padded-size table; toygraph.serving.padded_size_table); vllm/v1/cudagraph_dispatcher.py
def resolve(requested, support, num_spec_tokens=0):
    names = {pair: name for name, pair in MODES.items()}
    decode, mixed = MODES[requested]
    level = SUPPORT[support]
    if mixed == "FULL" and level < SUPPORT["ALWAYS"]:
        if level == SUPPORT["NEVER"]:
            raise ValueError("FULL needs an attention backend that can run in a full graph; try PIECEWISE")
        decode, mixed = "FULL", "PIECEWISE"
    needs = SUPPORT["UNIFORM_BATCH"] if num_spec_tokens else SUPPORT["UNIFORM_SINGLE_TOKEN_DECODE"]
    if decode == "FULL" and level < needs:
        decode = mixed = "PIECEWISE"
    return names[(decode, mixed)]


def which_graph(mode, capture_sizes, query_lens, num_spec_tokens=0):
    sizes = sorted(set(capture_sizes))
    table = [0] * (sizes[-1] + 1)
    for start, end in zip([0] + sizes, sizes + [sizes[-1] + 1]):
        for bs in range(start, end):
            table[bs] = start if bs == start else end
    tokens = sum(query_lens)
    one_step = 1 + num_spec_tokens
    half = 0 if len(set(query_lens)) == 1 and query_lens[0] == one_step else 1
    runtime = MODES[mode][half]
    if runtime == "NONE" or tokens >= len(table):
        return ("NONE", tokens)
    return (runtime, table[tokens])
