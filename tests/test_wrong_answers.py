"""Every shipped wrong answer earns nothing for the checks it targets; the model answers earn full marks; a stub earns
nothing on a CPU grader.

tests/wrong_answers/EXERCISE/NAME.py is an answer cell that embodies one misconception (its header says which, where
the course teaches it, and which checks must catch it). Each is handed in in the exercises/ copy of the notebook
holding that exercise (06_exercises, 07_compile_and_control_flow, ...), the k-th wrong answer of each of that
notebook's exercises by the same learner (learner_of: the grader grades each exercise on its own); the learner's
other answer cells are deleted and the other notebooks not handed in. The whole class, with the model answers and an untouched
copy of every notebook, is graded once, by the real grader's command line (`python -m graphcourse.grading`), with
the assignment's fixed hidden inputs (run the test with GRAPHCOURSE_GRADING_SEED=N for other seeds).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from graphcourse.core.exercise_format import NEEDS

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "adversarial"))
import classroom  # noqa: E402  (tests/adversarial/classroom.py: learner copies of the exercises notebook)

WRONG = HERE / "wrong_answers"
RIGHT = HERE / "right_answers"


def header(path: Path) -> dict[str, str]:
    return classroom.parse_header(path.read_text(encoding="utf-8"))


def wrong_answers() -> list[Path]:
    return sorted(WRONG.glob("ex*/*.py"))


def right_answers() -> list[Path]:
    return sorted(RIGHT.glob("ex*/*.py"))


def answer_id(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}" + (" (right)" if path.is_relative_to(RIGHT) else "")


_PACKED: dict[Path, str] = {}


def learner_of(path: Path) -> str:
    """The learner of the graded class who hands in this answer.

    Answers are packed: the k-th wrong answer of every exercise of one notebook goes to that notebook's k-th learner
    (the grader grades each exercise on its own: after a reset of the kernel, or in a fresh one after an answer that
    left it unclean), so 150 answers need about 60 learners, and about 90 fewer kernels start. Right answers are
    packed the same way among themselves, never beside a wrong one."""
    if not _PACKED:
        book = {ex.id: b.stem for b in classroom.BOOKS for ex in classroom.exercises(b)}
        for kind, paths in (("wrong", wrong_answers()), ("right", right_answers())):
            seen: dict[str, int] = {}
            for answer in paths:  # sorted: the same packing every run
                ex = answer.parent.name
                seen[ex] = seen.get(ex, 0) + 1
                _PACKED[answer] = f"{book[ex]}--{kind}-{seen[ex]}"
    return _PACKED[path]


def answered_by(learner: str) -> set[str]:
    """The exercises `learner` answers (its other answer cells are deleted)."""
    return {answer.parent.name for answer, name in _PACKED.items() if name == learner}


def check_names() -> dict[str, set[str]]:
    """exercise id -> names of its checks (visible and hidden), from every notebook in solutions/."""
    out: dict[str, set[str]] = {}
    for book in classroom.BOOKS:
        nb = nbformat.read(book, as_version=4)
        for ex in classroom.exercises(book):
            for k, i in enumerate(ex.checks, 1):
                spec = nb.cells[i].metadata.get("graphcourse", {}).get("check", {})
                if spec.get("points", 1):
                    out.setdefault(ex.id, set()).add(spec.get("name") or f"check-{k}")
    return out


# --- the files themselves (fast) ---------------------------------------------------------------------

def test_every_exercise_has_at_least_three_wrong_answers_each_saying_what_it_gets_wrong():
    names = check_names()
    by_exercise: dict[str, list[Path]] = {}
    for path in wrong_answers():
        assert path.parent.name in names, f"{path}: no exercise {path.parent.name} in solutions/"
        head = header(path)
        assert {"misconception", "source", "targets"} <= set(head), (path, head)
        assert len(head["misconception"]) > 20, path
        targets = head["targets"].split()
        assert targets and set(targets) <= names[path.parent.name], (path, targets, names[path.parent.name])
        compile(path.read_text(encoding="utf-8"), str(path), "exec")
        by_exercise.setdefault(path.parent.name, []).append(path)
    for ex in names:
        assert len(by_exercise.get(ex, [])) >= 3, f"{ex} needs at least three wrong answers, has {by_exercise.get(ex)}"


def test_the_readme_tables_every_wrong_answer():
    readme = (WRONG / "README.md").read_text(encoding="utf-8")
    for path in wrong_answers():
        assert f"`{path.stem}`" in readme, f"tests/wrong_answers/README.md does not list {path.parent.name}/{path.stem}"


def test_no_check_prints_an_expected_answer_in_plain_sight():
    """Check cells hold no expected values: no `assert ... ==`, no table of answers (ex05's were in plain sight)."""
    for nb, ex in [(nbformat.read(b, as_version=4), ex) for b in classroom.BOOKS for ex in classroom.exercises(b)]:
        for i in ex.checks:
            source = nb.cells[i].source
            assert not re.search(r"^\s*assert\b", source, re.M), (ex.id, source[:200])
            assert "_EXPECTED" not in source and "launch-bound" not in source and "compute-bound" not in source, ex.id
    learner = (classroom.be.EXERCISES_DIR / classroom.SOLUTION.name).read_text(encoding="utf-8")
    for answer in ("'communication-bound')", '"communication-bound")', "(False, 'out of memory')"):
        assert answer not in learner


# --- graded by the real grader (one run for the whole class) --------------------------------------------

@pytest.fixture(scope="session")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("wrong-class")
    model = classroom.model_answers()
    learners = {"model-answers": classroom.learner_books(model), "untouched-copy": classroom.learner_books({})}
    packed: dict[str, dict[str, str]] = {}
    for path in wrong_answers() + right_answers():
        packed.setdefault(learner_of(path), {})[path.parent.name] = path.read_text(encoding="utf-8")
    for name, answers in packed.items():
        # the other answer cells deleted: those exercises are "missing" (no kernel), so the class grades quickly;
        # only the notebook holding the exercises is handed in (the others: "not handed in", no kernel either)
        learners[name] = classroom.learner_books(answers, others="delete",
                                                 books=[classroom.book_of(next(iter(answers)))])
    for name, books in learners.items():
        (root / name).mkdir()
        for file_name, nb in books.items():
            nbformat.write(nb, root / name / file_name)
    out = tmp_path_factory.mktemp("wrong-out")
    report = out / "grades.json"
    seed = ["--seed", os.environ["GRAPHCOURSE_GRADING_SEED"]] if os.environ.get("GRAPHCOURSE_GRADING_SEED") else []
    proc = subprocess.run([sys.executable, "-m", "graphcourse.grading", str(root), "--report", str(report), "--quiet",
                           "--jobs", str(min(2, os.cpu_count() or 1)), *seed],
                          capture_output=True, text=True, timeout=3600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(report.read_text(encoding="utf-8"))
    if os.environ.get("GRAPHCOURSE_KEEP_REPORTS"):  # keep the class report for a closing note
        Path(os.environ["GRAPHCOURSE_KEEP_REPORTS"]).mkdir(parents=True, exist_ok=True)
        Path(os.environ["GRAPHCOURSE_KEEP_REPORTS"], "wrong_answers.json").write_text(report.read_text())
    return data


def _ex(data, learner, ex_id):
    return data["learners"][learner]["exercises"][ex_id]


def test_the_model_answers_earn_every_point_graded_here(graded):
    rec = graded["learners"]["model-answers"]
    assert set(rec["exercises"]) == set(check_names()), "every exercise of every notebook is graded"
    assert {b["status"] for b in rec["notebooks"].values()} == {"graded"}, rec["notebooks"]
    for ex_id, mark in rec["exercises"].items():
        assert mark["points"] + mark.get("open", 0) == mark["max"] > 0, (ex_id, mark)
        for check_id, c in mark["checks"].items():
            assert c["status"] in ("passed", "not-graded"), (check_id, c)
            if c["status"] == "not-graded":
                assert any(why in c["message"] for why in NEEDS.values()), c  # what the check needs, named


@pytest.mark.parametrize("path", right_answers(), ids=answer_id)
def test_a_right_answer_written_another_way_earns_every_point_graded_here(graded, path):
    mark = _ex(graded, learner_of(path), path.parent.name)
    assert mark["points"] + mark.get("open", 0) == mark["max"], mark
    assert {c["status"] for c in mark["checks"].values()} <= {"passed", "not-graded"}, mark["checks"]


def test_an_untouched_copy_earns_nothing_on_a_cpu_grader(graded):
    rec = graded["learners"]["untouched-copy"]
    assert rec["total"] == 0, {ex: m["points"] for ex, m in rec["exercises"].items() if m["points"]}
    for ex_id, mark in rec["exercises"].items():
        assert mark["points"] == 0 and mark["status"] != "passed", (ex_id, mark)


@pytest.mark.parametrize("path", wrong_answers(), ids=answer_id)
def test_a_wrong_answer_earns_nothing_for_the_checks_it_targets(graded, path):
    ex_id = path.parent.name
    learner = learner_of(path)
    mark = _ex(graded, learner, ex_id)
    for name in header(path)["targets"].split():
        check = mark["checks"][f"{ex_id}/{name}"]
        assert check["points"] == 0 and check["status"] != "passed", (name, check)
    assert mark["points"] < mark["max"] - mark.get("open", 0), mark
    assert mark["status"] != "passed"
    deleted = [m["points"] for e, m in graded["learners"][learner]["exercises"].items() if e not in answered_by(learner)]
    assert deleted and sum(deleted) == 0, "a deleted answer earned points"


def test_failed_checks_teach_without_giving_the_value(graded):
    """A failed check's message carries the check's hint, not the model's observation."""
    path = WRONG / "ex05_diagnose_profiles" / "graph_fixes_oom.py"
    mark = _ex(graded, learner_of(path), "ex05_diagnose_profiles")
    message = json.dumps(mark)
    assert "memory first" in message
