"""The Gradescope autograder bundle (make autograder): what the zip holds, and what its run_autograder writes.

The zip is unzipped into a fresh root laid out as Gradescope's (ROOT/source, ROOT/submission, ROOT/results) and
run_autograder runs there with AUTOGRADER_ROOT set and the course's venv on PATH in place of setup.sh (which is
only checked by `bash -n`: it installs packages). A notebook graded there must earn what
`python -m graphcourse.grading` gives the same notebook; a submission with no notebook, or none readable, must
get score 0 and a message saying what to hand in. Where learners' kernels cannot be confined (simulated with the
grader's own switch, GRAPHCOURSE_GRADE_UNCONFINED=1), the default zip grades nothing and says why; one built with
--allow-unconfined grades and labels the result. Spec: https://gradescope-autograders.readthedocs.io/en/latest/specs/
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

from graphcourse.core.exercise_format import find_regions, layout_of
from graphcourse.core.paths import ROOT as COURSE
from graphcourse.grading.engine import assignment_seed
from graphcourse.grading import gradescope_bundle as gb
from graphcourse.grading.gradescope_bundle import build
from graphcourse.grading.sandbox import Confinement

VENV_BIN = Path(sys.executable).parent
NOTEBOOK = "06_exercises.ipynb"
FORBIDDEN = ("tests/", "docs/", ".git/", ".git", "build/", ".venv/", "my-work/", "notebooks/", "classroom/", "wheelhouse/")


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bundle") / "autograder.zip"
    build(out)
    return out


def gradescope_root(tmp_path: Path, bundle: Path) -> Path:
    """A fresh /autograder: the zip unzipped into source/ (modes kept, as unzip does), submission/ and results/."""
    root = tmp_path / "autograder"
    with zipfile.ZipFile(bundle) as z:
        for info in z.infolist():
            z.extract(info, root / "source")
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                os.chmod(root / "source" / info.filename, mode)
    (root / "submission").mkdir()
    (root / "results").mkdir()
    shutil.copy2(root / "source" / "run_autograder", root / "run_autograder")  # where Gradescope runs it from
    for p in (tmp_path, root):
        os.chmod(p, 0o755)  # the confined kernels' uid reads the course's packages under it
    return root


def run_autograder(root: Path, env_extra: dict | None = None, log: list | None = None) -> dict:
    env = dict(os.environ, AUTOGRADER_ROOT=str(root), PATH=f"{VENV_BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    env.pop("PYTHONPATH", None)
    env.pop("GRAPHCOURSE_GRADE_UNCONFINED", None)
    env.update(env_extra or {})
    done = subprocess.run([str(root / "run_autograder")], cwd=root, env=env, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    if log is not None:
        log.append(done.stdout + done.stderr)
    text = (root / "results" / "results.json").read_text()
    result = json.loads(text)
    assert_gradescope_format(result)
    return result


def assert_gradescope_format(result: dict) -> None:
    assert isinstance(result.get("score"), (int, float)), result
    assert isinstance(result.get("output"), str) and result["output"].strip(), "the learner must be told something"
    assert isinstance(result.get("tests"), list)
    for t in result["tests"]:
        assert {"name", "score", "max_score", "output", "visibility"} <= t.keys(), t
        assert t["visibility"] in ("visible", "hidden", "after_due_date", "after_published"), t
        assert 0 <= t["score"] <= t["max_score"], t


def test_the_zip_holds_what_the_grader_needs_and_nothing_else(bundle: Path) -> None:
    with zipfile.ZipFile(bundle) as z:
        infos = {i.filename: i for i in z.infolist()}
        setup_sh = z.read("setup.sh").decode()
        run_sh = z.read("run_autograder").decode()
    names = set(infos)
    for name in ("setup.sh", "run_autograder"):  # at the zip's root, executable
        assert (infos[name].external_attr >> 16) & 0o111, f"{name} must be executable"
    needed = {"pyproject.toml", "requirements.lock", "bootstrap.py", "graphcourse/grading/cli.py",
              "graphcourse/grading/gradescope_bundle.py", "toygraph/__init__.py"}
    needed |= {f"solutions/{p.name}" for p in (COURSE / "solutions").glob("*.ipynb")}
    assert needed <= names, f"missing: {sorted(needed - names)}"
    leaked = sorted(n for n in names if n.startswith(FORBIDDEN) or "__pycache__" in n or n.endswith(".pyc")
                    or "/." in n or n.startswith("."))
    assert not leaked, f"the bundle must not hold these: {leaked}"
    for script in (setup_sh, run_sh):
        done = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    assert "root" in setup_sh and "bubblewrap" in setup_sh and "bootstrap.py" in setup_sh
    assert re.search(r"torch==\S+ --index-url https://download\.pytorch\.org/whl/cpu", setup_sh), "CPU torch by default"
    assert "AUTOGRADER_ROOT" in run_sh


def test_the_zip_is_readable_by_its_owner_alone(bundle: Path) -> None:
    """It holds solutions/: on a class server a learner's kernel must not read it in build/."""
    assert bundle.stat().st_mode & 0o777 == 0o600


