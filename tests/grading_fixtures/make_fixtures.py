"""A tiny solutions notebook in the check protocol, and a class of learners (honest and hostile) built from it.

Used by tests/test_grade.py: small enough that a whole class grades in about a minute on a busy 2-core machine. The
other confined grader tests take `require_confinement` and `write_class` from here too."""

from __future__ import annotations

import json
import os
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

NAME = "01_tiny.ipynb"


def require_confinement():
    """sandbox.detect()'s answer where the grader can confine learners; else skip the test (no root or bubblewrap,
    as on a laptop), or fail it where the grader runs as root and still cannot (CI installs bubblewrap)."""
    import pytest

    from graphcourse.grading.sandbox import detect

    conf = detect()
    if not conf.confined:
        if os.geteuid() == 0:
            pytest.fail("the grader runs as root but cannot confine learners: " + "; ".join(conf.reasons)
                        + " (CI: apt-get install bubblewrap)")
        pytest.skip("confinement needs root and bubblewrap: " + "; ".join(conf.reasons))
    return conf


def write_class(root: Path, learners: dict, subfolder: str = "") -> Path:
    """root/solutions/NAME (the solutions notebook) and root/class/<learner>/[subfolder/]NAME with each learner's
    answers (None: the model answers), root readable by the confined learners' uids; returns the solutions folder."""
    os.chmod(root, 0o755)
    sol = root / "solutions"
    sol.mkdir()
    nbformat.write(solutions_notebook(), sol / NAME)
    for name, answers in learners.items():
        folder = root / "class" / name / subfolder
        folder.mkdir(parents=True)
        nbformat.write(learner_copy(answers), folder / NAME)
    return sol


def check(source: str, **meta) -> nbformat.NotebookNode:
    cell = new_code_cell(source)
    if meta:
        cell.metadata["graphcourse"] = {"check": meta}
    return cell


def solutions_notebook() -> nbformat.NotebookNode:
    cells = [
        new_markdown_cell("# Tiny exercises for the grader's tests"),
        new_code_cell("import math\nSCALE = 3"),
        new_markdown_cell("## ex01_add: add two numbers (3 points)"),
        new_code_cell("def add(a, b):\n    ### BEGIN SOLUTION: return the sum\n    return a + b\n    ### END SOLUTION"),
        check("from graphcourse.grading.observe import observe, inputs\n\n"
              "observe.call('add 1 2', add, 1, 2, hint='adding is +')\n"
              "observe.call('add floats', add, 0.5, 0.25)", name="fixed", points=1),
        check("from graphcourse.grading.observe import observe, inputs\n\n"
              "for _a, _b in [(inputs.randint(-10**6, 10**6), inputs.randint(-10**6, 10**6)) for _ in range(5)]:\n"
              "    observe.call(f'add {_a} {_b}', add, _a, _b)", name="hidden", points=1, hidden=True),
        check("from graphcourse.grading.observe import observe\n\n"
              "import torch\nobserve('cuda sum', float(add(torch.ones(2, device='cuda'), 1).sum()))",
              name="on-gpu", points=1, needs=["cuda"]),
        new_markdown_cell("## ex02_smallest: the smallest item, or ValueError (2 points)"),
        new_code_cell("def smallest(xs):\n    ### BEGIN SOLUTION: return the smallest item\n"
                      "    if not xs:\n        raise ValueError('empty')\n    return min(xs)\n    ### END SOLUTION"),
        check("from graphcourse.grading.observe import observe, inputs\n\n"
              "observe.call('smallest of 3 1 2', smallest, [3, 1, 2])\n"
              "observe.call('empty', smallest, [], hint='an empty list has no smallest item: raise ValueError')\n"
              "for _k in range(3):\n"
              "    _xs = inputs.sample(range(1000), 6)\n"
              "    observe.call(f'smallest of {_xs}', smallest, list(_xs))", name="values", points=1),
        check("from graphcourse.grading.observe import observe\n\n"
              "_xs = [5, 4, 6]\nsmallest(_xs)\nobserve('list unchanged', _xs)", name="no-mutation", points=1),
    ]
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


MODEL = {
    "ex01_add": "def add(a, b):\n    return a + b",
    "ex02_smallest": "def smallest(xs):\n    if not xs:\n        raise ValueError('empty')\n    return min(xs)",
}


def learner_copy(answers: dict[str, str] | None = None) -> nbformat.NotebookNode:
    """The exercises/ copy the builder makes of the tiny notebook, with answers written in (model where not given)."""
    from graphcourse.authoring.build_exercises import exercise_notebook

    nb = exercise_notebook(solutions_notebook(), NAME)
    for cell in nb.cells:
        g = cell.metadata.get("graphcourse", {})
        if g.get("role") == "answer":
            cell.source = (answers or {}).get(g["exercise"], MODEL[g["exercise"]])
    return nb


def stub_copy() -> nbformat.NotebookNode:
    from graphcourse.authoring.build_exercises import exercise_notebook

    return exercise_notebook(solutions_notebook(), NAME)


