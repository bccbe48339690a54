# misconception: calling the step again gives a fresh output to keep
# source: lesson 07 (each call starts a new step and frees the previous one's outputs)
# targets: tokens_kept one_call_per_token other_lengths
def generate(step, first, n):
    outputs, x = [], first
    for _ in range(n):
        fresh = step(x)
        outputs.append(fresh.clone())
        x = step(x)
    return outputs
