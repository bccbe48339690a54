"""A check sees the names it reads as the exercise gave them, and the toy's graph as it was captured.

A check cell reads names it does not bind: the exercise's own (``SharedPool``, from a context cell) and Python's
built-ins (``len``). An answer cell that rebinds one at its top level, or patches a given class in place, would
change what every later check computes: a wrong answer could rebind ``SharedPool`` to a class whose replay copies, or
define ``len`` to count one graph where it captured five, or rebind ``ToyGraph``, with which the given SharedPool
builds its graphs, and earn the checks its plain form fails. The grader keeps
what those names were bound to after the given cells and puts it back before each check (observe._restore_given);
rebinding one while a check runs spoils that check's observations. The toy's stream graph keeps its dependencies in
guarded dicts, so an answer cannot rewrite a one-stream capture into a fork/join one.

Each attack below is a wrong answer from the course's misconceptions plus the trick; it is graded beside the same
wrong answer without the trick, and must earn no check the plain one fails. An honest learner who binds a built-in's
name as a scratch variable (``sum = 0``) at the top of a correct answer, or sorts the exercise's own list to look at
it, earns full marks, told that the checks used Python's own (the exercise's own). Runs the confined grader (root and bubblewrap), like tests/test_grade.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "adversarial"))
sys.path.insert(0, str(HERE / "grading_fixtures"))
import classroom  # noqa: E402
from make_fixtures import require_confinement  # noqa: E402


PLAIN = {
    "ex07_shared_pool": '''def serve(pool, batches):
    """Each batch's own results, one plain list per batch, in arrival order."""
    outs = []
    for batch in batches:
        bucket = bucket_for(len(batch), pool.buckets)
        outs.append(pool.replay(bucket, pad_to(batch, bucket))[:len(batch)])  # WRONG: keeps the pool's buffer
    return [o.tolist() for o in outs]  # read too late: a later replay of the pool overwrote it
''',
    "ex10_baked_values": (HERE / "wrong_answers" / "ex10_baked_values" / "recapture_on_change.py").read_text(),
    "ex16_fork_join": (HERE / "wrong_answers" / "ex16_fork_join" / "one_stream.py").read_text(),
}

TRICKS = {  # each learner: the plain wrong answer, then (or before) what it does to the checks' names or the toy
    "rebinds_given": {
        "ex07_shared_pool": '''_GivenPool = SharedPool  # the exercise's class, from its context cell


class SharedPool(_GivenPool):  # the checks build their pools from this name: a replay that hands out copies
    def replay(self, bucket, rows, stream="main"):
        out = _GivenPool.replay(self, bucket, rows, stream)
        return out.device.tensor(out.tolist())


''' + PLAIN["ex07_shared_pool"],
        "ex10_baked_values": '''_pools_seen = []
_builtin_len = len


def len(obj):  # shadows the built-in for every later cell: "one graph on the device"
    for pools in _pools_seen:
        if obj is pools:
            return 1
    return _builtin_len(obj)


_plain_step = None
''' + PLAIN["ex10_baked_values"].replace("def make_tempered_step(dev, example):\n",
                                        "def make_tempered_step(dev, example):\n    _pools_seen.append(dev.graph_pools)\n"),
        "ex16_fork_join": PLAIN["ex16_fork_join"].replace("    return out\n", '''    n = {node.name: id(node) for node in sg.graph.nodes}  # then the DAG rewritten to the fork/join one
    sg.deps.clear()
    sg.deps.update({n["left_shift"]: {n["left_scale"]}, n["combine"]: {n["left_shift"], n["right_square"]}})
    sg.stream_of.update({n["right_square"]: "side"})
    return out
'''),
    },
    "rebinds_what_given_code_reads": {
        "ex07_shared_pool": '''from toygraph import ToyGraph as _GivenGraph

_outputs = {}


class ToyGraph(_GivenGraph):  # the given SharedPool builds its graphs with this name: each output read is a copy
    @property
    def static_output(self):
        kept = _outputs.get(id(self))
        return kept if kept is None else kept.device.tensor(kept.tolist())

    @static_output.setter
    def static_output(self, value):
        _outputs[id(self)] = value


''' + PLAIN["ex07_shared_pool"],
    },
    "patches_given": {  # flagged by the static review; graded as if an instructor had cleared it
        "ex07_shared_pool": '''_given_replay = SharedPool.replay


def _copying_replay(self, bucket, rows, stream="main"):
    out = _given_replay(self, bucket, rows, stream)
    return out.device.tensor(out.tolist())


SharedPool.replay = _copying_replay  # the given class, patched in place

''' + PLAIN["ex07_shared_pool"],
        "ex10_baked_values": PLAIN["ex10_baked_values"].replace(
            "def make_tempered_step(dev, example):\n",
            "def make_tempered_step(dev, example):\n    global len  # rebinds the built-in while the check runs\n"
            "    len = lambda obj: 1\n"),
    },
}

TRICKS["thread_rebinds"] = {  # a thread that rebinds len again and again; graded as if an instructor had cleared it
    "ex10_baked_values": '''import time
from logging.handlers import QueueListener

