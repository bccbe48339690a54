"""The exercises' content: checks to the protocol, points per check, hidden checks, texts that hold, the self-check.

Fast tests, in this process: the model answers and the shipped wrong answers are run on the visible checks through
graphcourse.authoring.selfcheck (the learner's own self-check), so a check that stops telling a misconception from the model
answer fails here in seconds. tests/test_wrong_answers.py grades the same answers with the real grader.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from graphcourse.authoring import build_exercises as be
from graphcourse.authoring import selfcheck

SOLUTION = be.SOLUTIONS_DIR / "06_exercises.ipynb"
LEARNER = be.EXERCISES_DIR / "06_exercises.ipynb"
WRONG = Path(__file__).resolve().parent / "wrong_answers"


def _nb():
    return nbformat.read(SOLUTION, as_version=4)


def _layout():
    return be.layout_of(_nb(), SOLUTION.name)


def _spec(cell) -> dict:
    return cell.metadata.get("graphcourse", {}).get("check", {})


def _books() -> list[tuple[Path, nbformat.NotebookNode, be.Layout]]:
    """Every solutions notebook (06_exercises, 07_compile_and_control_flow, ...), read with its layout."""
    out = []
    for path in be.solution_paths(be.SOLUTIONS_DIR):
        nb = nbformat.read(path, as_version=4)
        out.append((path, nb, be.layout_of(nb, path.name)))
    return out


def _where(exercise: str) -> tuple[nbformat.NotebookNode, be.Layout]:
    """The solutions notebook holding an exercise, and its layout."""
    for _, nb, layout in _books():
        if any(e.id == exercise for e in layout.exercises):
            return nb, layout
    raise LookupError(f"no exercise {exercise} in solutions/")


def _all_exercises() -> list[str]:
    return [ex.id for _, _, layout in _books() for ex in layout.exercises]


def _answers() -> dict[str, str]:
    return {ex.id: nb.cells[ex.answer].source for _, nb, layout in _books() for ex in layout.exercises}


def test_ten_exercises_with_stable_ids_including_the_corrected_lessons():
    ids = [ex.id for ex in _layout().exercises]
    assert ids == sorted(ids) and len(ids) >= 10
    assert all(re.fullmatch(r"ex\d{2}_[a-z0-9_]+", ex) for ex in ids)
    for topic in ("shared_pool", "padded_kv", "graphed_aliasing", "baked_values"):
        assert any(topic in ex for ex in ids), topic


def test_exercise_ids_are_unique_across_every_solutions_notebook_and_each_is_built():
    ids = _all_exercises()
    assert len(ids) == len(set(ids)) and len(ids) >= 12, ids
    assert {"ex11_keep_compiled_outputs", "ex12_k_steps_with_eos"} <= set(ids)
    for path, _, layout in _books():
        learner = nbformat.read(be.EXERCISES_DIR / path.name, as_version=4)
        assert set(learner.metadata["graphcourse"]["exercises"]) == {e.id for e in layout.exercises}, path.name
        assert learner.metadata["graphcourse"]["source"] == path.name


@pytest.mark.parametrize("book", [p.name for p in be.solution_paths(be.SOLUTIONS_DIR)])
def test_every_check_has_a_name_and_points_and_the_heading_says_them(book):
    nb = nbformat.read(be.SOLUTIONS_DIR / book, as_version=4)
    for ex in be.layout_of(nb, book).exercises:
        heading = nb.cells[ex.heading].source
        specs = [_spec(nb.cells[i]) for i in ex.checks]
        assert all(s.get("name") for s in specs), ex.id
        assert len({s["name"] for s in specs}) == len(specs), ex.id
        total = sum(s.get("points", 1) for s in specs)
        assert f"({total} points)" in heading.splitlines()[0], (ex.id, total)
        assert "**Points.**" in heading
        for s in specs:
            if s.get("points", 1) and not s.get("hidden"):
                assert re.search(rf"`{s['name']}` \({s['points']} points?", heading), (ex.id, s)
        hidden = [s for s in specs if s.get("hidden")]
        assert hidden, f"{ex.id} has no hidden check"
        assert all(f"a hidden check ({s['points']} point" in heading for s in hidden), ex.id


def test_hidden_checks_live_only_in_solutions():
    for path, nb, layout in _books():
        learner = nbformat.read(be.EXERCISES_DIR / path.name, as_version=4)
        visible = {c.source for c in learner.cells}
        for ex in layout.exercises:
            for i in ex.checks:
                assert (nb.cells[i].source in visible) != bool(_spec(nb.cells[i]).get("hidden")), (ex.id, i)


def test_checks_observe_and_never_assert_an_expected_value():
    for nb, ex in [(nb, ex) for _, nb, layout in _books() for ex in layout.exercises]:
        for i in ex.checks:
            source, spec = nb.cells[i].source, _spec(nb.cells[i])
            tree = ast.parse(source)
            assert not any(isinstance(n, ast.Assert) for n in ast.walk(tree)), (ex.id, spec)
            if spec.get("points", 1):
                assert "observe" in source, (ex.id, spec)
            for line in source.splitlines():
                assert len(line) <= 100, (ex.id, line)
    text = LEARNER.read_text(encoding="utf-8")
    for leak in ("'communication-bound')", "(True, 'launch-bound'", "_EXPECTED", "expected ["):
        assert leak not in text, leak


def test_learner_functions_are_called_through_observe_so_a_raising_answer_cannot_abort_a_check():
    from graphcourse.grading.notebooks import defined_names

    for nb, ex in [(nb, ex) for _, nb, layout in _books() for ex in layout.exercises]:
        mine = defined_names(nb.cells[ex.answer].source)
        for i in ex.checks:
            if not _spec(nb.cells[i]).get("points", 1):
                continue
            tree = ast.parse(nb.cells[i].source)
            # a learner function may be called inside a lambda or a helper function the check defines
            inside_lambda = {id(n) for lam in ast.walk(tree) if isinstance(lam, (ast.Lambda, ast.FunctionDef))
                             for n in ast.walk(lam)}
            for node in ast.walk(tree):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in mine
                        and id(node) not in inside_lambda):
                    pytest.fail(f"{ex.id}: {node.func.id}(...) called bare in a check (line {node.lineno}): use "
                                "observe.call so that a raising answer is recorded, not a crashed check")


def test_the_cuda_check_declares_its_need_and_says_so_on_a_cpu():
    nb = _nb()
    cells = {c.get("id"): c for c in nb.cells}
    cell = next(c for c in nb.cells if _spec(c).get("name") == "cuda_run")
    assert _spec(cell).get("needs") == ["cuda"]
    assert "nbval-ignore-output" in cell.metadata.get("tags", []) and "raises-exception" not in cell.metadata.get("tags", [])
    structure = next(c for c in nb.cells if _spec(c).get("name") == "cuda_structure")
    assert not _spec(structure).get("needs") and _spec(structure)["points"] >= 2  # graded on any machine
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        shown = "".join(o.get("text", "") for o in cell.outputs)
        assert "needs a CUDA GPU" in shown and "open" in shown, shown
    assert cells  # the stored notebook has stamped ids


def test_the_compiled_exercise_declares_its_cuda_check_and_a_cpu_grader_leaves_it_open():
    nb, _ = _where("ex11_keep_compiled_outputs")
    cell = next(c for c in nb.cells if _spec(c).get("name") == "tokens_on_a_gpu")
    assert _spec(cell).get("needs") == ["cuda"] and "nbval-ignore-output" in cell.metadata.get("tags", [])
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        shown = "".join(o.get("text", "") for o in cell.outputs)
        assert "needs a CUDA GPU" in shown and "open" in shown, shown


def _observe_checks(answer_sources: dict[str, str], exercise: str) -> dict[str, tuple[str, list[str]]]:
    """Run set-up, the exercise's given cells, the answer and its visible checks in a fresh namespace (self-check)."""
    nb, layout = _where(exercise)
    ex = next(e for e in layout.exercises if e.id == exercise)
    ns: dict = {"__name__": "__main__"}
    with contextlib.redirect_stdout(io.StringIO()):
        for i in layout.setup + ex.context:
            exec(nb.cells[i].source, ns)
        exec(answer_sources[exercise], ns)
        return selfcheck.check(exercise, namespace=ns)


