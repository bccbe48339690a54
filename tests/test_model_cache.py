"""The model answers' run is kept between confined grader runs (graphcourse.grading.model_cache), and only where it
is safe: the same marks with the kept run as with a fresh one; a changed solution, --fresh-model, or a file that
someone else could have written runs the model answers again. Runs the confined grader (root and bubblewrap), like
tests/test_grade.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent / "grading_fixtures"))
from make_fixtures import NAME, require_confinement, solutions_notebook, write_class  # noqa: E402

from graphcourse.grading import model_cache  # noqa: E402
from graphcourse.grading.runner import CellRun, CheckRun, ExerciseRun  # noqa: E402

LEARNERS = {"model": None, "lookup": {"ex01_add": "def add(a, b):\n    return {(1, 2): 3}.get((a, b), 0)"}}


def _marks(report: dict) -> dict:
    return {name: (rec["total"], {c: m["status"] for mark in rec["exercises"].values() for c, m in mark["checks"].items()})
            for name, rec in report["learners"].items()}


def _grade(root: Path, sol: Path, out: str, *extra: str) -> dict:
    env = dict(os.environ, GRAPHCOURSE_MODEL_CACHE=str(root / "cache"))
    proc = subprocess.run([sys.executable, "-m", "graphcourse.grading", str(root / "class"), "--solutions", str(sol),
                           "--report", str(root / out / "grades.json"), "--jobs", "2", "--quiet",
                           "--timeout-per-cell", "10", *extra], capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((root / out / "grades.json").read_text())


def test_a_kept_model_run_gives_the_same_marks_and_is_kept_only_where_safe(course_process, tmp_path: Path) -> None:
    require_confinement()
    sol = write_class(tmp_path, LEARNERS)
    cache = tmp_path / "cache"

    first = _grade(tmp_path, sol, "one")
    assert first["run"]["model_answers"] == "run", first["run"]["model_answers"]
    kept = list(cache.glob("*.json"))
    assert len(kept) == 1 and kept[0].stat().st_mode & 0o777 == 0o600 and cache.stat().st_mode & 0o777 == 0o700
    assert first["learners"]["lookup"]["total"] < first["learners"]["model"]["total"]

    second = _grade(tmp_path, sol, "two")
    assert second["run"]["model_answers"] == "cached"
    assert _marks(second) == _marks(first), "the kept run decides exactly as the fresh one"

    assert _grade(tmp_path, sol, "three", "--fresh-model")["run"]["model_answers"] == "run"

    kept[0].chmod(0o666)  # a file others could have written is never read (the grader rewrites it, 0600)
    assert _grade(tmp_path, sol, "four")["run"]["model_answers"] == "run"
    assert kept[0].stat().st_mode & 0o777 == 0o600

    nb = solutions_notebook()  # a changed check: another digest, so the model answers run again
    nb.cells[4].source += "\nobserve.call('add 2 2', add, 2, 2)"
    nbformat.write(nb, sol / NAME)
    changed = _grade(tmp_path, sol, "five")
    assert changed["run"]["model_answers"] == "run" and len(list(cache.glob("*.json"))) == 2


def test_what_the_cache_reads_back_is_what_it_kept_and_nothing_it_must_not_trust(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("GRAPHCOURSE_MODEL_CACHE", str(tmp_path / "cache"))
    runs = {"ex01_add": ExerciseRun("ex01_add", CellRun("ok", seconds=0.01, outputs=[{"text": "hi"}]),
                                    {"ex01_add/fixed": CheckRun("ex01_add/fixed", "ran", obs={"add 1 2": [3, None, 1.5]},
                                                                hints={"add 1 2": "adding is +"}, seconds=0.2)},
                                    seconds=0.5)}
    assert model_cache.save("k1", runs) == tmp_path / "cache" / "k1.json"
    assert model_cache.load("k1") == runs
    assert model_cache.load("k2") is None, "another digest names another file"
    path = tmp_path / "cache" / "k1.json"
    other = tmp_path / "cache" / "k3.json"
    other.write_text(path.read_text())
    assert model_cache.load("k3") is None, "a file whose key is not its name is not read"
    path.chmod(0o620)
    assert model_cache.load("k1") is None, "group-writable: not read"
    path.chmod(0o600)
    if os.geteuid() == 0:
        os.chown(path, 65534, 65534)
        assert model_cache.load("k1") is None, "owned by someone else: not read"
        os.chown(path, 0, 0)
    link = tmp_path / "cache" / "k4.json"
    link.symlink_to(path)
    assert model_cache.load("k4") is None, "a link is not read"
    assert model_cache.load("k1") == runs


def test_the_digest_follows_what_the_model_run_depends_on(tmp_path: Path) -> None:
    root = tmp_path / "course"
    (root / "graphcourse").mkdir(parents=True)
    (root / "toygraph").mkdir()
    (root / "toygraph" / "a.py").write_text("x = 1\n")
    base = dict(solutions_sha256="s", seed=1, exercises=["ex01"], available=["cpu"], devices=0, course_root=root)
    first = model_cache.key(**base)
    assert model_cache.key(**base) == first
    for change in ({"seed": 2}, {"solutions_sha256": "t"}, {"exercises": ["ex01", "ex02"]}, {"available": ["cuda"]},
                   {"devices": 1}):
        assert model_cache.key(**{**base, **change}) != first, change
    (root / "toygraph" / "a.py").write_text("x = 2\n")
    second = model_cache.key(**base)
    assert second != first, "a change to the course's code names another file"
    (root / "graphcourse" / "facts.toml").write_text("a = 1\n")
    assert model_cache.key(**base) != second, "so does a change to a table the code reads beside itself"


def test_an_unconfined_run_neither_reads_nor_keeps_a_model_run(tmp_path: Path, monkeypatch) -> None:
    """Unconfined, a learner's code runs with the grader's rights and could write the kept run: none is used."""
    from graphcourse.grading import engine
    from graphcourse.grading.sandbox import Confinement

    sol = tmp_path / "solutions"
    sol.mkdir()
    nbformat.write(solutions_notebook(), sol / NAME)
    monkeypatch.setattr(engine, "detect", lambda: Confinement("none", ("no bubblewrap (a test)",)))
    grader = engine.Grader([tmp_path], sol, engine.Options(allow_unconfined=True, cuda=False),
                           engine.Outputs(tmp_path / "r.json"))
    assert grader._model_key() is None
    monkeypatch.setattr(engine, "detect", lambda: Confinement("bwrap", bwrap="/usr/bin/bwrap"))
    confined = engine.Grader([tmp_path], sol, engine.Options(cuda=False), engine.Outputs(tmp_path / "r.json"))
    assert confined._model_key() == model_cache.key(
        solutions_sha256=confined.solutions_digest, seed=confined.seed, exercises=["ex01_add", "ex02_smallest"],
        available=confined.available, devices=0, course_root=confined.course_root)
