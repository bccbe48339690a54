"""The exercise builder: solutions/ is the single source, exercises/ is exactly what the builder writes."""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest
from hypothesis import given
from hypothesis import strategies as st
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from graphcourse.authoring import build_exercises as be

SOLUTIONS = be.SOLUTIONS_DIR
EXERCISES = be.EXERCISES_DIR


def _solution_nbs():
    return [(p, nbformat.read(p, as_version=4)) for p in be.solution_paths(SOLUTIONS)]


def test_exercises_folder_is_what_the_builder_writes_now():
    assert be.stale(SOLUTIONS, EXERCISES) == [], "run `python -m graphcourse.authoring.build_exercises`"
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
        assert all(c.execution_count is not None for c in code), f"{path.name}: run `python -m graphcourse.authoring.build_exercises --execute`"
        assert nb.metadata["kernelspec"]["name"] == "python3"
        assert [c.id for c in be.annotate(nb, path.name).cells] == [c.id for c in nb.cells], (
            f"{path.name}: its cell ids are not the stamped ones: run `python -m graphcourse.authoring.build_exercises --execute`")


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
        by_id = {c.get("id"): c for c in ex_nb.cells}
        for ex in layout.exercises:
            answer = by_id[f"{ex.id}-answer"]
            assert answer.metadata["graphcourse"] == {"exercise": ex.id, "role": "answer", "points": ex.points}
            assert f"{ex.id}:answer" in answer.metadata["tags"]
            assert "raise NotImplementedError(" in answer.source
            for k, i in enumerate(ex.checks, 1):
                hidden = (sol.cells[i].metadata.get("graphcourse", {}).get("check") or {}).get("hidden") is True
                check = by_id.get(f"{ex.id}-check-{k}")
                if hidden:
                    assert check is None, f"{ex.id} check {k} is hidden: it must not reach exercises/"
                    continue
                assert check is not None and check.source == sol.cells[i].source
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


def _tiny(source: str, heading: str = "## ex01_demo: demo (1 point)") -> nbformat.NotebookNode:
    return new_notebook(cells=[new_code_cell("x = 1"), new_markdown_cell(heading), new_code_cell(source),
                               new_code_cell("from graphcourse.grading.observe import observe\nobserve('y', y)")])


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
    assert nb.metadata["graphcourse"]["exercises"] == {"ex01_demo": 1}
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


def _protocol_nb(points_in_heading: int = 2, hidden: bool = True) -> nbformat.NotebookNode:
    cells = [new_code_cell("x = 1"), new_markdown_cell(f"## ex01_demo: demo ({points_in_heading} points)"),
             new_code_cell("def f():\n    ### BEGIN SOLUTION: return 2\n    return 2\n    ### END SOLUTION"),
             new_code_cell("from graphcourse.grading.observe import observe\nobserve.call('f', f)"),
             new_code_cell("from graphcourse.grading.observe import observe\nobserve('secret', f() * 7)")]
    cells[3].metadata["graphcourse"] = {"check": {"name": "visible", "points": 1}}
    cells[4].metadata["graphcourse"] = {"check": {"name": "secret", "points": 1, "hidden": hidden, "needs": []}}
    return new_notebook(cells=cells)


def test_hidden_checks_are_stripped_and_check_metadata_kept():
    nb = be.exercise_notebook(_protocol_nb(), "demo.ipynb")
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.id for c in code] == ["setup-1", "ex01_demo-answer", "ex01_demo-check-1"]
    assert code[2].metadata["graphcourse"]["check"] == {"name": "visible", "points": 1}
    assert "f() * 7" not in be.dumps(nb)
    shown = be.exercise_notebook(_protocol_nb(hidden=False), "demo.ipynb")
    assert "f() * 7" in be.dumps(shown)