@pytest.mark.parametrize("exercise", _all_exercises())
def test_the_model_answer_passes_its_own_self_check(exercise):
    results = _observe_checks(_answers(), exercise)
    assert results and all(status in ("passed", "not checked") for status, _ in results.values()), results


def _wrong() -> list[Path]:
    return sorted(WRONG.glob("ex*/*.py"))


@pytest.mark.parametrize("path", sorted((WRONG.parent / "right_answers").glob("ex*/*.py")),
                         ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_a_right_answer_written_another_way_passes_every_visible_check(path):
    results = _observe_checks({path.parent.name: path.read_text(encoding="utf-8")}, path.parent.name)
    assert results and all(status in ("passed", "not checked") for status, _ in results.values()), results


@pytest.mark.parametrize("path", _wrong(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_each_wrong_answer_fails_the_visible_checks_it_targets(path):
    """(Hidden checks are graded only by the grader: tests/test_wrong_answers.py.)"""
    head = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("# ") or ":" not in line:
            break
        k, _, v = line[2:].partition(":")
        head[k.strip()] = v.strip()
    results = _observe_checks({path.parent.name: path.read_text(encoding="utf-8")}, path.parent.name)
    for name in head["targets"].split():
        key = f"{path.parent.name}/{name}"
        if key in results and results[key][0] != "not checked":  # a visible check that runs here (not CUDA's)
            assert results[key][0] in ("differs", "error"), (key, results[key])


def test_the_self_check_names_checks_and_hints_without_the_expected_values(capsys):
    wrong = (WRONG / "ex05_diagnose_profiles" / "graph_fixes_oom.py").read_text(encoding="utf-8")
    nb = _nb()
    layout = _layout()
    ex = next(e for e in layout.exercises if e.id == "ex05_diagnose_profiles")
    ns: dict = {"__name__": "__main__"}
    with contextlib.redirect_stdout(io.StringIO()):
        for i in layout.setup + ex.context:
            exec(nb.cells[i].source, ns)
        exec(wrong, ns)
    capsys.readouterr()
    results = selfcheck.check("ex05", namespace=ns)
    out = capsys.readouterr().out
    assert results["ex05_diagnose_profiles/speedup"][0] == "passed"
    assert results["ex05_diagnose_profiles/diagnosis"][0] == "differs"
    assert "PASS speedup (2 points)" in out and "FAIL diagnosis (2 points)" in out and "memory first" in out
    assert "compute-bound" not in out.replace("or compute", "") and "launch-bound\"" not in out
    assert "graph_fixes_oom" not in out


def test_the_self_check_says_not_answered_yet_for_a_stub(capsys):
    learner = nbformat.read(LEARNER, as_version=4)
    stub = next(c.source for c in learner.cells if c.metadata.get("graphcourse", {}).get("role") == "answer"
                and c.metadata["graphcourse"]["exercise"] == "ex03_remove_the_sync")
    results = _observe_checks({"ex03_remove_the_sync": stub}, "ex03_remove_the_sync")
    assert all(status != "passed" for status, _ in results.values())
    assert any("not answered yet" in " ".join(r) for _, r in results.values())


def test_the_recorded_self_check_data_is_current(tmp_path):
    target = selfcheck.record(be.SOLUTIONS_DIR, tmp_path)
    assert json.loads(target.read_text()) == json.loads((be.EXERCISES_DIR / selfcheck.DATA_NAME).read_text()), (
        "exercises/selfcheck.json is stale: run `python -m graphcourse.authoring.selfcheck --record`")


def test_make_check_names_every_check_by_exercise(course_process, tmp_path):
    """`make check NB=...`: nbval runs the notebook, the plugin names items exercise/check and sums them up."""
    learner = nbformat.read(LEARNER, as_version=4)
    answers = _answers()
    for cell in learner.cells:
        meta = cell.metadata.get("graphcourse", {})
        if meta.get("role") == "answer" and meta["exercise"] != "ex03_remove_the_sync":
            cell.source = answers[meta["exercise"]]
    path = tmp_path / "06_exercises.ipynb"
    nbformat.write(learner, path)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(be.ROOT), os.environ.get("PYTHONPATH", "")]))
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "graphcourse.authoring.selfcheck", "--nbval-lax",
                          "--nbval-current-env", "-p", "no:randomly", "-p", "no:cacheprovider", "-v", str(path)],
                         cwd=tmp_path, capture_output=True, text=True, env=env, timeout=600)
    out = run.stdout
    assert "ex01_bucket_picker/smallest_bucket PASSED" in out, out[-3000:]
    assert "ex03_remove_the_sync/one_sync FAILED" in out and "not answered yet" in out, out[-3000:]
    assert "ex03_remove_the_sync/your answer" in out
    assert "Cell " not in "\n".join(line for line in out.splitlines() if "PASSED" in line or "FAILED" in line)
    assert "self-check: visible checks per exercise" in out and "ex03_remove_the_sync: same_tokens FAIL" in out


