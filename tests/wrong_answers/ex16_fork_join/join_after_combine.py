# misconception: the join only has to come before the capture ends; combine may be launched before it
# source: lesson 10 (a kernel depends only on what its stream waited for before its launch: combine reads the right branch's output with no edge to it, a race on a GPU)
# targets: values
def capture_fork_join(sg, x):
    main, side = sg.main, sg.stream("side")
    with sg.capture():
        side.wait_stream(main)
        b = side.launch(right_square, x, name="right_square")
        a = main.launch(left_scale, x, name="left_scale")
        a = main.launch(left_shift, a, name="left_shift")
        out = main.launch(combine, a, b, name="combine")
        main.wait_stream(side)  # joined before the capture ends: CUDA accepts the capture
    return out
