# misconception: copy an output only when the next call is about to overwrite it; the last one is safe, no call follows it
# source: lesson 07 (an output is valid until the next call of the step, whoever makes it: the caller's next generate overwrites the last one)
# targets: tokens_kept
def generate(step, first, n):
    outputs, x = [], first
    for _ in range(n):
        if outputs:
            outputs[-1] = outputs[-1].clone()  # the next call overwrites it: copy it out now
            x = outputs[-1]
        outputs.append(step(x))
    return outputs