def test_the_makefile_has_the_check_target_the_notebook_documents():
    makefile = (be.ROOT / "Makefile").read_text(encoding="utf-8")
    target = makefile[makefile.index("\ncheck:"):]
    assert "-p graphcourse.authoring.selfcheck" in target and "--nbval-lax" in target and "$(NB)" in target
    text = _nb().cells[0].source + _nb().cells[-1].source
    assert "make check NB=" in text and 'check("ex03")' in text


@pytest.mark.parametrize("book", [p.name for p in be.solution_paths(be.SOLUTIONS_DIR)])
def test_solution_outputs_are_deterministic_and_carry_no_paths(book):
    nb = nbformat.read(be.SOLUTIONS_DIR / book, as_version=4)
    text = json.dumps([c.get("outputs", []) for c in nb.cells])
    assert not re.search(r"0x[0-9a-f]{6,}| at 0x|\d+\.\d+ ?s\b", text), text[:500]
    raw = (be.SOLUTIONS_DIR / book).read_text(encoding="utf-8")
    for path in ("/work/", "/tmp/", "/root/"):
        assert path not in raw, path


def test_answer_cells_hold_only_what_the_learner_writes():
    for nb, ex in [(nb, ex) for _, nb, layout in _books() for ex in layout.exercises]:
        source = nb.cells[ex.answer].source
        for node in ast.parse(source).body:
            assert isinstance(node, (ast.FunctionDef, ast.ClassDef)), (ex.id, node.lineno)
            assert be.BEGIN in ast.get_source_segment(source, node), f"{ex.id}: {node.name} has nothing to write"