def test_the_same_course_builds_the_same_zip(bundle: Path, tmp_path: Path) -> None:
    again = tmp_path / "again.zip"
    build(again)
    assert again.read_bytes() == bundle.read_bytes(), "two builds of one course differ: Gradescope would see a change"


@pytest.mark.parametrize("files, said", [
    ({}, "No exercise notebook"),
    ({"answers.pdf": b"%PDF-1.4", "hw/notes.py": b"x = 1"}, "answers.pdf"),
    ({"hw/06_exercises.ipynb": b"{not json"}, "could be read"),
])
def test_nothing_to_grade_gets_zero_and_says_why(bundle: Path, tmp_path: Path, files: dict, said: str) -> None:
    root = gradescope_root(tmp_path, bundle)
    for rel, data in files.items():
        (root / "submission" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "submission" / rel).write_bytes(data)
    result = run_autograder(root)
    assert result["score"] == 0 and result["tests"] == []
    assert said in result["output"] and "Traceback" not in result["output"], result["output"]
    assert "06_exercises.ipynb" in result["output"], "the message names what to hand in, or what could not be read"


def learner_answer(ex_index: int = 0) -> tuple[nbformat.NotebookNode, str]:
    """The exercise notebook as handed out, with one exercise answered as the model does (markers taken out)."""
    solution = nbformat.read(COURSE / "solutions" / NOTEBOOK, as_version=4)
    ex = layout_of(solution, NOTEBOOK).exercises[ex_index]
    lines = solution.cells[ex.answer].source.splitlines()
    drop = {n for begin, end, _, _ in find_regions(solution.cells[ex.answer].source, NOTEBOOK) for n in (begin, end)}
    answer = "\n".join(line for n, line in enumerate(lines) if n not in drop)
    nb = nbformat.read(COURSE / "exercises" / NOTEBOOK, as_version=4)
    cells = [c for c in nb.cells if c.metadata.get("graphcourse", {}).get("role") == "answer"
             and c.metadata["graphcourse"].get("exercise") == ex.id]
    assert len(cells) == 1, f"one answer cell for {ex.id} in exercises/{NOTEBOOK}"
    cells[0].source = answer
    return nb, ex.id


