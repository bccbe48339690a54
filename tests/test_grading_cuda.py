"""The confined grader on a CUDA machine: every CUDA check is graded, and wrong answers lose their CUDA points.

One class, graded once by the real grader's command line, confined (root and bubblewrap), on a machine with a
CUDA GPU (skipped elsewhere): the model answers (every point but the two-GPU ones, with no check "not graded"
no review flag and no warning), an untouched copy of every notebook (0), and the wrong
answers of the exercises with CUDA checks (ex04, ex11, ex15), each below full marks on those checks.
``GRAPHCOURSE_KEEP_REPORTS=DIR`` keeps the report for a closing note.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "adversarial"))
import classroom  # noqa: E402

from graphcourse.grading.sandbox import detect  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
CUDA_EXERCISES = ("ex04_capture_helper", "ex11_keep_compiled_outputs", "ex15_side_stream_device")


def _cuda_checks(ex_id: str) -> set[str]:
    book = classroom.book_of(ex_id)
    nb = nbformat.read(book, as_version=4)
    ex = next(e for e in classroom.exercises(book) if e.id == ex_id)
    out = set()
    for k, i in enumerate(ex.checks, 1):
        spec = nb.cells[i].metadata.get("graphcourse", {}).get("check", {})
        if {"cuda", "cuda2"} & set(spec.get("needs", [])):
            out.add(f"{ex_id}/{spec.get('name') or f'check-{k}'}")
    return out


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    conf = detect()
    if not conf.confined:
        pytest.fail("a GPU grading machine must confine learners: " + "; ".join(conf.reasons))
    root = tmp_path_factory.mktemp("gpu-class")
    os.chmod(root, 0o755)
    cls = root / "class"
    learners = {"model-answers": classroom.learner_books(classroom.model_answers()),
                "untouched-copy": classroom.learner_books({})}
    for ex_id in CUDA_EXERCISES:
        for path in sorted((HERE / "wrong_answers" / ex_id).glob("*.py")):
            learners[f"{ex_id}--{path.stem}"] = classroom.learner_books(
                {ex_id: path.read_text()}, others="delete", books=[classroom.book_of(ex_id)])
    for name, books in learners.items():
        (cls / name).mkdir(parents=True)
        for file_name, nb in books.items():
            nbformat.write(nb, cls / name / file_name)
    report = root / "out" / "grades.json"
    proc = subprocess.run([sys.executable, "-m", "graphcourse.grading", str(cls), "--report", str(report), "--quiet",
                           "--jobs", "2"], capture_output=True, text=True, timeout=3000)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(report.read_text())
    if os.environ.get("GRAPHCOURSE_KEEP_REPORTS"):
        Path(os.environ["GRAPHCOURSE_KEEP_REPORTS"]).mkdir(parents=True, exist_ok=True)
        Path(os.environ["GRAPHCOURSE_KEEP_REPORTS"], "grading_cuda.json").write_text(report.read_text())
        Path(os.environ["GRAPHCOURSE_KEEP_REPORTS"], "grading_cuda.out").write_text(proc.stdout + proc.stderr)
    return data, proc


def test_the_model_answers_earn_every_point_but_the_two_gpu_ones(graded) -> None:
    data, proc = graded
    rec = data["learners"]["model-answers"]
    statuses = {cid: m["status"] for ex in rec["exercises"].values() for cid, m in ex["checks"].items()}
    two_gpu = {cid for cid, m in ((c, m) for ex in rec["exercises"].values() for c, m in ex["checks"].items())
               if "two GPUs" in (m.get("message") or "")}
    not_passed = {cid: s for cid, s in statuses.items() if s != "passed" and cid not in two_gpu}
    assert not_passed == {}, not_passed
    for ex_id in CUDA_EXERCISES:
        for cid in _cuda_checks(ex_id) - two_gpu:
            assert statuses.get(cid) == "passed", (cid, statuses.get(cid))
    assert data.get("warnings", []) == [], data["warnings"]
    assert {ex: m["status"] for ex, m in rec["exercises"].items() if m["status"] == "review" or m.get("review")} == {}
    assert data["run"]["checks_needing"]["cuda"] is True


def test_an_untouched_copy_earns_nothing(graded) -> None:
    data, _ = graded
    assert data["learners"]["untouched-copy"]["total"] == 0


@pytest.mark.parametrize("ex_id", CUDA_EXERCISES)
def test_each_wrong_answer_is_below_full_marks_on_the_cuda_checks(graded, ex_id: str) -> None:
    data, _ = graded
    cuda = _cuda_checks(ex_id)
    assert cuda, ex_id
    for name, rec in data["learners"].items():
        if not name.startswith(f"{ex_id}--"):
            continue
        target = set(classroom.parse_header((HERE / "wrong_answers" / ex_id / f"{name.split('--')[1]}.py").read_text())
                     ["targets"].split())
        checks = rec["exercises"][ex_id]["checks"]
        for cid in cuda:
            if checks[cid]["status"] == "not-graded":  # a two-GPU check on one GPU: open, neither earned nor lost
                assert "two GPUs" in checks[cid]["message"] and checks[cid]["points"] == 0, (name, cid, checks[cid])
            elif cid.split("/")[1] in target:
                assert checks[cid]["status"] != "passed", (name, cid, checks[cid])