def test_prose_types_no_figures():
    for cell in [c for _, nb, _ in _books() for c in nb.cells]:
        if cell.cell_type == "markdown":
            assert not re.search(r"\d\s*(µs|us|ms)\b", cell.source), cell.source[:200]


_FOLDED_HINT = re.compile(r"\n\n<details><summary>Hint</summary>\n\n(?P<hint>.+?)\n\n</details>$", re.S)


def _answer_lines(source: str) -> set[str]:
    lines = source.splitlines()
    out = set()
    for begin, end, _, _ in be.find_regions(source, "answer"):
        out |= {ln.split("  #")[0].strip() for ln in lines[begin + 1:end]}
    return {ln for ln in out if len(ln) >= 12 and not ln.startswith("#")}


def test_stub_messages_and_folded_hints_nudge_without_the_code():
    stubs = {c.metadata["graphcourse"]["exercise"]: c.source for p, _, _ in _books()
             for c in nbformat.read(be.EXERCISES_DIR / p.name, as_version=4).cells
             if c.metadata.get("graphcourse", {}).get("role") == "answer"}
    for nb, ex in [(nb, ex) for _, nb, layout in _books() for ex in layout.exercises]:
        source = nb.cells[ex.answer].source
        for *_, hint in be.find_regions(source, ex.id):
            assert 15 <= len(hint) <= 80 and not re.search(r"[;=\[\]`]|\w\(|\. \w", hint), (ex.id, hint)
            assert f"raise NotImplementedError({hint!r})" in stubs[ex.id]
        heading = nb.cells[ex.heading].source
        assert heading.count("<details>") == 1, ex.id
        found = _FOLDED_HINT.search(heading)
        assert found and 80 <= len(found["hint"]) <= 700 and "```" not in found["hint"], ex.id
        for line in _answer_lines(source):
            assert line not in found["hint"], (ex.id, line)


