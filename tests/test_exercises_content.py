"""Every graded exercise catches its mistake: its checks fail on the stub and on plausible wrong answers, and pass on the solution.

The wrong answers are the mistakes the lessons warn about, written the way a learner would
write them. Each must fail with status "failed" (an assert of the course's checks, not a
crash) and a message that names the mistake. One class of four learners (the solution, the
stubs, two sets of wrong answers) is graded by the real grader in one call.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
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


def _answer_lines(source: str) -> set[str]:
    """The model answer's own lines (between the markers) long enough to give something away."""
    lines = source.splitlines()
    out = set()
    for begin, end, _, _ in be.find_regions(source, "answer"):
        out |= {ln.split("  #")[0].strip() for ln in lines[begin + 1:end]}
    return {ln for ln in out if len(ln) >= 12 and not ln.startswith("#")}


_FOLDED_HINT = re.compile(r"\n\n<details><summary>Hint</summary>\n\n(?P<hint>.+?)\n\n</details>$", re.S)


def test_stub_hints_say_what_to_write_not_how():
    """The stub's message, which the grader's report repeats, is one short sentence and quotes no answer code."""
    nb = nbformat.read(SOLUTION, as_version=4)
    text = be.expected_exercises(be.SOLUTIONS_DIR)[SOLUTION.name]
    learner = nbformat.reads(text, as_version=4)
    for ex in be.layout_of(nb, SOLUTION.name).exercises:
        source = nb.cells[ex.answer].source
        hints = [hint for *_, hint in be.find_regions(source, ex.id)]
        assert hints, ex.id
        for hint in hints:
            assert 15 <= len(hint) <= 80, (ex.id, hint, "one short sentence")
            assert not re.search(r"[;=\[\]`]|\w\(|\. \w|: [a-z_]+ = ", hint), (ex.id, hint, "what to write, not the code")
            for line in _answer_lines(source):
                assert line not in hint, (ex.id, hint, line)
            assert f"raise NotImplementedError({hint!r})" in learner.cells[ex.answer].source  # the learner sees it
    assert "[comm_us] if comm_us," not in text  # no precedence trap anywhere the learner reads


def test_every_exercise_ends_with_a_folded_hint_that_is_a_nudge_not_the_code():
    nb = nbformat.read(SOLUTION, as_version=4)
    learner = nbformat.reads(be.expected_exercises(be.SOLUTIONS_DIR)[SOLUTION.name], as_version=4)
    for ex in be.layout_of(nb, SOLUTION.name).exercises:
        heading = nb.cells[ex.heading].source
        assert learner.cells[ex.heading].source == heading  # the learner copy has the same hint
        assert heading.count("<details>") == 1, (ex.id, "one folded hint, at the end of the heading cell")
        found = _FOLDED_HINT.search(heading)
        assert found, (ex.id, heading[-300:])
        hint = found["hint"]
        assert 80 <= len(hint) <= 700 and "```" not in hint, (ex.id, hint)
        for line in _answer_lines(nb.cells[ex.answer].source):
            assert line not in hint, (ex.id, line)
    assert "folded **Hint**" in nb.cells[0].source  # the introduction says where the hints are


def test_ex06_prose_owns_up_to_the_toys_peek_and_shows_a_several_input_launch():
    nb = nbformat.read(SOLUTION, as_version=4)
    layout = be.layout_of(nb, SOLUTION.name)
    ex06 = next(ex for ex in layout.exercises if ex.id == "ex06_frozen_branch")
    prose = nb.cells[ex06.heading].source
    context = "\n".join(nb.cells[i].source for i in ex06.context)
    assert "sum(h)" in context and "sum(h)" in prose  # the peek the prose owns up to is really in the given step
    assert "without charging a sync" in prose and ".item()" in prose and "CPU-side copy" in prose
    assert "as here" not in prose, "the condition here comes from device data peeked at by host code, not from the CPU"
    example = re.search(r"`(launch\(lambda a, b: [^`]+, a, b\))`", prose)
    assert example, "show launch with several inputs"
    from toygraph import ToyDevice, launch
    dev = ToyDevice()
    out = eval(example[1], {"launch": launch, "a": dev.tensor([1, 2]), "b": dev.tensor([10, 20])})
    assert list(out) == [11, 22]  # the one-line example in the prose runs as shown


def test_ex04_lazy_layer_gives_the_warm_up_advice_not_the_keep_it_on_device_one():
    nb = nbformat.read(SOLUTION, as_version=4)
    cells = {c.get("id"): c for c in nb.cells}
    shown = "".join(o.get("text", "") + str(o.get("evalue", "")) for o in cells["ex04_capture_helper-context-1"].outputs)
    assert "warm-up" in shown and "Keep the value on the device" not in shown, shown
    for cid in ("ex04_capture_helper-context-1", "ex04_capture_helper-check-1"):
        assert 'advice="Run the step once eagerly before capture (warm-up)' in cells[cid].source, cid


def test_the_grading_command_works_from_inside_the_exercises_folder(tmp_path):
    """The notebook says the repository-root form needs the root, and gives the form for inside exercises/: it runs."""
    text = nbformat.read(SOLUTION, as_version=4).cells[-1].source
    assert "python -m graphcourse.grade exercises/06_exercises.ipynb" in text and "repository root" in text
    command = "python -m graphcourse.grade 06_exercises.ipynb --report grades.json"
    assert command in text and "inside `exercises/`" in text
    probe = subprocess.run([sys.executable, "-c", "import graphcourse.grade"], cwd=tmp_path, capture_output=True)
    if probe.returncode:
        pytest.skip("the course is not installed in this environment (the notebook says the command needs that)")
    (tmp_path / SOLUTION.name).write_text(be.expected_exercises(be.SOLUTIONS_DIR)[SOLUTION.name], encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # only what is installed, not the repository
    run = subprocess.run([sys.executable, *command.split()[1:], "--quiet"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    report = json.loads((tmp_path / "grades.json").read_text())
    (marks,) = report.values()
    assert len(marks) >= 6 and all(m["message"].startswith("not answered yet") for m in marks.values()), marks


def test_the_notebook_and_readme_give_the_same_grading_command():
    nb = nbformat.read(SOLUTION, as_version=4)
    readme = (be.ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Graded exercises"):]
    section = section[:section.index("\n## ", 3)]
    for text in (nb.cells[-1].source, section):
        assert "python -m graphcourse.grade" in text and ".venv/bin/python -m graphcourse.grade" in text, text
