"""Grading a class on many machines with Dask's distributed scheduler (graphcourse.grading.cluster).

The slow test starts a scheduler and two workers as processes of their own on the loopback address, grades a small
class through them (``--dask``), grades the same class on this machine alone, and requires the same report: every
learner's record (times apart), the CSV and the JUnit file; then a rerun resumes instead of grading again, and no
worker leaves a process or a scratch folder behind. Like tests/test_grading_repeat.py it needs the confined grader
(root and bubblewrap). The fast tests check how learners are shared out, what a worker refuses, and the error when
no scheduler answers.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "grading_fixtures"))
from make_fixtures import NAME, learner_copy, require_confinement, solutions_notebook, stub_copy, write_class  # noqa: E402

from graphcourse.errors import GraphCourseError  # noqa: E402
from graphcourse.grading.cluster import _payload, _plain_name, _sweep_stale, shares  # noqa: E402
from graphcourse.grading.engine import Grader, Options, Outputs  # noqa: E402
from graphcourse.grading.notebooks import Learner  # noqa: E402

distributed = pytest.importorskip("distributed", reason="the cluster extra (pip install -e '.[cluster]')")

LEARNERS = {
    "model": None,
    "lookup": {"ex01_add": "def add(a, b):\n    return {(1, 2): 3, (0.5, 0.25): 0.75}.get((a, b), 0)"},
    "small_only": {"ex01_add": "def add(a, b):\n    return a + b if abs(a) < 500_000 else 0"},
    "off_by_one": {"ex02_smallest": "def smallest(xs):\n    if not xs:\n        raise ValueError('empty')\n"
                                    "    return sorted(xs)[1] if len(xs) > 1 else xs[0]"},
}


def test_learners_are_shared_in_proportion_to_each_workers_threads() -> None:
    learners = [Learner(f"l{i}", []) for i in range(7)]
    dealt = shares(learners, {"tcp://b:1": 1, "tcp://a:1": 2})
    assert [l.name for l in dealt["tcp://a:1"]] == ["l0", "l1", "l3", "l4", "l6"]
    assert [l.name for l in dealt["tcp://b:1"]] == ["l2", "l5"]
    assert shares(learners, {"tcp://b:1": 1, "tcp://a:1": 2}) == dealt, "the same class is dealt the same way"
    assert set(shares(learners[:1], {"tcp://a:1": 4, "tcp://b:1": 4})) == {"tcp://a:1"}, "no empty shares sent"


@pytest.mark.parametrize("name", ["", ".", "..", "../x.ipynb", "a/b.ipynb", "a\\b.ipynb", "a\0.ipynb"])
def test_a_worker_refuses_file_names_that_are_not_plain(name: str) -> None:
    with pytest.raises(GraphCourseError, match="not a plain file name"):
        _plain_name(name, "notebook")
    assert _plain_name("06_exercises (1).ipynb", "notebook") == "06_exercises (1).ipynb"


def test_the_client_reads_learner_files_as_one_machine_does_never_through_a_link(tmp_path: Path) -> None:
    secret = tmp_path / "solutions.ipynb"
    secret.write_text('{"the model answer": 1}')
    (tmp_path / "ada").mkdir()
    honest = tmp_path / "ada" / NAME
    nbformat.write(learner_copy(), honest)
    swapped = tmp_path / "ada" / "07_swapped.ipynb"
    swapped.symlink_to(secret)  # a notebook swapped for a link after the class was found
    sent = _payload(Learner("ada", [honest, swapped], ["a note"]))
    assert sent["name"] == "ada" and sent["notes"] == ["a note"]
    first, second = sent["files"]
    assert first["data"] == honest.read_bytes() and first["mtime_ns"] == honest.stat().st_mtime_ns
    assert "data" not in second and second["name"] == "07_swapped.ipynb" and second["error"], second
    assert b"model answer" not in repr(sent).encode()


def test_a_worker_sweeps_scratch_folders_whose_worker_died(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    (tmp_path / f"graphcourse-cluster-{dead}-abc").mkdir()
    (tmp_path / f"graphcourse-cluster-{os.getpid()}-def").mkdir()  # a live worker's: kept
    _sweep_stale(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == [f"graphcourse-cluster-{os.getpid()}-def"]


def test_no_scheduler_is_a_clear_error_and_no_learner_is_lost(tmp_path: Path) -> None:
    sol = tmp_path / "solutions"
    sol.mkdir()
    nbformat.write(solutions_notebook(), sol / NAME)
    (tmp_path / "class" / "ada").mkdir(parents=True)
    nbformat.write(learner_copy(), tmp_path / "class" / "ada" / NAME)
    closed = subprocess.run([sys.executable, "-c", "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); "
                             "print(s.getsockname()[1])"], capture_output=True, text=True).stdout.strip()
    grader = Grader([tmp_path / "class"], sol, Options(dask=f"tcp://127.0.0.1:{closed}", dask_timeout=3,
                                                       progress=False), Outputs(tmp_path / "grades.json"))
    (tmp_path / "grades.json").write_text('{"an earlier report": true}')
    with pytest.raises(GraphCourseError, match="no Dask scheduler answered.*dask scheduler"):
        asyncio.run(grader.run())
    assert json.loads((tmp_path / "grades.json").read_text()) == {"an earlier report": True}, \
        "a run that could not start leaves the earlier report as it was"


def _processes_named(word: str) -> list[str]:
    out = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if word in line]


@pytest.fixture(scope="module")
def cluster_and_alone(tmp_path_factory):
    require_confinement()
    root = tmp_path_factory.mktemp("cluster")
    sol = write_class(root, LEARNERS, subfolder="hw")  # one level deeper, as a learner's folder may be
    (root / "class" / "untouched").mkdir()
    nbformat.write(stub_copy(), root / "class" / "untouched" / NAME)
    (root / "roster.txt").write_text("\n".join([*LEARNERS, "untouched", "absent"]) + "\n")
    dask = [sys.executable, "-m", "distributed.cli.dask_scheduler"]
    (root / "worker-tmp").mkdir()
    env = {**os.environ, "TMPDIR": str(root / "worker-tmp")}  # where the workers' scratch folders go: checked at the end
    procs = [subprocess.Popen(dask + ["--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                                      "--scheduler-file", str(root / "scheduler.json")],
                              stdout=subprocess.DEVNULL, stderr=open(root / "scheduler.log", "w"), env=env,
                              start_new_session=True)]
    try:
        for _ in range(600):
            if (root / "scheduler.json").is_file() and (root / "scheduler.json").stat().st_size:
                break
            time.sleep(0.1)
        address = json.loads((root / "scheduler.json").read_text())["address"]
        for w in (1, 2):  # two grading machines, one learner at a time each
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1", "--nworkers", "1",
                 "--no-dashboard", "--name", f"grader{w}"], stdout=subprocess.DEVNULL,
                stderr=open(root / f"worker{w}.log", "w"), env=env, start_new_session=True))
        for _ in range(600):  # both workers registered
            log = "".join((root / f"worker{w}.log").read_text() for w in (1, 2))
            if log.count("Registered to:") >= 2:
                break
            time.sleep(0.1)
        runs = {}
        common = ["--solutions", str(sol), "--timeout-per-cell", "10", "--quiet", "--roster", str(root / "roster.txt")]
        for how, extra in (("cluster", ["--dask", address]), ("alone", ["--jobs", "2"]), ("again", ["--dask", address])):
            out = root / ("cluster" if how == "again" else how)  # 'again': a rerun into the cluster's report
            started = time.monotonic()
            proc = subprocess.run([sys.executable, "-m", "graphcourse.grading", str(root / "class"), *common, *extra,
                                   "--report", str(out / "grades.json"), "--csv", str(out / "grades.csv"),
                                   "--junit", str(out / "grades.xml"), "--feedback", str(out / "feedback"),
                                   "--gradescope", str(out / "gradescope")],
                                  capture_output=True, text=True, timeout=1200)
            assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
            runs[how] = {"report": json.loads((out / "grades.json").read_text()), "out": out, "stdout": proc.stdout,
                         "seconds": time.monotonic() - started,
                         "csv": (out / "grades.csv").read_text(), "junit": (out / "grades.xml").read_text()}
        runs["worker_tmp"] = root / "worker-tmp"
        yield runs
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def _records(report: dict) -> dict:
    def strip(o):
        if isinstance(o, dict):
            return {k: strip(v) for k, v in o.items() if k != "seconds"}
        return [strip(v) for v in o] if isinstance(o, list) else o
    return strip(report["learners"])


def test_two_workers_give_the_report_of_one_machine(cluster_and_alone, course_process) -> None:
    cluster, alone = cluster_and_alone["cluster"]["report"], cluster_and_alone["alone"]["report"]
    assert cluster["run"]["seed"] == alone["run"]["seed"]
    assert set(cluster["learners"]) == {*LEARNERS, "untouched", "absent"}
    assert _records(cluster) == _records(alone)
    marks = {n: r["total"] for n, r in cluster["learners"].items()}
    assert marks["model"] > marks["small_only"] and marks["model"] > marks["lookup"], marks
    assert marks["model"] > marks["off_by_one"] and marks["untouched"] == marks["absent"] == 0, marks
    assert cluster["learners"]["absent"]["status"] == "not-handed-in"
    workers = cluster["run"]["cluster"]["workers"]
    assert len(workers) == 2 and all(w["confined"] for w in workers), workers
    assert sorted(w["learners"] for w in workers) == [2, 3], "five learners with files, shared between two workers"
    assert cluster["run"]["confined"] is True and cluster["run"]["status"] == "complete"
    assert "on 2 Dask worker(s)" in cluster_and_alone["cluster"]["stdout"]


def test_every_output_of_the_cluster_run_matches_the_one_machine_run(cluster_and_alone, course_process) -> None:
    runs = cluster_and_alone
    assert runs["cluster"]["csv"] == runs["alone"]["csv"]
    assert runs["cluster"]["junit"] == runs["alone"]["junit"] and "<testcase" in runs["cluster"]["junit"]
    for how in ("cluster", "alone"):
        out = runs[how]["out"]
        pages = sorted(p.name for p in (out / "feedback").glob("*.html"))
        assert "index.html" in pages and len(pages) == len(runs[how]["report"]["learners"]) + 1
        assert len(list((out / "gradescope").glob("*.json"))) == len(runs[how]["report"]["learners"])


def test_a_rerun_on_the_cluster_keeps_every_learner_and_leaves_nothing_behind(cluster_and_alone, course_process) -> None:
    again = cluster_and_alone["again"]["report"]
    assert again["run"].get("kept_from_earlier_report") == 5, again["run"]
    assert again["run"]["cluster"] == cluster_and_alone["cluster"]["report"]["run"]["cluster"], \
        "a rerun that keeps everyone still says which machines graded them, under which time limits"
    assert _records(again) == _records(cluster_and_alone["alone"]["report"])
    tmp = cluster_and_alone["worker_tmp"]
    assert not _processes_named(str(tmp)), "a worker's grader outlived its task"
    assert not list(tmp.glob("graphcourse-cluster-*")), "a worker left its scratch folder"
