# misconception: fork whenever the side stream is needed: after the left branch is as good as before it
# source: lesson 10 (the forked stream depends on everything the capturing stream launched before the fork)
# targets: overlap
def capture_fork_join(sg, x):
    main, side = sg.main, sg.stream("side")
    with sg.capture():
        a = main.launch(left_scale, x, name="left_scale")
        a = main.launch(left_shift, a, name="left_shift")
        side.wait_stream(main)  # the right branch now waits for the whole left branch
        b = side.launch(right_square, x, name="right_square")
        main.wait_stream(side)
        out = main.launch(combine, a, b, name="combine")
    return out
