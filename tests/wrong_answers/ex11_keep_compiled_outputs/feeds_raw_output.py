# misconception: a clone for the list is enough; the raw output can still be the next call's input
# source: exercise ex11's text and lesson 07 (the next call takes the previous outputs back before it reads its input)
# targets: tokens_kept one_call_per_token other_lengths tokens_on_a_gpu
def generate(step, first, n):
    outputs, x = [], first
    for _ in range(n):
        x = step(x)
        outputs.append(x.clone())
    return outputs