@pytest.mark.slow
def test_a_notebook_earns_what_the_grader_gives_it(bundle: Path, tmp_path: Path, course_process: None) -> None:
    nb, answered = learner_answer()
    root = gradescope_root(tmp_path, bundle)
    (root / "submission" / "work").mkdir()  # a learner's folder inside the upload: found at any depth
    nbformat.write(nb, root / "submission" / "work" / NOTEBOOK)
    direct = tmp_path / "direct"
    (direct / "me").mkdir(parents=True)
    nbformat.write(nb, direct / "me" / NOTEBOOK)
    # the grader run straight from the repository, at the same time as the bundle's (two graders share a machine)
    grader = subprocess.Popen([sys.executable, "-m", "graphcourse.grading", str(direct / "me"), "--report",
                               str(direct / "report.json"), "--gradescope", str(direct / "gs"), "--jobs", "1", "--quiet"],
                              cwd=COURSE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    result = run_autograder(root)
    out, _ = grader.communicate(timeout=1200)
    assert grader.returncode == 0, out[-3000:]
    expected = json.loads((direct / "gs" / "me.json").read_text())
    assert result["score"] == expected["score"], (result["output"], expected["output"])
    assert [(t["name"], t["score"], t["max_score"]) for t in result["tests"]] == \
           [(t["name"], t["score"], t["max_score"]) for t in expected["tests"]]
    earned = sum(t["score"] for t in result["tests"] if t["name"].startswith(answered + "/"))
    assert earned > 0 and result["score"] == earned, "the one answered exercise earns its points, the stubs none"
    assert result["extra_data"]["seed"] == assignment_seed(COURSE / "solutions"), "graded with the assignment's fixed seed"
    assert result["extra_data"]["notebooks"][NOTEBOOK]["status"] == "graded"


# --- confinement: refused by default, graded and labelled when the instructor opts in --------------------------

NO_CONFINEMENT = {"GRAPHCOURSE_GRADE_UNCONFINED": "1"}  # the grader's own switch: sandbox.detect() reports none


@pytest.fixture(scope="module")
def unconfined_bundle(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bundle-unconfined") / "autograder.zip"
    build(out, allow_unconfined=True)
    return out


def test_the_zip_says_whether_it_may_grade_unconfined(bundle: Path, unconfined_bundle: Path) -> None:
    with zipfile.ZipFile(bundle) as z:
        assert json.loads(z.read(gb.CONFIG)) == {"allow_unconfined": False}, "refusing is the default"
    with zipfile.ZipFile(unconfined_bundle) as z:
        assert json.loads(z.read(gb.CONFIG)) == {"allow_unconfined": True}
    for made, flag in ((["UNCONFINED=1"], True), ([], False)):
        if shutil.which("make") is None:
            break
        done = subprocess.run(["make", "-n", "-o", ".venv/.course-installed", "autograder", *made], cwd=COURSE,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert ("--allow-unconfined" in done.stdout) is flag, done.stdout


def test_a_missing_or_broken_config_refuses(tmp_path: Path) -> None:
    assert gb.allows_unconfined(tmp_path) is False  # an older zip, without the file
    for text, allowed in (("{not json", False), ('["allow_unconfined"]', False), ('{"allow_unconfined": "yes"}', False),
                          ('{"allow_unconfined": false}', False), ('{"allow_unconfined": true}', True)):
        (tmp_path / gb.CONFIG).write_text(text)
        assert gb.allows_unconfined(tmp_path) is allowed, text


def trap_notebook(marker: Path) -> nbformat.NotebookNode:
    """The handed-out notebook with every answer cell writing marker: it exists once any learner's code has run."""
    nb = nbformat.read(COURSE / "exercises" / NOTEBOOK, as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("graphcourse", {}).get("role") == "answer":
            cell.source = f"open({str(marker)!r}, 'w').write('ran')\n" + cell.source
    return nb


def test_without_confinement_nothing_is_graded_by_default(bundle: Path, tmp_path: Path) -> None:
    root = gradescope_root(tmp_path, bundle)
    marker = tmp_path / "learner-code-ran"
    nbformat.write(trap_notebook(marker), root / "submission" / NOTEBOOK)
    log: list[str] = []
    result = run_autograder(root, NO_CONFINEMENT, log)
    assert result["score"] == 0 and result["tests"] == [], result
    assert not marker.exists(), "the learner's code ran although it could not be confined"
    assert "-m graphcourse.grading " not in log[0], "the grader was started: " + log[0][-2000:]
    out = result["output"]
    assert out.startswith("Your notebooks were NOT graded"), out
    assert "cannot confine" in out and "GRAPHCOURSE_GRADE_UNCONFINED=1 is set" in out, "says why, in the grader's words"
    assert "not a mark on your work" in out and "tell your instructor" in out, "tells the learner what to do"
    assert "bubblewrap" in out and "setup.sh" in out, "tells the instructor the fix"
    assert "make autograder UNCONFINED=1" in out and "--allow-unconfined" in out, "and the opt-in, with its risk"
    assert "as root beside the model answers" in out
    assert result["extra_data"]["graded"] is False and result["extra_data"]["confined"] is False
    assert "NOT CONFINED" in log[0], "the instructor's log says so too"


def fake_grader(tmp_path: Path, confined: bool) -> str:
    """A stand-in for `python -m graphcourse.grading`: writes a report (confined or not) and one Gradescope file."""
    script = tmp_path / "fake-python"
    script.write_text(f"""#!{sys.executable}
import json, sys
from pathlib import Path
args = sys.argv
report, gs = Path(args[args.index("--report") + 1]), Path(args[args.index("--gradescope") + 1])
gs.mkdir(parents=True, exist_ok=True)
report.write_text(json.dumps({{"run": {{"seed": 7, "confined": {confined!r},
    "confinement": {("confined by bubblewrap" if confined else "NOT CONFINED: the kernels could not be confined")!r}}}}}))
(gs / "learner.json").write_text(json.dumps({{"score": 5, "output": "graded", "tests": [
    {{"name": "ex01/a", "score": 5, "max_score": 5, "output": "", "visibility": "visible"}}]}}))
""")
    script.chmod(0o755)
    return str(script)


def fake_root(tmp_path: Path, allow: bool | None) -> Path:
    root = tmp_path / "autograder"
    (root / "source" / "solutions").mkdir(parents=True)
    shutil.copy2(COURSE / "solutions" / NOTEBOOK, root / "source" / "solutions" / NOTEBOOK)
    if allow is not None:
        (root / "source" / gb.CONFIG).write_bytes(gb.config_bytes(allow))
    (root / "submission").mkdir()
    shutil.copy2(COURSE / "exercises" / NOTEBOOK, root / "submission" / NOTEBOOK)
    return root


@pytest.mark.parametrize("allow", [False, None])
def test_marks_of_a_grader_that_ran_unconfined_are_not_kept(tmp_path: Path, monkeypatch, allow) -> None:
    """detect() said confined but the grader's report says not (e.g. its own probe failed): no score is kept."""
    monkeypatch.setattr("graphcourse.grading.sandbox.detect", lambda: Confinement("bwrap"))
    result = gb.grade_submission(fake_root(tmp_path, allow), python=fake_grader(tmp_path, confined=False))
    assert result["score"] == 0 and result["tests"] == [], result
    assert "NOT graded" in result["output"] and "the kernels could not be confined" in result["output"]
    assert "NOT CONFINED: NOT CONFINED" not in json.dumps(result)


def test_a_confined_grading_is_not_labelled(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr("graphcourse.grading.sandbox.detect", lambda: Confinement("bwrap"))
    result = gb.grade_submission(fake_root(tmp_path, False), python=fake_grader(tmp_path, confined=True))
    assert result["score"] == 5 and result["output"] == "graded", result
    assert result["extra_data"]["confined"] is True and result["extra_data"]["allow_unconfined"] is False


def test_the_opt_in_grades_unconfined_and_labels_it(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr("graphcourse.grading.sandbox.detect",
                        lambda: Confinement("none", ("bubblewrap is not installed",)))
    result = gb.grade_submission(fake_root(tmp_path, True), python=fake_grader(tmp_path, confined=False))
    assert result["score"] == 5 and [t["score"] for t in result["tests"]] == [5], "graded: the marks are kept"
    assert result["output"].startswith("GRADED UNCONFINED: ") and result["output"].endswith("graded"), result["output"]
    assert result["extra_data"]["confined"] is False and result["extra_data"]["allow_unconfined"] is True
    assert result["extra_data"]["confinement"].startswith("NOT CONFINED")


@pytest.mark.slow
def test_a_zip_built_to_allow_it_grades_unconfined_and_says_so(unconfined_bundle: Path, tmp_path: Path,
                                                                course_process: None) -> None:
    nb, answered = learner_answer()
    root = gradescope_root(tmp_path, unconfined_bundle)
    nbformat.write(nb, root / "submission" / NOTEBOOK)
    log: list[str] = []
    result = run_autograder(root, NO_CONFINEMENT, log)
    earned = sum(t["score"] for t in result["tests"] if t["name"].startswith(answered + "/"))
    assert earned > 0 and result["score"] == earned, (result["output"], result["tests"])
    assert result["output"].startswith(gb.UNCONFINED_LABEL), result["output"]
    extra = result["extra_data"]
    assert extra["confined"] is False and extra["allow_unconfined"] is True, extra
    assert "GRAPHCOURSE_GRADE_UNCONFINED=1 is set" in extra["confinement"], extra
    assert "NOT CONFINED" in log[0]
