"""solutions/07_compile_and_control_flow.ipynb: its checks tell the model answer from each wrong answer.

The checks run in-process (trusted code) with graphcourse.grading.observe, exercise by exercise, once with
the model answer and once with each wrong answer of tests/wrong_answers/compile/, on the same hidden seed;
a wrong answer must observe something different from the model in every check its header targets.
The full grader (sandbox, signatures) is tested by the grader's own tests.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import nbformat
import pytest

grading = pytest.importorskip("graphcourse.grading.observe", reason="the grader's observe module (branch grader)")
pytest.importorskip("toygraph.conditional", reason="the toy's launch(out=) and views (branch toy)")

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions" / "07_compile_and_control_flow.ipynb"
WRONG = Path(__file__).resolve().parent / "wrong_answers" / "compile"
SEED = 20261130


def _cells() -> list:
    return nbformat.read(SOLUTIONS, as_version=4).cells


def _exercise_cells(exercise: str) -> dict[str, list]:
    out: dict[str, list] = {"setup": [], "context": [], "answer": [], "check": []}
    for cell in _cells():
        meta = cell.metadata.get("graphcourse", {})
        role = meta.get("role")
        if role == "setup" or (role in ("context", "answer", "check") and meta.get("exercise") == exercise):
            out[role].append(cell)
    return out


def _observe(exercise: str, answer: str | None = None) -> dict[str, dict]:
    """{check name: its observations} with the model answer, or with `answer` in its place."""
    from graphcourse.grading.observe import inputs, observe

    cells = _exercise_cells(exercise)
    namespace: dict = {}
    observe.recorded().clear()
    with contextlib.redirect_stdout(io.StringIO()):
        for cell in cells["setup"] + cells["context"]:
            exec(compile(cell.source, f"<{exercise} context>", "exec"), namespace)
        exec(compile(answer if answer is not None else cells["answer"][0].source, "<answer>", "exec"),
             namespace)
        seen = {}
        for cell in cells["check"]:
            check = cell.metadata["graphcourse"]["check"]
            if "cuda" in check.get("needs", []):
                continue
            inputs._seed(SEED, f"{exercise}/{check['name']}", True)
            observe.label(check["name"])
            exec(compile(cell.source, f"<{exercise}/{check['name']}>", "exec"), namespace)
            seen[check["name"]] = dict(observe.recorded().get(check["name"], {}))
    inputs._seed(0, "", False)
    return seen


def _wrong_answers() -> list[tuple[str, Path]]:
    return [(p.parent.name, p) for p in sorted(WRONG.glob("ex*/*.py"))]


def _targets(path: Path) -> list[str]:
    line = next(ln for ln in path.read_text().splitlines() if ln.startswith("# targets:"))
    return [t.strip() for t in line.split(":", 1)[1].split(",")]


@pytest.mark.parametrize("exercise", ["ex11_keep_compiled_outputs", "ex12_k_steps_with_eos"])
def test_the_model_answer_observes_the_same_twice_and_every_check_observes_something(exercise: str) -> None:
    first, second = _observe(exercise), _observe(exercise)
    assert first == second, "checks must be deterministic for one seed"
    assert all(first.values()), f"a check observed nothing: {first}"
    assert not any("raised" in rec for obs in first.values() for rec in obs.values()), first


@pytest.mark.parametrize("exercise, path", _wrong_answers(), ids=lambda v: getattr(v, "stem", v))
def test_each_wrong_answer_is_caught_by_the_checks_it_targets(exercise: str, path: Path) -> None:
    model, wrong = _observe(exercise), _observe(exercise, path.read_text())
    for name in _targets(path):
        if name not in model:  # a check that needs a GPU: not run here
            continue
        assert wrong[name] != model[name], f"{path.name}: check {name} did not tell it from the model answer"


@pytest.mark.parametrize("exercise", ["ex11_keep_compiled_outputs", "ex12_k_steps_with_eos"])
def test_the_untouched_stub_earns_nothing(exercise: str) -> None:
    model = _observe(exercise)
    stub = _exercise_cells(exercise)["answer"][0].source
    lines, out, skipping = stub.splitlines(), [], False
    for line in lines:
        if "### BEGIN SOLUTION" in line:
            indent = line[: len(line) - len(line.lstrip())]
            out.append(f"{indent}raise NotImplementedError('your answer here')")
            skipping = True
        elif "### END SOLUTION" in line:
            skipping = False
        elif not skipping:
            out.append(line)
    stubbed = _observe(exercise, "\n".join(out))
    assert all(stubbed[name] != model[name] for name in model)


def test_the_wrong_answers_table_lists_every_file() -> None:
    table = (WRONG / "README.md").read_text()
    for exercise, path in _wrong_answers():
        assert f"`{path.stem}`" in table and exercise in table
