"""The same notebook earns the same marks in every run: the hidden inputs' seed is fixed by the assignment.

A class with a model answer, a lookup table and an answer that is right only on small inputs (so
its hidden check passes or fails by the inputs drawn) is graded three times into three report
folders; every learner's every check must read the same each time, and the report must say which
seed it used. Runs the confined grader (root and bubblewrap), like tests/test_grade.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "grading_fixtures"))
from make_fixtures import NAME, require_confinement, solutions_notebook, stub_copy, write_class  # noqa: E402

from graphcourse.grading.engine import assignment_seed  # noqa: E402

NAMES_THAT_COLLIDE = [b"zz victim", b"zz_victim-18c793ef", b"ZZ_VICTIM", b"caf\xe9 \xff"]
"""'zz victim' slugs to 'zz_victim-18c793ef', a second learner's real name; case differs; bytes that are not UTF-8."""
LEARNERS = {
    "model": None,
    "lookup": {"ex01_add": "def add(a, b):\n    return {(1, 2): 3, (0.5, 0.25): 0.75}.get((a, b), 0)"},
    "small_only": {"ex01_add": "def add(a, b):\n    return a + b if abs(a) < 500_000 else 0"},
    # honest answers with enormous output: they earn what the model answer earns (the grader keeps 4,000 characters)
    "prints_50_mb": {"ex01_add": "for _i in range(50_000):\n    print('x' * 1000)\n\ndef add(a, b):\n    return a + b"},
    "raises_20_mb": {"ex01_add": "def add(a, b):\n    return a + b\n\nraise ValueError('y' * 20_000_000)"},
}


def test_the_seed_is_fixed_by_the_solutions(tmp_path: Path) -> None:
    sol = tmp_path / "solutions"
    sol.mkdir()
    nbformat.write(solutions_notebook(), sol / NAME)
    first = assignment_seed(sol)
    assert first == assignment_seed(sol) and 1 <= first < 2**31
    nb = solutions_notebook()
    code = next(cell for cell in nb.cells if cell.cell_type == "code")
    code.source += "\n# a changed solution"
    nbformat.write(nb, sol / NAME)
    assert assignment_seed(sol) != first, "changed solutions draw new hidden inputs"
    second = assignment_seed(sol)
    nb.cells.append(nbformat.v4.new_markdown_cell("A corrected sentence of the prose."))
    nbformat.write(nb, sol / NAME)
    assert assignment_seed(sol) == second, "prose alone does not change the hidden inputs"


def _marks(report: dict) -> dict:
    return {name: (rec["total"], {ex: {c: m["status"] for c, m in mark["checks"].items()}
                                  for ex, mark in rec["exercises"].items()})
            for name, rec in report["learners"].items()}