def _prose(exercise: str) -> str:
    nb = _nb()
    ex = next(e for e in _layout().exercises if e.id == exercise)
    return nb.cells[ex.heading].source


def test_ex06_says_control_flow_is_not_frozen_for_good():
    prose = _prose("ex06_frozen_branch")
    for fact in ("CUDA 12.4", "IF", "WHILE", "CUDA 12.8", "SWITCH", "torch.cond", "pytorch/pytorch#168912"):
        assert fact in prose, fact
    assert "CaptureError" in prose  # an if on device data is a sync: the toy refuses it, as CUDA does
    nb = _nb()
    ex = next(e for e in _layout().exercises if e.id == "ex06_frozen_branch")
    shown = "".join(o.get("text", "") for i in ex.context for o in nb.cells[i].outputs)
    assert "frozen at capture" in shown and "operation not permitted when stream is capturing" in shown


def test_ex05_tensor_parallel_profiles_are_realistic_and_graphs_help_inside_a_node():
    prose = _prose("ex05_diagnose_profiles")
    assert "NCCL" in prose and "vLLM captures the all-reduce" in prose and "across machines" in prose
    nb = _nb()
    ex = next(e for e in _layout().exercises if e.id == "ex05_diagnose_profiles")
    ns: dict = {}
    for i in _layout().setup + ex.context:
        exec(nb.cells[i].source, ns)
    exec(nb.cells[ex.answer].source, ns)
    profiles = ns["PROFILES"]
    tp = profiles["tensor_parallel_decode"]
    assert tp["comm_us"] < tp["kernels"] * tp["launch_us"]  # all-reduces inside a node: far below the launches
    assert ns["diagnose"](tp) == (True, "launch-bound")
    assert ns["diagnose"](profiles["tensor_parallel_across_nodes"]) == (False, "communication-bound")


def test_ex04_does_not_say_serving_engines_copy_the_output_out():
    prose = _prose("ex04_capture_helper")
    assert "vLLM's `CUDAGraphWrapper` returns the output buffer itself" in prose
    assert "SGLang" not in prose
    assert "torch.cuda.graph(g, stream=s)" in prose  # warm up on the stream you capture on


def test_the_grading_section_and_readme_give_the_same_grading_command():
    spelled_out = ".venv/bin/python -m graphcourse.grading my-work/ --own-work --report my_grades.json"
    for path in be.solution_paths(be.SOLUTIONS_DIR):
        text = nbformat.read(path, as_version=4).cells[-1].source
        assert "make grade-me" in text and spelled_out in text, path.name
        assert "\npython -m graphcourse.grading" not in text, f"{path.name}: a bare python lacks the course's packages"
    readme = (be.ROOT / "README.md").read_text(encoding="utf-8")
    assert f"make grade-me      # = {spelled_out}" in readme
    section = readme[readme.index("## Graded exercises"):]
    assert "python -m graphcourse.grading" in section


