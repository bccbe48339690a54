"""The self-check and the grader on what a machine can check: `check()` checks only the exercises of its own notebook,
is not echoed as the cell's value, and a check that needs two GPUs (ex15's `cuda_run`) is reported "not checked here" /
"not graded here" on machines with fewer (as a check that needs CUDA is on a CPU), never PASSED.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys

import nbformat
import pytest

from graphcourse.authoring import build_exercises as be
from graphcourse.authoring import selfcheck
from graphcourse.grading import engine, reports
from graphcourse.core.exercise_format import NEEDS
from graphcourse.grading.assignment import load_assignments
from graphcourse.grading.verdict import exercise_mark

BOOK = be.EXERCISES_DIR / "09_production_exercises.ipynb"
OWN = {"ex13_capture_sizes", "ex14_dropout_per_replay", "ex15_side_stream_device", "ex16_fork_join"}


def _ran_notebook(path) -> dict:
    """A namespace as a kernel leaves it after Run All on the notebook at path (IPython's `In` included)."""
    nb = nbformat.read(path, as_version=4)
    ns: dict = {"__name__": "__main__", "In": [""]}
    with contextlib.redirect_stdout(io.StringIO()):
        for cell in nb.cells:
            if cell.cell_type != "code":
                continue
            ns["In"].append(cell.source)
            with contextlib.suppress(Exception):
                exec(cell.source, ns)
    return ns


def test_check_with_no_id_checks_only_this_notebooks_exercises(capsys):
    ns = _ran_notebook(BOOK)
    capsys.readouterr()
    results = selfcheck.check(namespace=ns)
    out = capsys.readouterr().out
    assert {k.split("/")[0] for k in results} == OWN, sorted(results)
    assert "09_production_exercises.ipynb" in out and "ex01_" not in out and "NameError" not in out
    assert any("not answered yet" in " ".join(r) for _, r in results.values())  # the blank notebook


def test_a_check_cell_says_not_answered_yet_for_a_stub_but_not_when_answered():
    nb = nbformat.read(BOOK, as_version=4)
    ns: dict = {"__name__": "__main__"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for cell in nb.cells[:nb.cells.index(next(c for c in nb.cells if c.get("id") == "ex16_fork_join-check-1")) + 1]:
            if cell.cell_type == "code":
                with contextlib.suppress(Exception):
                    exec(cell.source, ns)
    assert "not answered yet" in out.getvalue() and "NotImplementedError" in out.getvalue()
    model = nbformat.read(be.SOLUTIONS_DIR / BOOK.name, as_version=4)
    assert not any("not answered yet" in o.get("text", "") for c in model.cells for o in c.get("outputs", []))


def test_check_with_no_id_reads_the_notebook_jupyter_names(tmp_path, capsys):
    """In JupyterLab the kernel knows its notebook (`__session__`): its stamped exercise ids decide, run or not."""
    copy = tmp_path / "09_production_exercises.ipynb"
    copy.write_bytes(BOOK.read_bytes())
    results = selfcheck.check(namespace={"__name__": "__main__", "__session__": str(copy)})
    assert {k.split("/")[0] for k in results} == OWN
    assert "09_production_exercises.ipynb" in capsys.readouterr().out


def test_check_says_when_it_cannot_tell_the_notebook(capsys):
    results = selfcheck.check(namespace={"__name__": "__main__"})
    out = capsys.readouterr().out
    assert "could not tell which exercise notebook" in out and 'check("ex13")' in out
    assert len({k.split("/")[0] for k in results}) > len(OWN)


def test_check_is_not_echoed_as_the_cell_value():
    IPython = pytest.importorskip("IPython")
    results = selfcheck.check("ex16", namespace={"__name__": "__main__"})
    assert isinstance(results, dict) and results
    formatter = IPython.core.formatters.DisplayFormatter()
    assert formatter.format(results) == ({}, {})  # Jupyter shows nothing more than what check() printed


def test_a_two_gpu_check_is_not_checked_with_fewer_than_two(monkeypatch):
    check = {"id": "ex15_side_stream_device/cuda_run", "needs": ["cuda2"]}
    for cuda, devices in [(False, 0), (True, 1)]:
        monkeypatch.setattr(selfcheck, "_cuda", lambda c=cuda: c)
        monkeypatch.setattr(selfcheck, "_cuda_devices", lambda d=devices: d)
        status, reasons = selfcheck.verdict(check, {"x": "y"}, {}, {}, None)
        assert status == "not checked" and "needs two GPUs" in reasons[0]
    monkeypatch.setattr(selfcheck, "_cuda", lambda: True)
    monkeypatch.setattr(selfcheck, "_cuda_devices", lambda: 2)
    status, _ = selfcheck.verdict(check, {"x": "y"}, {}, {}, None)
    assert status == "differs"  # with two GPUs it is checked: nothing observed is not a pass


def test_ex15_cuda_run_needs_two_gpus_and_the_grader_leaves_it_open_with_one():
    ex = next(e for a in load_assignments(be.SOLUTIONS_DIR) for e in a.exercises if e.id == "ex15_side_stream_device")
    check = next(c for c in ex.checks if c.id.endswith("cuda_run"))
    assert "cuda2" in check.needs and "cuda2" in NEEDS
    assert engine.available_needs(None, devices=0) == set()
    assert engine.available_needs(None, devices=1) == {"cuda"}
    assert engine.available_needs(None, devices=2) == {"cuda", "cuda2"}
    assert engine.available_needs(False, devices=2) == set()
    for available in (set(), {"cuda"}):
        mark = exercise_mark(ex, None, None, available=available, review=[], allowed=True, answer_notes=[],
                             missing="no answer", missing_status="missing")
        got = mark["checks"][check.id]
        assert got["status"] == "not-graded" and got["points"] == 0 and "needs two GPUs" in got["message"], got
        assert mark["open"] >= check.points


def test_a_single_copy_gets_its_own_total_line():
    rec = {"total": 25, "max": 90, "notebooks": {
        "06_exercises.ipynb": {"status": "not-handed-in", "points": 0, "max": 55},
        "07_compile_and_control_flow.ipynb": {"status": "not-handed-in", "points": 0, "max": 8},
        "09_production_exercises.ipynb": {"status": "graded", "points": 25, "max": 27, "open": 1}}}
    line = reports.handed_in_line("me", rec)
    assert "25/27 over the notebook(s) handed in (09_production_exercises)" in line
    assert "not handed in: 06_exercises, 07_compile_and_control_flow" in line and "25/90" in line
    assert reports.handed_in_line("me", {**rec, "notebooks": {"09_production_exercises.ipynb": {"points": 1}}}) is None


def test_make_check_skips_a_check_this_machine_cannot_run(course_process, tmp_path):
    """`make check` on the 09 copy: ex15's cuda_run is SKIPPED (needs two GPUs), never PASSED."""
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available() and torch.cuda.device_count() >= 2:
        pytest.skip("this machine can run the two-GPU check")
    (tmp_path / BOOK.name).write_bytes(BOOK.read_bytes())
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(be.ROOT), os.environ.get("PYTHONPATH", "")]))
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "graphcourse.authoring.selfcheck", "--nbval-lax",
                          "--nbval-current-env", "-p", "no:randomly", "-p", "no:cacheprovider", "-v", "-rs", BOOK.name],
                         cwd=tmp_path, capture_output=True, text=True, env=env, timeout=600)
    out = run.stdout
    assert "ex15_side_stream_device/cuda_run SKIPPED" in out, out[-3000:]
    assert "ex15_side_stream_device/cuda_run PASSED" not in out
    assert "needs " in out and "not checked here" in out, out[-3000:]
    assert "ex14_dropout_per_replay/registered_generator FAILED" in out  # the blank copy earns nothing
