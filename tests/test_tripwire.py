"""The grader's tripwire in a real kernel: tampering is refused or recorded out of the kernel's reach; honest code is not.

One IPython kernel (unconfined: the tripwire does not need the sandbox) runs the grader's preamble with a pipe of
this test's; each case runs a cell as an answer would and reads what came through the pipe. The whole grader is
tried against hostile notebooks in tests/test_adversarial.py; this file pins down each seal and each record.
"""

from __future__ import annotations

import json
import os

import pytest

from graphcourse.grading.runner import RESET, _sent_observations, answer_cell, preamble

jupyter_client = pytest.importorskip("jupyter_client")


class Kernel:
    def __init__(self, tmp_path):
        self.pipe = tmp_path / "tripwire"
        os.mkfifo(self.pipe, 0o600)
        self.reader = os.open(self.pipe, os.O_RDONLY | os.O_NONBLOCK)
        self.km, self.client = jupyter_client.manager.start_new_kernel(kernel_name="python3")

    def run(self, code: str) -> tuple[str, str | None]:
        """(stdout, 'ExceptionName: message' or None)."""
        out, error = [], None
        msg_id = self.client.execute(code)
        while True:
            msg = self.client.get_iopub_msg(timeout=120)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream" and content["name"] == "stdout":
                out.append(content["text"])
            elif kind == "error":
                error = f"{content['ename']}: {content['evalue']}"
            elif kind == "status" and content["execution_state"] == "idle":
                return "".join(out), error

    def records(self) -> list[dict]:
        data = b""
        while True:
            try:
                chunk = os.read(self.reader, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            data += chunk
        return [json.loads(line) for line in data.decode().splitlines() if line]

    def close(self):
        self.client.stop_channels()
        self.km.shutdown_kernel(now=True)
        os.close(self.reader)


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    k = Kernel(tmp_path_factory.mktemp("tripwire"))
    # the check library too: a check cell imports it, so the grader's preamble does (see test_the_check_library_...)
    _, error = k.run(preamble(["toygraph", "graphcourse.grading.observe", "graphcourse.grading.checks"], str(k.pipe)))
    assert error is None, error
    assert k.records() == [{"installed": True}]
    yield k
    k.close()


def _flags(records):
    return [r["flag"] for r in records if "flag" in r]


HONEST = {
    "namedtuple and dataclass": "from collections import namedtuple\nfrom dataclasses import dataclass\n"
                                "P = namedtuple('P', 'x y')\n@dataclass\nclass Q:\n    a: int = 1\nprint(P(1, 2), Q())",
    "a toy graph, replayed": "import toygraph\ng = toygraph.ToyGraph(name='g')\ng.record(lambda x: [v * 2 for v in x])\n"
                             "print(g.replay([1, 2]).tolist(), g.replays)",
    "functools and a decorator": "import functools\ndef deco(f):\n    @functools.wraps(f)\n    def w(*a):\n"
                                 "        return f(*a)\n    return w\n@deco\ndef h(x):\n    return x + 1\nprint(h(1))",
    "an exception with a traceback": "def bad():\n    raise ValueError('no')\ntry:\n    bad()\nexcept ValueError as e:\n"
                                     "    print(type(e).__name__)",
    "a new attribute on a toy object": "import toygraph\ng = toygraph.ToyGraph()\ng.note = 'mine'\nprint(g.note)",
    "the learner's own class, patched": "class Mine:\n    pass\nMine.x = 1\nsetattr(Mine, 'y', 2)\nprint(Mine.x + Mine.y)",
    "observe outside a check": "from graphcourse.grading.observe import observe\nobserve('k', 1)\nprint('ok')",
    "typing.NamedTuple": "from typing import NamedTuple\nclass Fit(NamedTuple):\n    size: int\nprint(min([Fit(4), Fit(2)]))",
    "cProfile around a function": "import cProfile\ndef f(x):\n    return x + 1\ncProfile.Profile().runcall(f, 1)",
    "a deep copy of a toy buffer": "import copy, toygraph\ng = toygraph.ToyGraph()\ng.record(lambda x: [v + 1 for v in x])\n"
                                   "print(copy.deepcopy(g.replay([1])).tolist())",
    "the display hook's last value": "1 + 1\nprint(_)",
    "the check library used": "from graphcourse.grading.checks import filled_in_capture, watched_device, pool_mib\n"
                              "d, made = watched_device()\nprint(filled_in_capture(made()), pool_mib([8, 4]))",
    "a stand-in torch from the check library": "from graphcourse.grading.checks import TorchCudaRecorder, "
                                               "with_fake_torch\ndef f(x):\n    import torch\n"
                                               "    return torch.cuda.is_available()\n"
                                               "print(with_fake_torch(TorchCudaRecorder(), f, 1))",
    "re.compile and singledispatch": "import re, functools\n@functools.singledispatch\ndef size(x):\n    return 0\n"
                                     "@size.register\ndef _(x: list):\n    return len(x)\n"
                                     "print(re.compile('a+').match('aa').group(0), size([1, 2]))",
}


@pytest.mark.parametrize("name", HONEST)
def test_honest_code_is_neither_refused_nor_recorded(kernel, name):
    out, error = kernel.run(HONEST[name])
    assert error is None, error
    assert _flags(kernel.records()) == [], name


ATTACKS = {  # name: (code, the flag's text must contain this, the cell must raise)
    "the toy's replay count written": ("import toygraph\ng = toygraph.ToyGraph()\ng.replays += 5", "ToyGraph.replays",
                                       True),
    "a device's sync count written": ("import toygraph\nd = toygraph.ToyDevice()\nd.sync_count = 1",
                                      "ToyDevice.sync_count", True),
    "a timeline's events cleared": ("import toygraph\nd = toygraph.ToyDevice()\nd.clock.timeline.events.clear()",
                                    "list the toy keeps", True),
    "a toy method replaced with mock": ("from unittest import mock\nimport toygraph\n"
                                        "mock.patch.object(toygraph.ToyGraph, 'replay', lambda *a: None).start()",
                                        "ToyGraph.replay", True),
    "observe's function patched with mock": ("from unittest import mock\n"
                                             "mock.patch('graphcourse.grading.observe.plain', lambda v: 1).start()",
                                             "graphcourse.grading.observe.plain", True),
    "an observe method replaced through type()": ("from graphcourse.grading.observe import observe\n"
                                                  "type(observe)._put = lambda *a: None", "_Observe._put", True),
    "a check library function replaced": ("import graphcourse.grading.checks as c\nc.pool_mib = lambda *a: 0",
                                          "graphcourse.grading.checks.pool_mib", True),
    "a check library function patched with mock": ("from unittest import mock\nmock.patch("
                                                   "'graphcourse.grading.checks.buffer_values', lambda o: []).start()",
                                                   "graphcourse.grading.checks.buffer_values", True),
    "a sealed module set by a built-in that observe.call calls": (
        "import functools\nimport graphcourse.grading.observe as o\nfrom graphcourse.grading.observe import observe\n"
        "observe.call('x', functools.partial(setattr, o, 'plain', len))", "graphcourse.grading.observe.plain", False),
    "a sealed module set by a built-in that the stand-in torch calls": (
        "import functools\nimport graphcourse.grading.observe as o\n"
        "from graphcourse.grading.checks import TorchCudaRecorder, with_fake_torch\n"
        "with_fake_torch(TorchCudaRecorder(), functools.partial(setattr, o, 'plain', len))",
        "graphcourse.grading.observe.plain", True),
    "exec in a dict that names a course module, run by observe.call": (
        "import functools\nfrom graphcourse.grading.observe import observe\n"
        "observe.call('x', functools.partial(exec, 'import graphcourse.grading.observe as o\\no.plain = len', "
        "{'__name__': 'graphcourse.grading.checks'}))", "exec", False),
    "a check library class's method replaced": ("from graphcourse.grading.checks import LazyLayer\n"
                                                "LazyLayer.__call__ = lambda self, x: x", "LazyLayer.__call__", True),
    "the hidden inputs re-seeded": ("from graphcourse.grading.observe import inputs\ninputs.rng.seed(0)", "re-seeded",
                                    True),
    "the hidden inputs' generator replaced": ("from graphcourse.grading.observe import inputs\nimport random\n"
                                              "inputs.rng = random.Random(0)", "_Inputs.rng", True),
    "an input transformer appended": ("get_ipython().input_transformers_post.append(lambda lines: lines)",
                                      "IPython", True),
    "a cleanup transformer appended": ("get_ipython().input_transformers_cleanup.append(lambda lines: lines)",
                                       "IPython", True),
    "an AST transformer appended": ("import ast\nget_ipython().ast_transformers.append(ast.NodeTransformer())",
                                    "IPython", True),
    "an AST transformer list cleared": ("get_ipython().ast_transformers.clear()", "IPython", True),
    "an input transformer list extended": ("get_ipython().input_transformers_post.extend([lambda lines: lines])",
                                           "IPython", True),
    "a cleanup transformer popped": ("get_ipython().input_transformers_cleanup.pop()", "IPython", True),
    "a cleanup transformer list grown with +=": ("t = get_ipython().input_transformers_cleanup\nt += [len]", "IPython",
                                                 True),
    "kernel message handlers updated": ("get_ipython().kernel.shell_handlers.update(execute_request=print)", "table",
                                        True),
    "a kernel message handler deleted": ("del get_ipython().kernel.shell_handlers['execute_request']", "table", True),
    "a kernel message handler popped": ("get_ipython().kernel.shell_handlers.popitem()", "table", True),
    "a transformer list sorted": ("get_ipython().ast_transformers.sort(key=id)", "IPython", True),
    "a transformer list reversed": ("get_ipython().input_transformers_cleanup.reverse()", "IPython", True),
    "a transformer list emptied with *=": ("t = get_ipython().input_transformers_cleanup\nt *= 0", "IPython", True),
    "kernel message handlers merged with |=": ("h = get_ipython().kernel.shell_handlers\nh |= {'execute_request': print}",
                                               "table", True),
    "a sealed list's guard replaced": ("type(get_ipython().ast_transformers)._guard = lambda self, caller: None",
                                       "_SealedList._guard", True),
    "a check library class's method deleted": ("from graphcourse.grading.checks import LazyLayer\n"
                                               "del LazyLayer.__call__", "LazyLayer.__call__", True),
    "a pre_run_cell callback registered": ("get_ipython().events.register('pre_run_cell', lambda *a: None)",
                                           "IPython", True),
    "run_cell wrapped on the shell": ("ip = get_ipython()\nip.run_cell = lambda *a, **k: None", "run_cell", True),
    "the shell's transformer manager replaced": ("get_ipython().input_transformer_manager = None",
                                                 "input_transformer_manager", True),
    "a kernel message handler replaced": ("get_ipython().kernel.shell_handlers['execute_request'] = print",
                                          "table", True),
    "a builtin replaced": ("import builtins\nbuiltins.len = lambda x: 0", "builtins.len", True),
    "frames read with sys._getframe": ("import sys\nsys._getframe(0).f_back", "frames", False),
    "frames read with inspect": ("import inspect\ninspect.stack()", "frame", False),
    "a trace function": ("import sys\nsys.settrace(None)", "trace", False),
    "objects hunted with gc": ("import gc\ngc.get_objects()[:1]", "garbage collector", False),
    "code run with exec": ("exec('x = 1')", "exec", False),
    "a function's code read": ("def f():\n    pass\nf.__code__", "__code__", False),
    "a process started": ("import subprocess\nsubprocess.run(['true'])", "process", False),
    "code named as an installed package's": ("compile('x = 1', '/usr/lib/python3/dist-packages/x.py', 'exec')",
                                             "compile", False),
    "doctest running hidden code": ("import doctest\nt = doctest.DocTest([doctest.Example('y = 2\\n', '')], {}, "
                                    "'/site-packages/x', None, 0, None)\ndoctest.DocTestRunner().run(t, out=lambda s: None)",
                                    "compile", False),
    "code hidden in a string annotation": ("import typing\ndef f(x: 'lambda: 1'):\n    pass\n"
                                           "typing.get_type_hints(f)", "compile", False),
    "an observation sent straight to the pipe": ("import graphcourse.grading.tripwire as t\n"
                                                 "t.observed('c', 'k', {'value': 1}, None)", "something other", True),
}


@pytest.mark.parametrize("name", ATTACKS)
def test_tampering_is_refused_or_recorded_through_the_pipe(kernel, name):
    code, text, raises = ATTACKS[name]
    _, error = kernel.run(code)
    flags = _flags(kernel.records())
    assert any(text in f for f in flags), (name, flags, error)
    if raises:
        assert error is not None and ("sealed while grading" in error or "Only toygraph changes it" in error), error
    kernel.run(RESET)  # what an answer left does not reach the next case (the grader would start a fresh kernel)
    kernel.records()


def test_the_stand_in_torch_hands_the_answer_nothing_that_leads_back_to_its_log():
    """The answer gets the recorder's step, streams and tensors: none has a __self__ that is the recorder, a name it
    can change, or a name the log would believe when it is the answer's own object."""
    import types

    from graphcourse.grading.checks import TorchCudaRecorder

    rec = TorchCudaRecorder()
    torch = rec.module()
    step, s, t = rec.step, torch.cuda.Stream(), rec.tensor("example")
    assert isinstance(step, types.FunctionType) and not hasattr(step, "__self__")
    assert not hasattr(torch.cuda.Stream, "__self__")
    for obj in (s, t):
        with pytest.raises(AttributeError):
            obj.name = "default"
        with pytest.raises(AttributeError):
            obj.log = []
    forged = types.SimpleNamespace(name="clone of output 3")
    s.wait_stream(types.SimpleNamespace(name="default"))
    step(forged)
    assert rec.log == [("wait", "side 2", "?"), ("step", "?", "default")]
    assert rec.name_of(forged) == "?" and rec.name_of(t.clone()) == "clone of example #1"


def test_the_check_library_is_imported_by_the_preamble_of_every_exercise_whose_checks_use_it():
    """The tripwire seals the modules imported before it is installed: the grader's preamble imports what the
    exercise's check cells import (graphcourse.grading.assignment), the check library among them."""
    from graphcourse.core.paths import SOLUTIONS_DIR
    from graphcourse.grading.assignment import load_assignments

    users = [ex for a in load_assignments(SOLUTIONS_DIR) for ex in a.exercises
             if any("graphcourse.grading.checks" in c.source for c in ex.checks)]
    assert users, "no check cell imports graphcourse.grading.checks"
    for ex in users:
        assert "graphcourse.grading.checks" in ex.modules, ex.id


def test_observations_made_by_the_answers_code_during_a_check_are_refused(kernel):
    answer = "def answer():\n    from graphcourse.grading.observe import observe\n    observe('replays', 3)\n    return 1"
    kernel.run(answer_cell(answer))
    kernel.run(answer)
    kernel.run("from graphcourse.grading.observe import _begin\n_begin('c1', 1)")
    out, error = kernel.run("from graphcourse.grading.observe import observe, _state\n"
                            "observe.call('answer', answer)\nprint(sorted(_state.obs), _state.obs['answer'])")
    assert error is None, error
    assert "['answer'] {'raised': 'AttributeError'}" in out  # the forged 'replays' never reached the observations
    assert any("answer's own code" in f for f in _flags(kernel.records()))


def test_the_footer_marks_each_check_through_the_pipe(kernel):
    kernel.run("from graphcourse.grading.observe import _begin, _end\n_begin('c2', 1)")
    kernel.run("from graphcourse.grading.observe import observe\nobserve('x', 1)")
    _, error = kernel.run("from graphcourse.grading.observe import _end\n_end('00' * 32)")
    assert error is None, error
    marks = [r for r in kernel.records() if "mark" in r]
    assert len(marks) == 1 and marks[0]["mark"] == "c2" and marks[0]["n"] >= 1


def test_an_answer_that_rebinds_the_checks_names_while_a_check_runs_earns_nothing_there(kernel):
    answer = ("class _Counted:\n    replays = 3\n\ndef answer():\n    global _g\n    _g = _Counted()\n    return 1")
    kernel.run(answer_cell(answer))
    kernel.run(answer)
    kernel.run("from graphcourse.grading.observe import _begin\n_begin('c3', 1, ('_g', 'observe'))")
    out, error = kernel.run("from graphcourse.grading.observe import observe, _state\nimport toygraph\n"
                            "_g = toygraph.ToyGraph()\nobserve.call('answer', answer)\nobserve('replays', _g.replays)\n"
                            "print(_state.obs['answer'], _state.obs['replays'])")
    assert error is None, error
    assert out.count("the answer changed the check's own variables") == 2, out
    assert any("_g" in f and "changed by the answer" in f for f in _flags(kernel.records()))


def test_each_observation_leaves_the_kernel_as_the_check_records_it(kernel):
    """What counts is the copy in the pipe: an edit of the kernel's own table afterwards changes nothing the grader
    reads (the grader flags the difference with the footer's signed payload)."""
    kernel.run("from graphcourse.grading.observe import _begin\n_begin('c4', 1)")
    kernel.run("from graphcourse.grading.observe import observe\nobserve('x', [1, 2], hint='h')")
    _, error = kernel.run("from graphcourse.grading.observe import _state\ndict.__setitem__(_state.obs, 'x', "
                          "{'value': 'forged'})\nprint(_state.obs['x'])")
    assert error is None, error
    sent = [r for r in kernel.records() if "obs" in r]
    assert sent == [{"obs": "x", "check": "c4", "record": {"value": [1, 2]}, "hint": "h"}]
    obs, hints = _sent_observations(sent + [{"obs": "x", "check": "other", "record": {"value": 0}}], "c4")
    assert obs == {"x": {"value": [1, 2]}} and hints == {"x": "h"}


def test_code_an_answer_hides_in_a_string_is_the_answers_code(kernel):
    """A lambda evaluated from a string in the answer's namespace (typing's ForwardRef) is not "standard library":
    observations it records during a check are refused."""
    answer = ("import typing\ndef _spec(f: 'lambda: observe(\"k\", 1)'):\n    pass\n"
              "sneak = typing.get_type_hints(_spec)['f']")
    kernel.run(answer_cell(answer))
    kernel.run(answer)
    kernel.run("from graphcourse.grading.observe import _begin\n_begin('c5', 1)")
    out, error = kernel.run("from graphcourse.grading.observe import observe, _state\nobserve.call('s', sneak)\n"
                            "print(sorted(_state.obs), _state.obs['s'])")
    assert error is None, error
    assert "['s'] {'raised': 'AttributeError'}" in out, out
