"""The grader: pristine checks, one status per exercise, never a hang, never a write to the learner's files.

One class of learners, each a way to break a notebook, is generated from solutions/ in a
temporary folder and graded in a single call (kernel start-up is the cost, so the class
is graded once and every test reads that report).
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from graphcourse import build_exercises as be
from graphcourse.grade import _failure, answer_cells, defined_names, discover, fallback_answer, load_solutions, main, table

SOLUTION = be.solution_paths(be.SOLUTIONS_DIR)[0]
TIMEOUT_S = 10  # seconds a cell may run: ex04's CUDA check imports torch (~2.5 s alone, more beside an infinite loop on 2 cores)


def _learner_copy(answers: dict[str, str] | None = None) -> nbformat.NotebookNode:
    """The exercises/ copy the builder makes, with some answers written in (the model answer where given as 'solution')."""
    nb = nbformat.reads(be.expected_exercises(be.SOLUTIONS_DIR)[SOLUTION.name], as_version=4)
    sol = nbformat.read(SOLUTION, as_version=4)
    layout = be.layout_of(sol, SOLUTION.name)
    for ex in layout.exercises:
        text = (answers or {}).get(ex.id, "solution")
        nb.cells[ex.answer].source = sol.cells[ex.answer].source if text == "solution" else text
    return nb


def _ids() -> list[str]:
    return [ex.id for ex in be.layout_of(nbformat.read(SOLUTION, as_version=4)).exercises]


def _passed_but(**statuses: str) -> dict[str, str]:
    """Every exercise passed, except the ones named (the other exercises must not suffer from one learner's mistake)."""
    return {ex: statuses.get(ex, "passed") for ex in _ids()}


def _drop(nb, exercise_id: str, role: str) -> None:
    nb.cells = [c for c in nb.cells if c.metadata.get("graphcourse", {}).get("exercise") != exercise_id
                or c.metadata["graphcourse"]["role"] != role]


def _replace_checks(nb, exercise_id: str, source: str) -> None:
    for c in nb.cells:
        if c.metadata.get("graphcourse", {}).get("exercise") == exercise_id and c.metadata["graphcourse"]["role"] == "check":
            c.source = source


WRONG = {
    "ex01_bucket_picker": "def pick_bucket(batch_size, buckets):\n    return None\n\ndef pad_batch(batch, size, pad_value=0):\n    return batch",
    "ex02_keep_outputs": "def replay_all(g, batches):\n    return [g.replay(b) for b in batches]",
}


def _class(root: Path) -> dict[str, Path]:
    ex1, ex2 = _ids()[:2]
    learners = {}

    def save(name, nb):
        folder = root / name
        folder.mkdir()
        path = folder / SOLUTION.name
        nbformat.write(nb, path)
        learners[name] = path

    save("full", _learner_copy())
    save("stub", nbformat.reads(be.expected_exercises(be.SOLUTIONS_DIR)[SOLUTION.name], as_version=4))
    nb = _learner_copy({ex1: WRONG[ex1]})
    _drop(nb, ex1, "check")
    save("deleted_check", nb)
    nb = _learner_copy({ex2: WRONG[ex2]})
    _replace_checks(nb, ex2, "assert True")
    save("assert_true", nb)
    save("infinite_loop", _learner_copy({ex1: "while True:\n    pass"}))
    save("kernel_dies", _learner_copy({ex1: "import os\nos._exit(1)"}))
    nb = _learner_copy()
    _drop(nb, ex2, "answer")
    answer = answer_cells(nb, ex1)[0]
    del answer.metadata["graphcourse"]  # matched by its tag alone
    save("missing", nb)
    (root / "corrupt").mkdir()
    learners["corrupt"] = root / "corrupt" / SOLUTION.name
    learners["corrupt"].write_text('{"cells": [ {"cell_type": "code", "sou')
    return learners


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def _answer(exercise_id: str) -> str:
    nb = nbformat.read(SOLUTION, as_version=4)
    return next(nb.cells[ex.answer].source for ex in be.layout_of(nb, SOLUTION.name).exercises if ex.id == exercise_id)


def _more_learners(root: Path, learners: dict[str, Path]) -> None:
    """Learners for the reviewed problems: two candidate notebooks, an answer moved to a new cell, a stubbed capture_cuda."""
    ex1, ex2 = _ids()[:2]
    folder = root / "duplicate"
    folder.mkdir()
    blank, answered = folder / SOLUTION.name, folder / f"{Path(SOLUTION.name).stem} (1).ipynb"
    nbformat.write(nbformat.reads(be.expected_exercises(be.SOLUTIONS_DIR)[SOLUTION.name], as_version=4), blank)
    nbformat.write(_learner_copy(), answered)
    os.utime(blank, (1_700_000_000, 1_700_000_000))  # the blank copy is older: the answered one is graded
    os.utime(answered, (1_700_000_100, 1_700_000_100))
    learners["duplicate"] = answered

    nb = _learner_copy()
    _drop(nb, ex2, "answer")
    nb.cells.append(nbformat.v4.new_code_cell("print('scratch')"))
    nb.cells.append(nbformat.v4.new_code_cell(_answer(ex2)))  # retyped in a new cell, with no metadata
    nb.cells.append(nbformat.v4.new_code_cell("x = 1"))
    (root / "new_cell").mkdir()
    learners["new_cell"] = root / "new_cell" / SOLUTION.name
    nbformat.write(nb, learners["new_cell"])

    stubbed = nbformat.reads(be.expected_exercises(be.SOLUTIONS_DIR)[SOLUTION.name], as_version=4)
    stub = next(c.source for c in stubbed.cells if c.get("id") == "ex04_capture_helper-answer")
    sol = _answer("ex04_capture_helper")
    cut = "def capture_cuda("
    (root / "cuda_stub").mkdir()
    learners["cuda_stub"] = root / "cuda_stub" / SOLUTION.name
    nbformat.write(_learner_copy({"ex04_capture_helper": sol[:sol.index(cut)] + stub[stub.index(cut):]}), learners["cuda_stub"])


def _digest(root: Path) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def _grade(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "graphcourse.grade", *args], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("class")
    learners = _class(root)
    _more_learners(root, learners)
    before = _digest(root)
    out = tmp_path_factory.mktemp("out")
    proc = _grade(str(root), "--report", str(out / "grades.json"), "--csv", str(out / "grades.csv"),
                  "--timeout-per-cell", str(TIMEOUT_S), "--jobs", "2")
    return {"proc": proc, "report": json.loads((out / "grades.json").read_text()) if proc.returncode == 0 else None,
            "csv": out / "grades.csv", "before": before, "after": _digest(root), "learners": learners}


def _status(graded, learner):
    assert graded["proc"].returncode == 0, graded["proc"].stderr
    return {ex: m["status"] for ex, m in graded["report"][learner].items()}


def test_a_class_is_graded_in_one_call(graded):
    assert graded["proc"].returncode == 0, graded["proc"].stderr
    assert set(graded["report"]) == set(graded["learners"])
    assert "full" in graded["proc"].stdout and "total" in graded["proc"].stdout  # the readable table
    for marks in graded["report"].values():
        assert set(marks) == set(_ids())
        for m in marks.values():
            assert m["status"] in ("passed", "failed", "error", "timeout", "missing") and m["message"]
            assert m["points"] == (m["max"] if m["status"] == "passed" else 0)


def test_solutions_get_full_marks(graded):
    assert set(_status(graded, "full").values()) == {"passed"}


def test_generated_exercises_get_zero(graded):
    for ex, m in graded["report"]["stub"].items():
        assert m["points"] == 0 and m["status"] in ("failed", "error"), (ex, m)


def test_deleting_a_check_earns_nothing(graded):
    ex1, ex2 = _ids()[:2]
    assert _status(graded, "deleted_check") == _passed_but(**{ex1: "failed"})
    assert "17" in graded["report"]["deleted_check"][ex1]["message"]  # the pristine check's teaching message


def test_replacing_a_check_by_assert_true_earns_nothing(graded):
    ex1, ex2 = _ids()[:2]
    assert _status(graded, "assert_true") == _passed_but(**{ex2: "failed"})
    assert "static output" in graded["report"]["assert_true"][ex2]["message"]


def test_an_infinite_loop_times_out_that_exercise_only(graded):
    ex1, ex2 = _ids()[:2]
    assert _status(graded, "infinite_loop") == _passed_but(**{ex1: "timeout"})


def test_a_dying_kernel_is_an_error_for_that_exercise_only(graded):
    ex1, ex2 = _ids()[:2]
    assert _status(graded, "kernel_dies") == _passed_but(**{ex1: "error"})
    assert "kernel died" in graded["report"]["kernel_dies"][ex1]["message"]


def test_a_missing_answer_is_missing_and_a_tag_alone_still_matches(graded):
    ex1, ex2 = _ids()[:2]
    assert _status(graded, "missing") == _passed_but(**{ex2: "missing"})


def test_a_corrupt_notebook_is_an_error_with_a_reason(graded):
    for m in graded["report"]["corrupt"].values():
        assert m["status"] == "error" and "could not read" in m["message"]


def test_the_learners_files_are_never_written(graded):
    assert graded["after"] == graded["before"]


def test_the_csv_is_a_gradebook(graded):
    rows = list(csv.DictReader(graded["csv"].open()))
    assert {r["learner"] for r in rows} == set(graded["learners"])
    full = next(r for r in rows if r["learner"] == "full")
    assert full["total"] == full["max"] != "0"


def test_one_corrupt_file_on_its_own(tmp_path):
    bad = tmp_path / "alice.ipynb"
    bad.write_text("not a notebook")
    report = tmp_path / "r.json"
    assert main([str(bad), "--report", str(report), "--quiet"]) == 0
    marks = json.loads(report.read_text())["alice"]
    assert {m["status"] for m in marks.values()} == {"error"}


def test_the_grader_says_why_it_cannot_run(tmp_path, capsys):
    with pytest.raises(SystemExit) as bad_args:
        main([str(tmp_path / "nobody"), "--report", str(tmp_path / "r.json")])
    assert bad_args.value.code == 2 and "does not exist" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    (tmp_path / "class").mkdir()
    assert main([str(tmp_path / "class"), "--report", str(tmp_path / "r.json"), "--solutions", str(tmp_path / "empty")]) == 1
    assert "no solutions notebooks" in capsys.readouterr().err
    assert main([str(tmp_path / "class"), "--report", str(tmp_path / "r.json")]) == 1
    assert "no learner notebooks" in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()


def test_two_candidate_notebooks_grade_the_newest_and_say_so(graded):
    assert set(_status(graded, "duplicate").values()) == {"passed"}
    blank, answered = SOLUTION.name, f"{Path(SOLUTION.name).stem} (1).ipynb"
    for m in graded["report"]["duplicate"].values():
        assert "warning: 2 notebooks copy" in m["message"] and blank in m["message"] and answered in m["message"], m
    out = graded["proc"].stdout
    line = next(x for x in out.splitlines() if x.startswith("warning: duplicate:"))
    assert blank in line and answered in line and "most recently modified" in line


def test_an_answer_retyped_in_a_new_cell_is_found_and_noted(graded):
    ex1, ex2 = _ids()[:2]
    assert _status(graded, "new_cell") == _passed_but()
    message = graded["report"]["new_cell"][ex2]["message"]
    assert "not found: graded cell" in message and "replay_all" in message
    assert "not found" not in graded["report"]["new_cell"][ex1]["message"]


def test_a_check_that_cannot_run_here_is_recorded_as_skipped(graded):
    """On a CPU the CUDA check of ex04 is skipped, and says so; on a GPU the stubbed capture_cuda fails."""
    full, stub = graded["report"]["full"]["ex04_capture_helper"], graded["report"]["cuda_stub"]["ex04_capture_helper"]
    out = graded["proc"].stdout
    if _cuda():
        assert "skipped" not in full["message"] and full["status"] == "passed"
        assert stub["status"] == "error" and stub["points"] == 0 and stub["message"].startswith("not answered yet"), stub
    else:
        for m in (full, stub):
            assert m["status"] == "passed" and "1 check(s) skipped: needs a CUDA GPU" in m["message"], m
        assert "3/3 passed*" in out and "\n* " in out  # the mark and its footnote
        assert sum(x.startswith("warning:") and "skipped" in x for x in out.splitlines()) == 1
    assert "skipped" not in graded["report"]["full"]["ex01_bucket_picker"]["message"]


def test_unanswered_always_reads_not_answered_yet():
    for role in ("answer", "check"):
        status, message = _failure("raised", "NotImplementedError", "write it", role, 1, 10)
        assert status == "error" and message.startswith("not answered yet"), message


def test_table_marks_skipped_checks_with_a_footnote():
    report = {"ann": {"ex01_a": {"points": 3, "max": 3, "status": "passed",
                                 "message": "all 2 checks that ran passed; 1 check(s) skipped: needs a CUDA GPU"},
                      "ex02_b": {"points": 0, "max": 1, "status": "failed", "message": "nope"}}}
    text = table(report)
    assert "3/3 passed*" in text and "0/1 failed*" not in text and text.splitlines()[-1].startswith("* ")
    report["ann"]["ex01_a"]["message"] = "all 2 checks passed"
    assert "*" not in table(report)


def test_defined_names_and_the_fallback_answer_cell():
    assert defined_names("import os\ndef f():\n    g = 1\nclass C: pass\nx, (y, z) = 1, (2, 3)\nn: int = 1\n%time f()") == {
        "f", "C", "x", "y", "z", "n"}
    assert defined_names("def broken(:") == set()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("def f(): pass"), nbformat.v4.new_code_cell("def f(): return 1\ng = 2")])
    check = nb.cells[0]
    check.metadata["graphcourse"] = {"role": "check", "exercise": "ex01_a"}
    assert fallback_answer(nb, {"f", "g"}, given=set()) == 1
    assert fallback_answer(nb, {"f"}, given={"def f(): return 1\ng = 2"}) is None  # a given cell, and a graded one


def test_a_folder_of_copies_of_one_notebook_is_one_learner(tmp_path):
    solutions = load_solutions(be.SOLUTIONS_DIR)
    folder = tmp_path / "bob"
    folder.mkdir()
    stub = be.expected_exercises(be.SOLUTIONS_DIR)[SOLUTION.name]
    for name in (SOLUTION.name, f"{Path(SOLUTION.name).stem} (1).ipynb"):
        (folder / name).write_text(stub)
    assert [(n, len(f)) for n, f in discover([folder], solutions)] == [("bob", 2)]
    for f in list(folder.iterdir()):
        f.rename(folder / f"{'ann' if '(1)' in f.name else 'cy'}.ipynb")  # a flat class folder: one learner each
    assert sorted(n for n, _ in discover([folder], solutions)) == ["ann", "cy"]


def test_quiet_hides_only_the_progress_bar(tmp_path, capsys):
    bad = tmp_path / "dan.ipynb"
    bad.write_text("not a notebook")
    assert main([str(bad), "--report", str(tmp_path / "r.json"), "--quiet"]) == 0
    captured = capsys.readouterr()
    assert "dan" in captured.out and "total" in captured.out and "grading" not in captured.err
