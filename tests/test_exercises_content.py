"""Every graded exercise catches its mistake: its checks fail on the stub and on plausible wrong answers, and pass on the solution.

The wrong answers are the mistakes the lessons warn about, written the way a learner would
write them. Each must fail with status "failed" (an assert of the course's checks, not a
crash) and a message that names the mistake. One class of four learners (the solution, the
stubs, two sets of wrong answers) is graded by the real grader in one call.
"""

from __future__ import annotations

import ast
import json
import re
import unittest

import nbformat
import pytest

from graphcourse import build_exercises as be
from graphcourse.grade import grade

SOLUTION = be.SOLUTIONS_DIR / "06_exercises.ipynb"


def _solution_answers() -> dict[str, str]:
    nb = nbformat.read(SOLUTION, as_version=4)
    return {ex.id: nb.cells[ex.answer].source for ex in be.layout_of(nb, SOLUTION.name).exercises}


def _edit(source: str, *pairs: tuple[str, str]) -> str:
    """The solution's answer with some lines changed: each `old` must be there, so a reworded solution fails loudly here."""
    for old, new in pairs:
        assert old in source, f"the solution no longer contains {old!r}: update this wrong answer"
        source = source.replace(old, new)
    return source


def _wrong_answers() -> dict[str, list[tuple[str, str]]]:
    """exercise id -> two (wrong answer source, phrase its failure message must contain)."""
    sol = _solution_answers()
    return {
        "ex01_bucket_picker": [
            (_edit(sol["ex01_bucket_picker"], ("b >= batch_size", "b > batch_size")),  # off by one
             "fits a bucket exactly"),
            (_edit(sol["ex01_bucket_picker"], ("return list(batch) + [pad_value] * (size - len(batch))",
                                               "batch.extend([pad_value] * (size - len(batch)))\n    return batch")),
             "in place"),
        ],
        "ex02_keep_outputs": [
            ("def replay_all(g, batches):\n    return [g.replay(b) for b in batches]", "static output"),
            ("def replay_all(g, batches):\n    return [[v * 2 + 1 for v in b] for b in batches]", "once per batch"),
        ],
        "ex03_remove_the_sync": [
            (_edit(sol["ex03_remove_the_sync"], ("kept.append(tok)", "kept.append(tok.item())"),
                   ('return launch(lambda *ts: [t[0] for t in ts], *kept, name="gather").tolist()', "return kept")),
             "Each .item()"),
            (_edit(sol["ex03_remove_the_sync"],
                   ('return launch(lambda *ts: [t[0] for t in ts], *kept, name="gather").tolist()', "return [t[0] for t in kept]")),
             "without any sync"),
        ],
        "ex04_capture_helper": [
            (_edit(sol["ex04_capture_helper"], ("    for _ in range(warmup):  # lazy set-up happens here, outside capture\n"
                                                "        step(static_x)\n", "")),
             "Warm up first"),
            (_edit(sol["ex04_capture_helper"], ("return list(static_out)", "return static_out")), "Return a copy"),
        ],
        "ex05_diagnose_profiles": [
            (_edit(sol["ex05_diagnose_profiles"], (' + ([p["comm_us"]] if p["comm_us"] else [])', "")), "all-reduce"),
            (_edit(sol["ex05_diagnose_profiles"], ('if p["memory_used"] + p["graph_pool"] > 1.0:', "if False:")),
             "a graph adds memory"),
        ],
        "ex06_frozen_branch": [
            ("from toygraph import launch\n\ndef step_graph_safe(x):\n"
             "    h = launch(lambda v: [3 * a for a in v], x)\n"
             "    if sum(h) > 0:\n"
             "        return launch(lambda v: [a - 10 for a in v], h)\n"
             "    return launch(lambda v: [-a for a in v], h)",
             "a Python `if` on device data"),
            (_edit(sol["ex06_frozen_branch"],
                   ("    return launch(lambda m, a, b:", "    if mask.item():\n        return shifted\n    return negated\n    launch(lambda m, a, b:")),
             "do not read the condition back"),
        ],
    }


def _learner(answers: dict[str, str]) -> nbformat.NotebookNode:
    """The exercises/ copy the builder makes, with these answers written in."""
    nb = nbformat.reads(be.expected_exercises(be.SOLUTIONS_DIR)[SOLUTION.name], as_version=4)
    for ex in be.layout_of(nbformat.read(SOLUTION, as_version=4), SOLUTION.name).exercises:
        nb.cells[ex.answer].source = answers[ex.id]
    return nb


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("class")
    sol, wrong = _solution_answers(), _wrong_answers()
    assert set(wrong) == set(sol), "every exercise needs its wrong answers here"
    learners = {"solution": _learner(sol),
                "stub": nbformat.reads(be.expected_exercises(be.SOLUTIONS_DIR)[SOLUTION.name], as_version=4)}
    for k in range(2):
        learners[f"wrong-{k + 1}"] = _learner({ex: answers[k][0] for ex, answers in wrong.items()})
    for name, nb in learners.items():
        (root / name).mkdir()
        nbformat.write(nb, root / name / SOLUTION.name)
    return {"report": grade([root], timeout_s=30, jobs=2, progress=False), "wrong": wrong, "ids": list(sol)}


def test_there_are_at_least_six_exercises_with_stable_ids(graded):
    ids = graded["ids"]
    assert len(ids) >= 6 and ids == sorted(ids)
    assert all(re.fullmatch(r"ex\d{2}_[a-z0-9_]+", ex) for ex in ids)


def test_the_solution_passes_every_exercise(graded):
    for ex, m in graded["report"]["solution"].items():
        assert m["status"] == "passed" and m["points"] == m["max"] >= 1, (ex, m)


