# misconception: one results list, refilled at every call, is as safe as a fresh one (the values in it are copies)
# source: lesson 01 rule 2 (a buffer reused by the next call overwrites what the previous caller kept), here with a Python list
# targets: collect_after_next_call
_results = []


def collect(f, xs):
    _results.clear()  # reuse one list, as the graph reuses its static output
    for x in xs:
        _results.append(f(x).tolist())
    return _results


def pairwise_diff(f, x1, x2):
    first = f(x1).tolist()
    second = f(x2).tolist()
    return [b - a for a, b in zip(first, second)]
