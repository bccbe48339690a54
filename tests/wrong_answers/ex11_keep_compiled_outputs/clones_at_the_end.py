# misconception: copying once after the loop is as good as copying each output before the next call
# source: lesson 07 (the next call overwrites; a late copy copies overwritten values)
# targets: tokens_kept other_lengths
def generate(step, first, n):
    outputs, x = [], first
    for _ in range(n):
        x = step(x)
        outputs.append(x)
    return [out.clone() for out in outputs]
