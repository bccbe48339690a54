# misconception: fork once the left branch has started: the right branch still overlaps the rest of it
# source: lesson 10 (the forked stream depends on everything the capturing stream launched before the fork: a false dependency, hidden when the kernels cost the same)
# targets: overlap
def capture_fork_join(sg, x):
    main, side = sg.main, sg.stream("side")
    with sg.capture():
        a = main.launch(left_scale, x, name="left_scale")
        side.wait_stream(main)  # the right branch now waits for left_scale
        b = side.launch(right_square, x, name="right_square")
        a = main.launch(left_shift, a, name="left_shift")
        main.wait_stream(side)
        out = main.launch(combine, a, b, name="combine")
    return out