def test_the_grading_command_works_from_inside_the_exercises_folder(course_process, tmp_path):
    probe = subprocess.run([sys.executable, "-c", "import graphcourse.grading"], cwd=tmp_path, capture_output=True)
    if probe.returncode:
        pytest.skip("the course is not installed in this environment (the notebook says the command needs that)")
    (tmp_path / SOLUTION.name).write_text(be.expected_exercises(be.SOLUTIONS_DIR)[SOLUTION.name], encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run([sys.executable, "-m", "graphcourse.grading", SOLUTION.name, "--report", "grades.json",
                          "--quiet"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800)
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads((tmp_path / "grades.json").read_text())
    if "learners" not in report:  # the installed course is an older checkout (its report format): the command ran
        pytest.skip("the installed course is not this checkout (make setup installs it); the command ran")
    (rec,) = report["learners"].values()
    assert rec["total"] == 0 and len(rec["exercises"]) >= 10


def test_make_check_names_the_checks_of_every_exercise_notebook(course_process, tmp_path):
    """`make check` runs every my-work copy; each notebook's checks are named by exercise and check."""
    name = "07_compile_and_control_flow.ipynb"
    learner = nbformat.read(be.EXERCISES_DIR / name, as_version=4)
    answers = _answers()
    for cell in learner.cells:
        meta = cell.metadata.get("graphcourse", {})
        if meta.get("role") == "answer" and meta["exercise"] == "ex12_k_steps_with_eos":
            cell.source = answers[meta["exercise"]]
    nbformat.write(learner, tmp_path / name)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(be.ROOT), os.environ.get("PYTHONPATH", "")]))
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "graphcourse.authoring.selfcheck", "--nbval-lax",
                          "--nbval-current-env", "-p", "no:randomly", "-p", "no:cacheprovider", "-v", name],
                         cwd=tmp_path, capture_output=True, text=True, env=env, timeout=600)
    out = run.stdout
    assert "ex12_k_steps_with_eos/tokens PASSED" in out and "ex12_k_steps_with_eos/no_sync_in_replay PASSED" in out, (
        out[-3000:])
    assert "ex11_keep_compiled_outputs/tokens_kept FAILED" in out and "not answered yet" in out, out[-3000:]
    assert "ex11_keep_compiled_outputs: " in out and "tokens_on_a_gpu not checked here" in out, out[-3000:]
    makefile = (be.ROOT / "Makefile").read_text(encoding="utf-8")
    assert "$(wildcard $(patsubst exercises/%,my-work/%,$(wildcard exercises/*.ipynb)))" in makefile


def _top_level_bound(source: str) -> set[str]:
    """Names a cell binds at the notebook's top level (assignments, defs, classes, imports)."""
    import ast

    try:
        tree = ast.parse("\n".join(l for l in source.splitlines() if not l.lstrip().startswith(("%", "!"))))
    except SyntaxError:
        return set()
    out: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out |= {(a.asname or a.name).split(".")[0] for a in node.names}
        else:
            out |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return out


def _read_globals(source: str) -> set[str]:
    """Names a cell reads that it does not bind itself (what it takes from the notebook's globals)."""
    import ast

    tree = ast.parse(source)
    read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    own = _top_level_bound(source) | {a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)}
    own |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return read - own


def test_no_check_reads_a_global_that_a_later_exercise_rebinds():
    """After Run All, a learner re-running an exercise's checks must see what its own cells defined: a check that
    reads a name a later exercise's cells bind again (ex11's next_token, redefined by ex12) fails a right answer."""
    bad = []
    for book in be.solution_paths(be.SOLUTIONS_DIR):
        nb = nbformat.read(book, as_version=4)
        layout = be.layout_of(nb, book.name)
        for k, ex in enumerate(layout.exercises):
            later = set()
            for other in layout.exercises[k + 1:]:  # the cells a learner reads and may change: context and answer
                for i in [*other.context, other.answer]:
                    later |= _top_level_bound(nb.cells[i].source)
            for i in ex.checks:
                clash = _read_globals(nb.cells[i].source) & later
                if clash:
                    bad.append(f"{book.name} {ex.id} check cell {i + 1} reads {sorted(clash)}, rebound by a later exercise")
    assert bad == []
