# misconception: join right after the fork: the side stream's later kernels are covered by that one wait
# source: lesson 10 (a wait covers the work launched before it); CUDA: cudaErrorStreamCaptureUnjoined
# targets: captures values overlap
def capture_fork_join(sg, x):
    main, side = sg.main, sg.stream("side")
    with sg.capture():
        side.wait_stream(main)
        main.wait_stream(side)  # joined before the side stream launched anything
        a = main.launch(left_scale, x, name="left_scale")
        a = main.launch(left_shift, a, name="left_shift")
        b = side.launch(right_square, x, name="right_square")
        out = main.launch(combine, a, b, name="combine")
    return out