def test_the_stub_fails_every_exercise(graded):
    marks = graded["report"]["stub"]
    assert set(marks) == set(graded["ids"])
    for ex, m in marks.items():
        assert m["status"] in ("failed", "error") and m["points"] == 0, (ex, m)
        assert "NotImplementedError" in m["message"] and m["message"].startswith("not answered yet"), (ex, m)


@pytest.mark.parametrize("k", [0, 1])
def test_each_wrong_answer_fails_with_a_message_that_names_the_mistake(graded, k):
    marks = graded["report"][f"wrong-{k + 1}"]
    for ex, answers in graded["wrong"].items():
        phrase = answers[k][1]
        assert marks[ex]["status"] == "failed" and marks[ex]["points"] == 0, (ex, marks[ex])
        assert phrase in marks[ex]["message"], (ex, phrase, marks[ex]["message"])


def test_the_cuda_check_is_skipped_with_a_line_on_a_cpu():
    nb = nbformat.read(SOLUTION, as_version=4)
    cell = next(c for c in nb.cells if c.get("id") == "ex04_capture_helper-check-3")
    answer = next(c for c in nb.cells if c.get("id") == "ex04_capture_helper-answer")
    assert "torch.cuda.graph" in answer.source  # capture_cuda is in the answer cell
    assert "nbval-ignore-output" in cell.metadata["tags"]  # its output differs between a CPU and a GPU
    assert "raises-exception" in cell.metadata["tags"]  # on a CPU it raises SkipTest: nbval and "run all" go on
    assert cell.source.index("_needs_cuda()") < cell.source.index("capture_cuda(")
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("CUDA is here: test_the_cuda_check_runs_on_a_gpu covers this cell")
    assert [o.get("text") for o in cell.outputs] == [
        "check skipped: needs a CUDA GPU here. The grader marks it skipped; it runs where CUDA exists.\n"]
    with pytest.raises(unittest.SkipTest, match="needs a CUDA GPU"):  # what the grader sees, outside IPython too
        exec(cell.source, {})


def _run_cuda_check(answer: str) -> str | None:
    """Run ex04's answer and its CUDA check in a fresh namespace: None when the check passes, else its message."""
    cells = {c.get("id"): c.source for c in nbformat.read(SOLUTION, as_version=4).cells}
    ns: dict = {}
    exec(answer, ns)
    try:
        exec(cells["ex04_capture_helper-check-3"], ns)
    except AssertionError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize("variant", ["solution", "no warm-up", "no clone", "stub"])
def test_the_cuda_check_runs_on_a_gpu(variant):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU here: the CUDA check of ex04 prints that it was skipped")
    sol = _solution_answers()["ex04_capture_helper"]
    answer = {"solution": sol,
              "no warm-up": sol + "\n_capture = capture_cuda\ncapture_cuda = lambda step, example, warmup=3: _capture(step, example, warmup=0)\n",
              "no clone": _edit(sol, ("return static_out.clone()", "return static_out")),
              "stub": next(c.source for c in nbformat.reads(be.expected_exercises(be.SOLUTIONS_DIR)[SOLUTION.name], as_version=4).cells
                           if c.get("id") == "ex04_capture_helper-answer")}[variant]
    if variant == "stub":  # the stub earns nothing on a GPU either: not answered yet
        with pytest.raises(NotImplementedError):
            _run_cuda_check(answer)
        return
    message = _run_cuda_check(answer)
    if variant == "solution":
        assert message is None, message
    else:
        assert message and ("warm it up" if variant == "no warm-up" else "static_out.clone()") in message, message


def test_solution_outputs_are_deterministic():
    """No timings, addresses or object ids in the stored outputs (nbval compares them on every run)."""
    text = json.dumps([c.get("outputs", []) for c in nbformat.read(SOLUTION, as_version=4).cells])
    assert not re.search(r"0x[0-9a-f]{6,}| at 0x|\d+\.\d+ ?s\b", text), text


def test_answer_cells_hold_only_what_the_learner_writes():
    """No imports or demo loops in an answer cell: a learner who rewrites the whole cell loses nothing given."""
    nb = nbformat.read(SOLUTION, as_version=4)
    for ex in be.layout_of(nb, SOLUTION.name).exercises:
        source = nb.cells[ex.answer].source
        for node in ast.parse(source).body:
            assert isinstance(node, (ast.FunctionDef, ast.ClassDef)), (
                f"{ex.id}: the answer cell has a {type(node).__name__} at line {node.lineno}: move it to a given cell")
            assert be.BEGIN in ast.get_source_segment(source, node), f"{ex.id}: {node.name} has nothing to write"


def test_prose_types_no_figures():
    """Every µs or ms figure a reader sees comes from a cell (the toy's costs or the recorded benchmark), not the prose."""
    nb = nbformat.read(SOLUTION, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            assert not re.search(r"\d\s*(µs|us|ms)\b", cell.source), cell.source


def test_stub_hints_are_valid_python_where_they_quote_code():
    text = be.expected_exercises(be.SOLUTIONS_DIR)[SOLUTION.name]
    assert "[kernel_us] * kernels + ([comm_us] if comm_us else [])" in text  # no precedence trap in the ex05 hint
    assert "[comm_us] if comm_us," not in text


def test_the_notebook_and_readme_give_the_same_grading_command():
    nb = nbformat.read(SOLUTION, as_version=4)
    readme = (be.ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Graded exercises"):]
    section = section[:section.index("\n## ", 3)]
    for text in (nb.cells[-1].source, section):
        assert "python -m graphcourse.grade" in text and ".venv/bin/python -m graphcourse.grade" in text, text