_own_len = len


def _few(obj):
    return 1 if type(obj).__name__ == "Record" else _own_len(obj)


len = _own_len


class _Ticker:
    def get(self, block=True):
        global len
        while True:
            len = _few  # put back by each check's header, rebound a moment later
            time.sleep(0.0005)


QueueListener(_Ticker()).start()

''' + PLAIN["ex10_baked_values"],
}

HONEST_SCRATCH = {  # beside the model answer: scratch variables named like built-ins the checks call, or trying
    "ex07_shared_pool": "list = [3, 1, 2]  # the batch sizes I tried\n\n",  # things out on the exercise's own data
    "ex10_baked_values": "sum = 0\nfor t in (0.5, 1.0, 2.0):\n    sum += t  # temperatures I tried\n\n",
    "ex16_fork_join": "round = 3  # how many times I re-ran the capture\n\n",
    "ex13_capture_sizes": "candidates.sort(reverse=True)  # the largest first, to look at them\ncandidates.append(512)\n\n",
}


def _books(answers: dict[str, str]) -> dict[str, nbformat.NotebookNode]:
    return {b.name: nb for b, nb in ((b, classroom.learner_copy({k: v for k, v in answers.items()
                                                                  if classroom.book_of(k) == b}, "delete", b))
                                     for b in {classroom.book_of(e) for e in answers})}


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict:
    require_confinement()
    root = tmp_path_factory.mktemp("rebinding")
    model = classroom.model_answers()
    learners = {
        "plain": dict(PLAIN),
        "rebinds_given": TRICKS["rebinds_given"],
        "rebinds_what_given_code_reads": TRICKS["rebinds_what_given_code_reads"],
        "patches_given": TRICKS["patches_given"],
        "thread_rebinds": TRICKS["thread_rebinds"],
        "honest_scratch": {ex: HONEST_SCRATCH[ex] + model[ex] for ex in HONEST_SCRATCH},
        "model": {ex: model[ex] for ex in HONEST_SCRATCH},
    }
    for name, answers in learners.items():
        for book, nb in _books(answers).items():
            (root / "class" / name).mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, root / "class" / name / book)
    report = root / "grades.json"
    only = [a for ex in HONEST_SCRATCH for a in ("--only", ex)]
    proc = subprocess.run([sys.executable, "-m", "graphcourse.grading", str(root / "class"), "--report", str(report),
                           "--quiet", "--jobs", "2", "--allow-reviewed", "patches_given", "--allow-reviewed",
                           "thread_rebinds", *only],
                          capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(report.read_text())["learners"]


def _passed(mark: dict) -> set[str]:
    return {c for c, m in mark["checks"].items() if m["status"] == "passed"}


@pytest.mark.parametrize("name", sorted(TRICKS))
def test_a_trick_earns_no_check_its_plain_wrong_answer_fails(graded, name):
    for ex_id in TRICKS[name]:
        plain, tricked = graded["plain"]["exercises"][ex_id], graded[name]["exercises"][ex_id]
        assert plain["points"] < plain["max"], (ex_id, "the plain wrong answer must fail something", plain)
        gained = _passed(tricked) - _passed(plain)
        assert not gained and tricked["points"] <= plain["points"], (name, ex_id, gained, tricked)


def test_the_tricks_were_noticed(graded):
    marks = graded["rebinds_given"]["exercises"]
    assert "the exercise's own SharedPool" in marks["ex07_shared_pool"]["message"]
    assert "Python's own len" in marks["ex10_baked_values"]["message"]
    assert "the exercise's own ToyGraph" in graded["rebinds_what_given_code_reads"]["exercises"]["ex07_shared_pool"][
        "message"]
    assert marks["ex16_fork_join"]["status"] == "review", marks["ex16_fork_join"]  # refused by the toy at run time
    assert "a dict the toy keeps" in " ".join(marks["ex16_fork_join"]["review"])
    cleared = graded["patches_given"]["exercises"]
    assert "the exercise's own SharedPool" in cleared["ex07_shared_pool"]["message"]  # put back before each check
    assert "cleared by an instructor" in cleared["ex10_baked_values"]["message"]
    assert any("len" in f for f in cleared["ex10_baked_values"]["review"]), cleared["ex10_baked_values"]


def test_scratch_names_and_trials_on_the_given_data_beside_a_right_answer_earn_full_marks(graded):
    for name in ("model", "honest_scratch"):
        for ex_id, mark in graded[name]["exercises"].items():
            assert mark["points"] == mark["max"] - mark.get("open", 0) > 0, (name, ex_id, mark)
            assert "review" not in mark, (name, ex_id, mark)
    told = graded["honest_scratch"]["exercises"]
    for ex_id, builtin in (("ex07_shared_pool", "list"), ("ex10_baked_values", "sum"), ("ex16_fork_join", "round")):
        assert f"Python's own {builtin}" in told[ex_id]["message"], told[ex_id]
    assert "the exercise's own candidates" in told["ex13_capture_sizes"]["message"]  # put back, not held for review
    assert "own" not in graded["model"]["exercises"]["ex07_shared_pool"]["message"]