HONEST_ADD = MODEL["ex01_add"]
HONEST_SMALLEST = MODEL["ex02_smallest"]

# Each hostile learner: (answers, what its honest part may earn at most, in points out of 4 graded here)
HOSTILE = {
    "lookup_table": ({"ex01_add": "def add(a, b):\n    return {(1, 2): 3, (0.5, 0.25): 0.75}.get((a, b), 0)"}, 3),
    "equal_to_anything": ({"ex01_add": "class _Any:\n    def __eq__(self, other):\n        return True\n\n"
                                       "def add(a, b):\n    return _Any()"}, 2),
    "int_subclass": ({"ex01_add": "class _I(int):\n    pass\n\ndef add(a, b):\n    return _I(a + b)"}, 2),
    "reads_solutions": ({"ex01_add": "def add(a, b):\n    import json\n    for p in ['SOLUTIONS']:\n"
                                     "        src = json.load(open(p))\n    return a + b"}, 2),
    "skiptest": ({"ex01_add": "import unittest\n\ndef add(a, b):\n    raise unittest.SkipTest('needs a CUDA GPU')"}, 2),
    "assertion_rebound": ({"ex01_add": "import builtins\nbuiltins.AssertionError = type('X', (Exception,), {})\n"
                                       "def add(a, b):\n    return a + b"}, 2),
    "input_transformer": ({"ex01_add": "get_ipython().input_transformers_post.append(lambda lines: ['pass\\n'])\n"
                                       "def add(a, b):\n    return 0"}, 2),
    "obfuscated_transformer": ({"ex01_add": "_ip = [v for k, v in globals().items() if k == 'get_' + 'ipython'][0]()\n"
                                            "_ip.ast_transformers.append(type('T', (), {'visit': lambda s, n: n})())\n"
                                            "def add(a, b):\n    return a + b"}, 2),
    "patches_observe": ({"ex01_add": "import graphcourse.grading.observe as _o\n_o.plain = lambda v, *a: 3\n"
                                     "def add(a, b):\n    return 0"}, 2),
    "kills_kernel": ({"ex01_add": "import os\nos._exit(3)"}, 2),
    "armed_timer": ({"ex01_add": "import threading, os\nthreading.Timer(1.0, lambda: os._exit(1)).start()\n"
                                 "def add(a, b):\n    return a + b"}, 2),
    "detached_child": ({"ex01_add": "import subprocess\nsubprocess.Popen(['sh', '-c', 'sleep 6071 &'], "
                                    "start_new_session=True)\ndef add(a, b):\n    return a + b"}, 2),
    "stops_itself": ({"ex02_smallest": "import os, signal\nos.kill(os.getpid(), signal.SIGSTOP)\n"
                                       "def smallest(xs):\n    return min(xs)"}, 2),
    "memory_hog": ({"ex02_smallest": "_hog = bytearray(64 * 1024 ** 3)\n" + HONEST_SMALLEST}, 4),
    "writes_classmate": ({"ex01_add": "for _p in ['CLASS/honest/01_tiny.ipynb', 'CLASS/planted.txt']:\n"
                                      "    try:\n        open(_p, 'w').write('{}')\n    except OSError:\n        pass\n"
                                      + HONEST_ADD}, 2),
}


# --- a second solutions notebook: a class hands in any subset of the two ------------------------------------

NAME2 = "02_tiny_more.ipynb"
MODEL2 = {"ex03_mul": "def mul(a, b):\n    return a * b"}


def second_notebook() -> nbformat.NotebookNode:
    cells = [
        new_markdown_cell("# More tiny exercises: a second notebook, graded on its own"),
        new_code_cell("import math"),
        new_markdown_cell("## ex03_mul: multiply two numbers (2 points)"),
        new_code_cell("def mul(a, b):\n    ### BEGIN SOLUTION: return the product\n    return a * b\n    ### END SOLUTION"),
        check("from graphcourse.grading.observe import observe\n\n"
              "observe.call('mul 3 4', mul, 3, 4)\nobserve.call('mul -2 5', mul, -2, 5)", name="fixed", points=1),
        check("from graphcourse.grading.observe import observe, inputs\n\n"
              "for _a, _b in [(inputs.randint(-999, 999), inputs.randint(-999, 999)) for _ in range(5)]:\n"
              "    observe.call(f'mul {_a} {_b}', mul, _a, _b)", name="hidden", points=1, hidden=True),
    ]
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def second_copy(answers: dict[str, str] | None = None) -> nbformat.NotebookNode:
    """The exercises/ copy of the second notebook, with answers written in (model where not given)."""
    from graphcourse.authoring.build_exercises import exercise_notebook

    nb = exercise_notebook(second_notebook(), NAME2)
    for cell in nb.cells:
        g = cell.metadata.get("graphcourse", {})
        if g.get("role") == "answer":
            cell.source = (answers or {}).get(g["exercise"], MODEL2[g["exercise"]])
    return nb