@pytest.fixture(scope="module")
def regraded(tmp_path_factory) -> list[dict]:
    require_confinement()
    root = tmp_path_factory.mktemp("regrade")
    sol = write_class(root, LEARNERS)
    for name in NAMES_THAT_COLLIDE:  # hostile but legal names, with untouched copies (no kernel needed)
        folder = os.path.join(os.fsencode(root / "class"), name)
        os.makedirs(folder)
        nbformat.write(stub_copy(), os.fsdecode(os.path.join(folder, os.fsencode(NAME))))

    def grade(report: Path, *extra: str) -> subprocess.CompletedProcess:
        proc = subprocess.run([sys.executable, "-m", "graphcourse.grading", str(root / "class"), "--solutions", str(sol),
                               "--report", str(report), "--quiet", "--timeout-per-cell", "10", *extra],
                              capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc

    reports = []
    for run in range(3):
        out = root / f"out{run}"
        grade(out / "grades.json", "--jobs", "2", "--csv", str(out / "grades.csv"), "--junit", str(out / "grades.xml"),
              "--feedback", str(out / "feedback"), "--gradescope", str(out / "gradescope"))
        reports.append(json.loads((out / "grades.json").read_text()))
        reports[-1]["out"] = str(out)
    # a rerun into the first report, as after an interruption: one learner left 'not graded yet', one on the
    # roster who handed in nothing; the rest must be kept, not graded again
    first = root / "out0" / "grades.json"
    data = json.loads(first.read_text())
    data["learners"]["lookup"]["status"] = "not graded yet"
    first.write_text(json.dumps(data))
    (root / "roster.txt").write_text("# the class\n" + "\n".join([*LEARNERS, "absent_learner"]) + "\n")
    proc = grade(first, "--jobs", "2", "--csv", str(root / "out0" / "grades.csv"),
                 "--feedback", str(root / "out0" / "feedback"), "--roster", str(root / "roster.txt"))
    resumed = json.loads(first.read_text())
    resumed["out"], resumed["stderr"] = str(root / "out0"), proc.stderr
    # and once more: now every learner is kept, so no model run sets the time limits
    grade(first, "--roster", str(root / "roster.txt"))
    resumed["all_kept"] = json.loads(first.read_text())
    reports.append(resumed)
    reports.append(assignment_seed(sol))
    return reports


def test_three_runs_give_the_same_marks(regraded) -> None:
    *reports, _resumed, seed = regraded
    assert {r["run"]["seed"] for r in reports} == {seed}
    first = _marks(reports[0])
    model_checks = [s for checks in first["model"][1].values() for s in checks.values()]
    assert set(model_checks) <= {"passed", "not-graded"} and "passed" in model_checks, first["model"]
    assert first["lookup"][0] < first["model"][0], first
    assert first["prints_50_mb"] == first["model"], "50 MB of prints cost an honest answer nothing"
    assert first["raises_20_mb"][0] == first["model"][0], "a 20 MB error message after the answer costs it nothing"
    assert all(_marks(r) == first for r in reports[1:])


def test_every_learner_gets_a_page_of_their_own_and_odd_names_break_nothing(regraded) -> None:
    *reports, _resumed, _seed = regraded
    report = reports[1]  # out0 got the rerun's extra learner
    out = Path(report["out"])
    names = [os.fsdecode(n) for n in NAMES_THAT_COLLIDE]
    assert set(names) <= set(report["learners"]), sorted(report["learners"])
    pages = sorted(p.name for p in (out / "feedback").glob("*.html") if p.name != "index.html")
    assert len(pages) == len(report["learners"]) == len({p.lower() for p in pages}), pages
    assert len(list((out / "gradescope").glob("*.json"))) == len(report["learners"])
    index = (out / "feedback" / "index.html").read_text()
    assert "caf\\xe9 \\xff" in index and index.count("<tr>") == len(report["learners"]) + 1
    for page in pages:  # each page names the learner it is for, and only that one
        text = (out / "feedback" / page).read_text()
        assert text.count("<h1>Feedback for ") == 1
    assert "caf" in (out / "grades.csv").read_text() and (out / "grades.xml").read_text().startswith("<?xml")


def test_a_rerun_keeps_who_was_graded_and_the_roster_names_who_handed_in_nothing(regraded) -> None:
    *reports, resumed, _seed = regraded
    first = {n: m for n, m in _marks(reports[1]).items()}
    kept = resumed["run"]["kept_from_earlier_report"]
    all_kept = resumed["all_kept"]["run"]
    assert all_kept.get("kept_from_earlier_report") == len(resumed["learners"]) - 1, all_kept  # all but the absent one
    assert all_kept["time_limits_s"] == resumed["run"]["time_limits_s"], "it still says the limits it graded under"
    assert kept == len(reports[1]["learners"]) - 1, "every learner but the one left 'not graded yet' is kept"
    again = _marks(resumed)
    assert again.pop("absent_learner") == (0, {ex: {c: "not-handed-in" for c in checks}
                                               for ex, checks in first["model"][1].items()})
    assert again == first, "the regraded learner earns what the full runs gave"
    assert resumed["learners"]["absent_learner"]["status"] == "not-handed-in"
    out = Path(resumed["out"])
    assert "absent_learner" in (out / "grades.csv").read_text()
    assert "absent_learner" in (out / "feedback" / "index.html").read_text()
    assert "not on the roster, graded anyway" in resumed["stderr"] or any(
        "not on the roster" in w for w in resumed["warnings"]), "the hostile names are not on the roster"
