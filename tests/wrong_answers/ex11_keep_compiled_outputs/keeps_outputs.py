# misconception: a compiled step returns a fresh tensor each call, so keeping it is safe
# source: lesson 07, "an output that the next run overwrites"
# targets: tokens_kept other_lengths tokens_on_a_gpu
def generate(step, first, n):
    outputs, x = [], first
    for _ in range(n):
        x = step(x)
        outputs.append(x)
    return outputs
