# misconception: a graph runs independent kernels at the same time by itself, whatever stream they were captured on
# source: lesson 10 (the DAG comes from the streams and events of the capture: one stream records a chain)
# targets: overlap
def capture_fork_join(sg, x):
    main = sg.main
    with sg.capture():
        a = main.launch(left_scale, x, name="left_scale")
        a = main.launch(left_shift, a, name="left_shift")
        b = main.launch(right_square, x, name="right_square")
        out = main.launch(combine, a, b, name="combine")
    return out
