"""`make grade-me`: a learner grades their own copies in my-work/ through the course's venv, as the README shows."""

from __future__ import annotations

import json
import shutil
import subprocess

import nbformat
import pytest

from graphcourse.authoring import build_exercises as be

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")

# -o: take the installed environment as it is (never reinstall it from a test)
MAKE = ["make", "-s", "-o", ".venv/.course-installed-lab", "grade-me"]


def test_grade_me_with_no_copies_says_to_make_them_and_exits_2(tmp_path):
    run = subprocess.run(MAKE + [f"MY_WORK={tmp_path}"], cwd=be.ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stdout + run.stderr
    assert f"no exercise notebooks in {tmp_path}/: run make my-exercises first" in run.stdout


def test_grade_me_runs_the_grader_through_the_courses_venv():
    """The command make would run (-n: printed, not run): the course's venv, not a bare `python`."""
    run = subprocess.run(["make", "-n", "-o", ".venv/.course-installed-lab", "grade-me"], cwd=be.ROOT,
                         capture_output=True, text=True, timeout=120)
    assert ".venv/bin/python -m graphcourse.grading my-work/ --own-work --report my_grades.json" in run.stdout, run.stdout


def test_grade_me_grades_one_copy_through_the_venv(course_process, tmp_path):
    """One copy with ex01 answered (the model answer), graded on ex01 alone to keep it short."""
    work = tmp_path / "my-work"
    work.mkdir()
    name = "06_exercises.ipynb"
    copy = nbformat.read(be.EXERCISES_DIR / name, as_version=4)
    model = nbformat.read(be.SOLUTIONS_DIR / name, as_version=4)
    answer = next(c.source for c in model.cells if c.metadata.get("graphcourse", {}).get("role") == "answer"
                  and c.metadata["graphcourse"]["exercise"] == "ex01_bucket_picker")
    for cell in copy.cells:
        meta = cell.metadata.get("graphcourse", {})
        if meta.get("role") == "answer" and meta["exercise"] == "ex01_bucket_picker":
            cell.source = answer
    nbformat.write(copy, work / name)
    report = tmp_path / "my_grades.json"
    run = subprocess.run(MAKE + [f"MY_WORK={work}", f"MY_GRADES={report}",
                                 "GRADE_ARGS=--only ex01_bucket_picker --quiet"],
                         cwd=be.ROOT, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    rec = json.loads(report.read_text())["learners"]["my-work"]
    assert rec["exercises"]["ex01_bucket_picker"]["status"] == "passed", rec
    assert "WARNING" not in run.stderr