@pytest.mark.parametrize("meta, words", [
    ({"points": -1}, "whole number"), ({"points": 1.5}, "whole number"), ({"hidden": "yes"}, "true or false"),
    ({"needs": ["tpu"]}, "needs"), ({"colour": "red"}, "unknown key"), ({"name": "Has Space"}, "lowercase"),
])
def test_bad_check_metadata_is_refused_with_the_cell(meta, words):
    nb = _protocol_nb()
    nb.cells[3].metadata["graphcourse"]["check"].update(meta)
    with pytest.raises(be.ExerciseSourceError, match=words):
        be.exercise_notebook(nb, "demo.ipynb")


def test_a_check_worth_points_that_never_observes_is_refused_by_the_builder_and_the_grader(tmp_path):
    nb = _protocol_nb()
    nb.cells[3].source = "assert f() == 2  # decides inside the kernel, records nothing"
    with pytest.raises(be.ExerciseSourceError, match="never calls observe"):
        be.exercise_notebook(nb, "demo.ipynb")
    from graphcourse.grading.assignment import load_assignment

    (tmp_path / "06_demo.ipynb").write_text(be.dumps(nb))
    with pytest.raises(be.ExerciseSourceError, match="never calls observe"):
        load_assignment(tmp_path / "06_demo.ipynb")
    nb.cells[3].metadata["graphcourse"]["check"]["points"] = 0  # a check worth nothing may just show something
    nb.cells[1].source = "## ex01_demo: demo (1 point)"
    be.exercise_notebook(nb, "demo.ipynb")


def test_a_heading_whose_points_are_not_the_checks_sum_is_refused():
    with pytest.raises(be.ExerciseSourceError, match="sum of its checks"):
        be.exercise_notebook(_protocol_nb(points_in_heading=3), "demo.ipynb")


def test_every_solutions_notebook_gets_its_learner_copy_and_ids_are_unique_across_them():
    wanted = be.expected_exercises(SOLUTIONS)
    assert {"06_exercises.ipynb", "07_compile_and_control_flow.ipynb"} <= set(wanted)
    seen: dict[str, str] = {}
    for name, text in wanted.items():
        nb = nbformat.reads(text, as_version=4)
        assert nb.metadata["graphcourse"]["source"] == name
        for ex in nb.metadata["graphcourse"]["exercises"]:
            assert ex not in seen, f"{ex} in {seen.get(ex)} and {name}"
            seen[ex] = name


def test_an_exercise_id_used_in_two_solutions_notebooks_is_refused_naming_both(tmp_path, capsys):
    src = tmp_path / "solutions"
    src.mkdir()
    nbformat.write(_protocol_nb(), src / "06_first.ipynb")
    nbformat.write(_protocol_nb(), src / "07_second.ipynb")  # ex01_demo again
    with pytest.raises(be.ExerciseSourceError, match=r"ex01_demo is used in both 06_first.ipynb and 07_second.ipynb"):
        be.expected_exercises(src)
    assert be.main(["--solutions", str(src), "--out", str(tmp_path / "out")]) == 1
    assert "ids must be unique" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    from graphcourse.errors import GraphCourseError
    from graphcourse.grading.assignment import load_assignments

    with pytest.raises(GraphCourseError, match="ex01_demo is used in both 06_first.ipynb and 07_second.ipynb"):
        load_assignments(src)  # the grader refuses them too: a learner's answer is found by its exercise id


def test_execute_only_runs_the_named_notebook_and_refuses_an_unknown_one(tmp_path):
    src = tmp_path / "solutions"
    src.mkdir()
    first = _protocol_nb()
    second = _protocol_nb()
    second.cells[1].source = "## ex02_other: demo (2 points)"
    nbformat.write(first, src / "06_first.ipynb")
    nbformat.write(second, src / "07_second.ipynb")
    before = (src / "06_first.ipynb").read_text()
    changed = be.execute_solutions(src, only=["07_second.ipynb"])
    assert [p.name for p in changed] == ["07_second.ipynb"]
    assert (src / "06_first.ipynb").read_text() == before
    assert nbformat.read(src / "07_second.ipynb", as_version=4).cells[2].execution_count is not None
    with pytest.raises(be.ExerciseSourceError, match="no such solutions notebook"):
        be.execute_solutions(src, only=["09_missing.ipynb"])
