"""The exercise builder: solutions/ is the single source, exercises/ is exactly what the builder writes."""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest
from hypothesis import given
from hypothesis import strategies as st
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from graphcourse import build_exercises as be
from graphcourse.grade import grade_learner

SOLUTIONS = be.SOLUTIONS_DIR
EXERCISES = be.EXERCISES_DIR


def _solution_nbs():
    return [(p, nbformat.read(p, as_version=4)) for p in be.solution_paths(SOLUTIONS)]


def test_exercises_folder_is_what_the_builder_writes_now():
    assert be.stale(SOLUTIONS, EXERCISES) == [], "run `python -m graphcourse.build_exercises`"
    assert be.main(["--check"]) == 0


def test_build_into_a_fresh_folder_matches_and_is_idempotent(tmp_path):
    changed = be.build(SOLUTIONS, tmp_path)
    assert {p.name for p in changed} == {p.name for p in be.solution_paths(SOLUTIONS)}
    for p in changed:
        assert p.read_text() == (EXERCISES / p.name).read_text()
    assert be.build(SOLUTIONS, tmp_path) == []


def test_check_reports_a_stale_or_extra_copy(tmp_path, capsys):
    be.build(SOLUTIONS, tmp_path)
    target = next(tmp_path.glob("*.ipynb"))
    target.write_text(target.read_text().replace("YOUR CODE HERE", "YOUR CODE THERE"))
    (tmp_path / "99_orphan.ipynb").write_text("{}")
    assert be.main(["--check", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert target.name in err and "99_orphan.ipynb" in err


def test_solutions_are_stored_executed_and_stamped():
    for path, nb in _solution_nbs():
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert all(c.execution_count is not None for c in code), f"{path.name}: run `python -m graphcourse.build_exercises --execute`"
        assert nb.metadata["kernelspec"]["name"] == "python3"
        assert [c.id for c in be.annotate(nb, path.name).cells] == [c.id for c in nb.cells], (
            f"{path.name}: its cell ids are not the stamped ones: run `python -m graphcourse.build_exercises --execute`")


def test_every_exercise_has_a_stable_id_an_answer_and_checks():
    ids = []
    for path, nb in _solution_nbs():
        layout = be.layout_of(nb, path.name)
        assert layout.setup, f"{path.name}: needs a set-up cell"
        for ex in layout.exercises:
            assert ex.points >= 1 and ex.checks
            ids.append(ex.id)
    assert len(ids) == len(set(ids)) >= 6  # issue 4: at least six graded exercises
    assert ids == sorted(ids)


def test_learner_copy_has_stubs_no_answers_and_no_outputs():
    for path, sol in _solution_nbs():
        ex_nb = nbformat.read(EXERCISES / path.name, as_version=4)
        layout = be.layout_of(sol, path.name)
        assert ex_nb.metadata["graphcourse"]["source"] == path.name
        for cell in ex_nb.cells:
            assert be.BEGIN not in cell.source and be.END not in cell.source
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None
        for ex in layout.exercises:
            answer = ex_nb.cells[ex.answer]
            assert answer.id == f"{ex.id}-answer"
            assert answer.metadata["graphcourse"] == {"exercise": ex.id, "role": "answer", "points": ex.points}
            assert f"{ex.id}:answer" in answer.metadata["tags"]
            assert "raise NotImplementedError(" in answer.source
            for k, i in enumerate(ex.checks, 1):
                check = ex_nb.cells[i]
                assert check.id == f"{ex.id}-check-{k}" and check.source == sol.cells[i].source
                assert check.metadata["editable"] is False and check.metadata["deletable"] is False


@given(indent=st.sampled_from(["", "    ", "        ", "\t"]), hint=st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=40),
       body=st.lists(st.text(st.characters(min_codepoint=97, max_codepoint=122), min_size=1, max_size=8), max_size=4))
def test_stub_keeps_the_marker_indentation_and_drops_the_answer(indent, hint, body):
    hint = hint.lstrip(" :.-").rstrip()
    src = "\n".join(["def f():", f"{indent}### BEGIN SOLUTION: {hint}" if hint else f"{indent}### BEGIN SOLUTION",
                     *[f"{indent}{b} = 1" for b in body], f"{indent}### END SOLUTION", "x = 2"])
    out = be.stub_source(src, "ex09_demo", "test").splitlines()
    assert out[0] == "def f():" and out[-1] == "x = 2" and len(out) == 4
    assert out[2].startswith(f"{indent}raise NotImplementedError(")
    assert eval(out[2].strip()[len("raise NotImplementedError("):-1]) == (hint or "ex09_demo: write your answer here, in place of this line")


def _tiny(source: str, heading: str = "## ex01_demo: demo (3 points)") -> nbformat.NotebookNode:
    return new_notebook(cells=[new_code_cell("x = 1"), new_markdown_cell(heading), new_code_cell(source), new_code_cell("assert y == 2")])


@pytest.mark.parametrize("source, words", [
    ("### BEGIN SOLUTION\ny = 2", "never closed"),
    ("y = 2\n### END SOLUTION", "no '### BEGIN SOLUTION' before it"),
    ("### BEGIN SOLUTION\n### BEGIN SOLUTION\ny = 2\n### END SOLUTION", "opens '### BEGIN SOLUTION' again"),
])
def test_unbalanced_markers_are_refused_with_the_cell_and_line(source, words):
    with pytest.raises(be.ExerciseSourceError, match="cell 3") as info:
        be.exercise_notebook(_tiny(source), "tiny.ipynb")
    assert words in str(info.value)


def test_tiny_notebook_points_roles_and_refusals(tmp_path, capsys):
    nb = be.exercise_notebook(_tiny("    ### BEGIN SOLUTION\ny = 2\n### END SOLUTION"), "tiny.ipynb")
    assert nb.metadata["graphcourse"]["exercises"] == {"ex01_demo": 3}
    assert [c.get("id") for c in nb.cells if c.cell_type == "code"] == ["setup-1", "ex01_demo-answer", "ex01_demo-check-1"]
    with pytest.raises(be.ExerciseSourceError, match="outside an exercise"):
        be.layout_of(new_notebook(cells=[new_code_cell("### BEGIN SOLUTION\n### END SOLUTION")]))
    with pytest.raises(be.ExerciseSourceError, match="no check cell"):
        be.layout_of(new_notebook(cells=[new_markdown_cell("## ex01_a"), new_code_cell("### BEGIN SOLUTION\n### END SOLUTION")]))
    src = tmp_path / "solutions"
    src.mkdir()
    nbformat.write(_tiny("### BEGIN SOLUTION\ny = 2"), src / "bad.ipynb")
    assert be.main(["--solutions", str(src), "--out", str(tmp_path / "out")]) == 1
    assert "never closed" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_builder_never_overwrites_a_learners_work(tmp_path):
    src, out = tmp_path / "solutions", tmp_path / "exercises"
    shutil.copytree(SOLUTIONS, src)
    be.build(src, out)
    copy = next(out.glob("*.ipynb"))
    nb = nbformat.read(copy, as_version=4)
    answer = next(c for c in nb.cells if c.metadata.get("graphcourse", {}).get("role") == "answer")
    answer.source = "def pick_bucket(n, b):\n    return 42"
    nbformat.write(nb, copy)
    learner_text = copy.read_text()
    source = src / copy.name  # the source changes, so the builder wants to rewrite the copy
    sol = nbformat.read(source, as_version=4)
    sol.cells[0].source += "\n\nOne more sentence."
    nbformat.write(sol, source)
    with pytest.raises(be.LearnerWorkError, match="has been written"):
        be.build(src, out)
    assert copy.read_text() == learner_text
    assert be.main(["--solutions", str(src), "--out", str(out)]) == 1
    assert copy.read_text() == learner_text
    be.build(src, out, force=True)
    assert "One more sentence." in copy.read_text()
    with pytest.raises(be.LearnerWorkError, match="solutions folder"):
        be.build(src, src)


def test_every_exercise_fails_on_its_stub_and_passes_on_its_solution(tmp_path):
    """Graded by the real grader: full marks for the solutions, nothing but failed/error for the stubs."""
    names = [p.name for p in be.solution_paths(SOLUTIONS)]
    solved = grade_learner([SOLUTIONS / n for n in names], str(SOLUTIONS), timeout_s=30)
    stubbed = grade_learner([EXERCISES / n for n in names], str(SOLUTIONS), timeout_s=30)
    assert solved.keys() == stubbed.keys() and solved
    for ex in solved:
        assert solved[ex]["status"] == "passed" and solved[ex]["points"] == solved[ex]["max"], (ex, solved[ex])
        assert stubbed[ex]["status"] in ("failed", "error") and stubbed[ex]["points"] == 0, (ex, stubbed[ex])
