# misconception: any stream launched on during the capture is captured into the graph
# source: lesson 10 (a stream joins a capture by waiting on the capturing stream); PyTorch's notes on side streams
# targets: captures values overlap
def capture_fork_join(sg, x):
    main, side = sg.main, sg.stream("side")
    with sg.capture():
        a = main.launch(left_scale, x, name="left_scale")
        a = main.launch(left_shift, a, name="left_shift")
        b = side.launch(right_square, x, name="right_square")  # never forked into the capture
        main.wait_stream(side)
        out = main.launch(combine, a, b, name="combine")
    return out
