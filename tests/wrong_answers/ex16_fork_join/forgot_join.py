# misconception: the side stream's work is part of the graph once it was forked in; no need to wait for it
# source: lesson 10 (fork and join with events); CUDA: cudaErrorStreamCaptureUnjoined
# targets: captures values overlap
def capture_fork_join(sg, x):
    main, side = sg.main, sg.stream("side")
    with sg.capture():
        side.wait_stream(main)
        a = main.launch(left_scale, x, name="left_scale")
        a = main.launch(left_shift, a, name="left_shift")
        b = side.launch(right_square, x, name="right_square")
        out = main.launch(combine, a, b, name="combine")  # reads b without waiting for the side stream
    return out
