"""The grading engine: a class of honest and hostile learners graded confined, in one run, against a tiny notebook.

The class (tests/grading_fixtures/make_fixtures.py) is graded once per session with `python -m graphcourse.grading`
and every test reads that run. The hostile learners are the engine's own cases (the exercises' adversarial class
is tests/test_adversarial.py); each may earn at most what its honest part earns. No assertion depends on timing.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).parent / "grading_fixtures"))

from make_fixtures import (HOSTILE, MODEL, NAME, NAME2, learner_copy, require_confinement, second_copy, second_notebook,  # noqa: E402
                           solutions_notebook, stub_copy)

from graphcourse.grading import reports  # noqa: E402
from graphcourse.grading.notebooks import InvalidNotebook, discover, find_answer, parse  # noqa: E402
from graphcourse.grading.sandbox import GRADER_UID_BASE  # noqa: E402
from graphcourse.grading.scan import scan  # noqa: E402
from graphcourse.grading.scan import toy_private_names as scan_private_names  # noqa: E402
from graphcourse.grading.verdict import same  # noqa: E402

GRADED_MAX = 4  # ex01: 2 checks graded on a CPU (1 point needs CUDA), ex02: 2
FLOOR_S = "10"  # the least a learner cell gets; the model answers here run in milliseconds
EVIL_NAMES = ["\x1b[31mred\x1b[0m", "=HYPERLINK(\"x\")", "-2+3", "@SUM(A1)", ".dotted"]


def _write(path: Path, nb) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def _digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()}


def _sandbox_processes(uids) -> list[str]:
    """Processes still running with one of the run's kernel uids, or the detached child a learner started."""
    out = subprocess.run(["ps", "-eo", "uid=,pid=,args="], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if line.split() and (int(line.split()[0]) in uids or "sleep 6071" in line)]


def _left_scratch(report) -> list[str]:
    """The run's scratch folder (sockets), if it is still there."""
    scratch = (report or {}).get("run", {}).get("scratch")
    return [scratch] if scratch and Path(scratch).exists() else []


def _make_class(root: Path, solutions: Path) -> dict[str, object]:
    cls = root / "class"
    honest = {"honest": learner_copy(), "stub": stub_copy()}
    for name, nb in honest.items():
        _write(cls / name / NAME, nb)
    for name, (answers, _) in HOSTILE.items():
        text = {k: v.replace("SOLUTIONS", str(solutions / NAME)).replace("CLASS", str(cls)) for k, v in answers.items()}
        _write(cls / name / NAME, learner_copy(text))
    for i, name in enumerate(EVIL_NAMES):
        _write(cls / name / NAME, learner_copy())
    # moved and duplicated answers
    _write(cls / "deeper" / "work" / NAME, learner_copy())
    dup = learner_copy({"ex01_add": stub_copy().cells[3].source})
    dup.cells.append(nbformat.v4.new_code_cell("def add(a, b):\n    return a - b"))
    dup.cells.append(nbformat.v4.new_code_cell("print('scratch')"))
    dup.cells.append(nbformat.v4.new_code_cell("def add(a, b):\n    return b + a"))
    _write(cls / "duplicate" / NAME, dup)
    _write(cls / ".ipynb_checkpoints" / "x" / NAME, learner_copy())
    # bytes that are not a good notebook
    good = nbformat.writes(learner_copy()).encode()
    (cls / "bom").mkdir()
    (cls / "bom" / NAME).write_bytes(b"\xef\xbb\xbf" + good)
    (cls / "utf16").mkdir()
    (cls / "utf16" / NAME).write_bytes(nbformat.writes(learner_copy()).encode("utf-16"))
    (cls / "binary").mkdir()
    (cls / "binary" / NAME).write_bytes(bytes(range(256)) * 40)
    (cls / "nested").mkdir()
    (cls / "nested" / NAME).write_text('{"cells": ' + "[" * 100_000 + "]" * 100_000 + "}")
    bad_tags = json.loads(good)
    bad_tags["cells"][3]["metadata"]["tags"] = 7
    (cls / "int_tags").mkdir()
    (cls / "int_tags" / NAME).write_text(json.dumps(bad_tags))
    wrong = json.loads(good)
    wrong["cells"][3]["source"] = 12
    (cls / "int_source").mkdir()
    (cls / "int_source" / NAME).write_text(json.dumps(wrong))
    (cls / "no_cells").mkdir()
    (cls / "no_cells" / NAME).write_text('{"cells": 3}')
    (cls / "symlinked").mkdir()
    (cls / "symlinked" / NAME).symlink_to(solutions / NAME)
    return {"class": cls}


@pytest.fixture(scope="session")
def graded(tmp_path_factory):
    """The whole class graded in one run (two at a time, as on a 2-core CI machine)."""
    require_confinement()
    root = tmp_path_factory.mktemp("grading")
    solutions = root / "solutions"
    _write(solutions / NAME, solutions_notebook())
    made = _make_class(root, solutions)
    cls = made["class"]
    os.chmod(root, 0o755)
    before = _digest(cls)
    out = root / "out"
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "graphcourse.grading", str(cls), "--solutions", str(solutions),
                           "--report", str(out / "grades.json"), "--csv", str(out / "grades.csv"),
                           "--feedback", str(out / "feedback"), "--gradescope", str(out / "gradescope"),
                           "--junit", str(out / "grades.xml"), "--timeout-per-cell", FLOOR_S, "--jobs", "2", "--quiet"],
                          capture_output=True, text=True, timeout=1500)
    time.sleep(0.5)
    report = json.loads((out / "grades.json").read_text()) if (out / "grades.json").exists() else None
    uids = set((report or {}).get("run", {}).get("uids", []))
    return {"proc": proc, "report": report, "out": out, "class": cls, "before": before, "after": _digest(cls),
            "left": _sandbox_processes(uids), "uids": uids, "dirs": _left_scratch(report), "wall_s": time.monotonic() - start,
            "solutions": solutions}


def _learner(graded, name):
    assert graded["proc"].returncode == 0, graded["proc"].stderr[-3000:]
    return graded["report"]["learners"][name]


def _points(graded, name) -> int:
    return _learner(graded, name)["total"]


def test_the_class_is_graded_confined_in_one_run(graded):
    report = graded["report"]
    assert graded["proc"].returncode == 0, graded["proc"].stderr[-3000:]
    assert report["run"]["status"] == "complete" and report["run"]["confined"] is True
    assert "honest" in graded["proc"].stdout and "total" in graded["proc"].stdout
    for name, rec in report["learners"].items():
        for ex, m in rec["exercises"].items():
            assert m["status"] in ("passed", "partial", "failed", "error", "timeout", "missing", "review", "not-graded", "not-answered",
                                   "not-handed-in")
            assert m["message"] and m["points"] == sum(c["points"] for c in m["checks"].values()) or m["status"] == "review"
            assert m["points"] <= m["max"]


def test_the_honest_learners_get_every_point_graded_here(graded):
    for name in ["honest", "deeper", "bom", *EVIL_NAMES]:
        rec = _learner(graded, name)
        assert rec["total"] == GRADED_MAX and rec["open"] == 1, (name, rec)
        assert {m["status"] for m in rec["exercises"].values()} == {"passed"}, (name, rec)


def test_a_check_that_needs_cuda_earns_nothing_here_and_says_so(graded):
    m = _learner(graded, "honest")["exercises"]["ex01_add"]
    assert m["checks"]["ex01_add/on-gpu"]["status"] == "not-graded"
    assert "needs a CUDA GPU" in m["message"] and m["open"] == 1
    row = next(line for line in graded["proc"].stdout.splitlines() if line.startswith("honest "))
    assert "ex01 2/3*" in row and "* some checks were not graded on this machine" in graded["proc"].stdout, (
        graded["proc"].stdout)


def test_the_stub_earns_nothing_and_reads_not_answered_yet(graded):
    rec = _learner(graded, "stub")
    assert rec["total"] == 0
    for m in rec["exercises"].values():
        assert m["message"].startswith("not answered yet") and m["status"] == "not-answered", m
    row = next(line for line in graded["proc"].stdout.splitlines() if line.startswith("stub "))
    assert "not answered: ex01*, ex02" in row and "error" not in row, row  # *: ex01's CUDA point is still open
    assert "0/3 not answered" in (graded["out"] / "feedback" / "stub.html").read_text()


@pytest.mark.parametrize("run", ["graded", "graded_books"])
def test_the_terminal_table_fits_a_hundred_columns(run, request):
    """The class runs' tables (one notebook, and two with some not handed in) fit a terminal; the details are in
    the CSV, JSON and feedback."""
    out = request.getfixturevalue(run)["proc"].stdout
    table = out[: out.index("learner(s) graded in")]
    assert table.startswith("learner") and max(len(line) for line in table.splitlines()) <= reports.TABLE_WIDTH, table


def test_the_table_keeps_long_names_whole_and_every_line_short():
    ids = [f"ex{i:02d}_{'x' * 20}" for i in range(1, 17)]
    marks = {ex: {"points": 0, "max": 5, "status": s} for ex, s in
             zip(ids, ["passed", "partial", "failed", "error", "timeout", "missing", "not-answered", "review"] * 2)}
    books = {"06_exercises.ipynb": {"status": "graded", "points": 3, "max": 50, "open": 1, "exercises": ids[:10]},
             "07_compile_and_control_flow_and_more.ipynb": {"status": "not-handed-in", "points": 0, "max": 30,
                                                            "exercises": ids[10:]}}
    long_name = "a-learner-with-a-very-long-folder-name-" + "y" * 30
    report = {"learners": {name: {"total": 3, "max": 80, "open": 1, "status": "graded", "exercises": marks,
                                  "notebooks": books} for name in ("ada", long_name)}}
    table = reports.table(report)
    assert max(len(line) for line in table.splitlines()) <= reports.TABLE_WIDTH, table
    assert long_name in table.splitlines() and "not answered: ex07" in table and "not handed in" in table


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_no_hostile_learner_earns_more_than_its_honest_part(graded, name):
    rec = _learner(graded, name)
    assert rec["total"] <= HOSTILE[name][1], (name, rec)


def test_a_lookup_table_fails_the_hidden_inputs(graded):
    m = _learner(graded, "lookup_table")["exercises"]["ex01_add"]
    assert m["checks"]["ex01_add/fixed"]["status"] == "passed"
    assert m["checks"]["ex01_add/hidden"]["status"] == "failed" and m["status"] == "partial"


def test_tampering_answers_are_flagged_for_review_with_the_line(graded):
    for name in ("assertion_rebound", "input_transformer", "obfuscated_transformer", "patches_observe", "reads_solutions",
                 "kills_kernel", "armed_timer", "detached_child", "stops_itself"):
        rec = _learner(graded, name)
        flagged = [m for m in rec["exercises"].values() if m["status"] == "review"]
        assert flagged and all(m["points"] == 0 and "line" in " ".join(m["review"]) for m in flagged), (name, rec)


def test_one_learners_death_or_hang_costs_only_that_exercise(graded):
    for name, other in (("kills_kernel", "ex02_smallest"), ("armed_timer", "ex02_smallest"), ("stops_itself", "ex01_add")):
        m = _learner(graded, name)["exercises"][other]
        assert m["status"] == "passed", (name, m)
    stopped = _learner(graded, "stops_itself")["exercises"]["ex02_smallest"]
    assert "graded twice" in stopped["message"]


def test_objects_that_equal_anything_are_not_plain_data(graded):
    m = _learner(graded, "equal_to_anything")["exercises"]["ex01_add"]
    assert m.get("would_earn", m["points"]) == 0
    assert "not plain data" in json.dumps(m)


def test_no_learner_file_changes_and_nothing_appears_in_the_class_folder(graded):
    assert graded["after"] == graded["before"]


def test_no_process_outlives_the_grader_and_no_temporary_folder_is_left(graded):
    assert graded["uids"] and all(GRADER_UID_BASE < u < GRADER_UID_BASE + 1000 for u in graded["uids"])
    assert graded["left"] == [], graded["left"]
    assert graded["report"]["run"]["scratch"] and graded["dirs"] == []


def test_invalid_notebooks_are_reported_per_learner_with_a_reason(graded):
    reasons = {"utf16": "UTF-16", "binary": "binary", "nested": "too deeply", "int_source": "not text",
               "no_cells": "no list of cells"}
    for name, words in reasons.items():
        rec = _learner(graded, name)
        assert rec["total"] == 0 and words in json.dumps(rec), (name, rec)
        assert {m["status"] for m in rec["exercises"].values()} == {"error"}, (name, rec)
    rec = _learner(graded, "int_tags")  # tags that are not a list: ignored, the answer still found by its metadata
    assert rec["total"] == GRADED_MAX and "tags" in " ".join(rec["notes"])


def test_moved_duplicated_and_dotted_answers(graded):
    dup = _learner(graded, "duplicate")["exercises"]["ex01_add"]
    assert dup["status"] == "passed" and "graded the last one" in dup["message"], dup
    assert _learner(graded, ".dotted")["total"] == GRADED_MAX
    skipped = {Path(s["path"]).name: s["reason"] for s in graded["report"]["skipped"]}
    assert ".ipynb_checkpoints" in skipped
    assert "symbolic link" in skipped.get(NAME, "") or "symbolic link" in json.dumps(graded["report"]["skipped"])


def test_the_reports_escape_every_name(graded):
    out = graded["out"]
    stdout = graded["proc"].stdout
    assert "\x1b" not in stdout and "\\x1b[31mred" in stdout
    rows = list(csv.reader(io.StringIO((out / "grades.csv").read_text())))
    names = [r[0] for r in rows[1:]]
    assert all(not n.startswith(("=", "+", "-", "@")) for n in names)
    assert "'=HYPERLINK(\"x\")" in names and "'-2+3" in names
    ET.parse(out / "grades.xml")  # valid XML, escape sequences included
    pages = {p.name: p.read_text() for p in (out / "feedback").iterdir()}
    index = pages.pop("index.html")  # the feedback folder's index: a link to every learner's own page
    assert len(pages) == len(graded["report"]["learners"]) == index.count("<tr>") - 1
    assert all("<script" not in t and "\x1b" not in t for t in pages.values())
    honest = pages["honest.html"]
    assert "ex01_add" in honest and "4/5" in honest
    gs = json.loads((out / "gradescope" / "honest.json").read_text())
    assert gs["score"] == GRADED_MAX and {t["name"] for t in gs["tests"]} >= {"ex01_add/fixed", "ex02_smallest/values"}
    assert all(set(t) >= {"name", "score", "max_score", "output", "visibility"} for t in gs["tests"])


def test_hidden_checks_and_expected_values_never_reach_the_learner_copy():
    from graphcourse.authoring.build_exercises import exercise_notebook

    nb = exercise_notebook(solutions_notebook(), NAME)
    text = nbformat.writes(nb)
    assert "inputs.randint(-10**6" not in text  # the hidden check's cell
    assert "return a + b" not in text


def test_a_report_path_that_is_a_link_is_replaced_not_followed(tmp_path):
    victim = tmp_path / "classmate.ipynb"
    victim.write_text("classmate's work")
    link = tmp_path / "grades.json"
    link.symlink_to(victim)
    reports.write_atomic(link, "{}")
    assert victim.read_text() == "classmate's work" and not link.is_symlink() and link.read_text() == "{}"
    folder = tmp_path / "became_a_folder.json"
    folder.mkdir()
    (folder / "x").write_text("x")
    written = reports.write_atomic(folder, "{}")
    assert written != folder and written.read_text() == "{}"
    with pytest.raises(reports.ReportPathError):
        reports.check_target(folder)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_parse_reads_a_bom_and_refuses_what_is_not_a_notebook():
    good = nbformat.writes(learner_copy()).encode()
    cells, _, notes = parse(b"\xef\xbb\xbf" + good)
    assert cells and "byte-order mark" in notes[0]
    for data, words in [(good.decode().encode("utf-16"), "UTF-16"), (b"\x00\x01\x02", "binary"),
                        (b"\x89PNG\r\n\x1a\n\x00\x00", "binary"), (b"[" * 50_000, "too deeply"),
                        (b'{"cells": {}}', "no list of cells"), (b'{"cells": [5]}', "not a cell"), (b"[]", "JSON list")]:
        with pytest.raises(InvalidNotebook, match=words):
            parse(data)


def test_find_answer_takes_the_last_written_cell_and_never_the_stub():
    stub = stub_copy()
    cells, _, _ = parse(nbformat.writes(stub).encode())
    stub_src = next(c.source for c in cells if c.graphcourse.get("role") == "answer" and c.graphcourse["exercise"] == "ex01_add")
    a = find_answer(cells, "ex01_add", {"add"}, stub_src, set(), set())
    assert a.stub and a.source == stub_src
    stub.cells.append(nbformat.v4.new_code_cell("def add(a, b):\n    return a + b"))
    cells, _, _ = parse(nbformat.writes(stub).encode())
    a = find_answer(cells, "ex01_add", {"add"}, stub_src, set(), set())
    assert not a.stub and "return a + b" in a.source and "graded cell" in a.notes[0]


def test_the_static_scan_names_the_line():
    assert scan("def add(a, b):\n    return a + b") == []
    flags = scan("x = 1\nimport sys\nsys.modules['toygraph'].launch = None")
    assert any(f.startswith("line 2") for f in flags) and any("line 3" in f for f in flags)
    assert scan("def f():\n    return eval('1')")
    assert scan("class A:\n    def __eq__(self, o):\n        return True")
    assert scan("ToyGraph.replay = lambda self, x: x")
    assert not scan("class L:\n    def __init__(self):\n        self.ready = False")


def test_the_scan_sees_the_ways_around_a_guarded_object():
    """Three forgeries a red-team review made earn points unflagged: functools.wraps writing into __dict__, a
    built-in type's method called on the toy's guarded list, and __init__ run again on it."""
    assert scan("import functools\ng = functools.wraps(src, assigned=(), updated=(D,))(g)")
    assert scan("from functools import wraps\nwraps(src)(g)")
    assert scan("def f(dev):\n    list.pop(dev.graph_pools, 0)")
    assert scan("def f(dev):\n    object.__setattr__(dev, 'sync_count', 3)")
    assert scan("def f(dev):\n    dev.graph_pools.__init__([])")
    # what honest answers write stays unflagged
    assert not scan("def f(xs):\n    ys = list(xs)\n    ys.pop(0)\n    return dict.fromkeys(ys)")
    assert not scan("class Pool:\n    def __init__(self, n):\n        super().__init__()\n        self.rows = [0] * n")
    assert not scan("class A:\n    pass\nclass B(A):\n    def __init__(self):\n        A.__init__(self)")


def test_the_scan_sees_a_class_reached_through_type_and_the_toys_private_names():
    """A second red-team pass: a dict's own update reached as type({}) (or through an alias), and the toy's private
    "inside a kernel" flag imported by name, rewrote a one-stream DAG (ex16 +3), popped graph pools (ex10 +2) and
    hid host reads (ex03 +2), unflagged."""
    assert scan("_table = type({})\ndef f(sg):\n    _table.update(sg.deps, {})")
    assert scan("def f(sg):\n    type(sg.deps).clear(sg.deps)")
    assert scan("D = dict\ndef f(sg):\n    D.update(sg.stream_of, {})")
    assert scan("from toygraph.memory import _IN_KERNEL")
    assert scan("import toygraph.memory as m\nm._IN_KERNEL.set(True)")
    assert scan("def f(sg):\n    sg._joined_up_to.clear()")
    assert "_IN_KERNEL" in scan_private_names() and "_joined_up_to" in scan_private_names()
    # a third pass: __eq__ bound in a class body (to catch what a comparison hands over), and super() on the toy's list
    assert scan("def _grab(a, b):\n    return True\nclass Catch:\n    __eq__ = _grab")
    assert scan("def f(dev):\n    super(type(dev.graph_pools), dev.graph_pools).pop(0)")
    assert not scan("class A(Base):\n    def __init__(self):\n        super(A, self).__init__()")
    # what honest answers write stays unflagged: their own private attributes, type() to compare or name a class
    assert not scan("class Runner:\n    def __init__(self):\n        self._cache = {}\n    def run(self, x):\n"
                    "        self._cache.clear()\n        return type(x).__name__")
    assert not scan("def f(x):\n    return isinstance(x, type(None)) or type(x) is dict")


def test_plain_data_comparison_has_no_loopholes():
    assert same([1, 2.0, "a", None, True], [1, 2.0, "a", None, True], 0)
    assert not same(True, 1, 0) and not same(1, True, 0)
    assert not same({"unplain": "X"}, 3, 0)
    assert same(1.0, 1.0 + 1e-12, 1e-9) and not same(1.0, 1.1, 1e-9)
    assert not same(float("nan"), float("nan"), 1e-9)


def test_discover_finds_deeper_folders_and_lists_what_it_skips(tmp_path):
    _write(tmp_path / "ann" / NAME, stub_copy())
    _write(tmp_path / "bob" / "work" / NAME, stub_copy())
    _write(tmp_path / ".cy" / NAME, stub_copy())
    _write(tmp_path / ".ipynb_checkpoints" / NAME, stub_copy())
    (tmp_path / "empty").mkdir()
    learners, skipped = discover([tmp_path], {NAME}, lambda p: NAME)
    assert sorted(l.name for l in learners) == [".cy", "ann", "bob"]
    assert {Path(p).name for p, _ in skipped} == {".ipynb_checkpoints", "empty"}


def test_every_learner_keeps_a_name_of_their_own(tmp_path):
    """A loose alice.ipynb beside the folders alice/ and 'alice (2)/' was renamed 'alice (2)', and the two learners
    then shared (and overwrote) one record in every report."""
    _write(tmp_path / "alice" / NAME, stub_copy())
    _write(tmp_path / "alice (2)" / NAME, stub_copy())
    _write(tmp_path / "alice.ipynb", stub_copy())
    learners, _ = discover([tmp_path], {NAME}, lambda p: NAME)
    names = [l.name for l in learners]
    assert len(set(names)) == len(names) == 3, names
    assert {"alice", "alice (2)"} <= set(names), names
    by_name = {l.name: l.files[0].parent.name if l.files[0].name == NAME else l.files[0].name for l in learners}
    assert by_name["alice (2)"] == "alice (2)", "the folder keeps its own name; the loose notebook gets another"


def test_a_learner_named_index_keeps_their_feedback_page():
    stems = reports.file_names(["index", "Index", "ann"])
    assert "index" not in {s.lower() for s in stems.values()}, stems  # feedback/index.html is the class's page
    assert len({s.lower() for s in stems.values()}) == 3 and stems["ann"] == "ann", stems


def test_a_name_cannot_print_a_row_of_its_own_in_the_terminal_table():
    forged = "bob\n  16\u221516 \tfaked"
    assert "\n" not in reports.shown(forged) and "\t" not in reports.shown(forged)
    assert reports.shown(forged).startswith("bob\\x0a")
    assert reports.shown("ann") == "ann"


def test_the_grader_says_why_it_cannot_run(tmp_path, capsys):
    from graphcourse.grading.cli import main

    with pytest.raises(SystemExit) as bad_args:
        main([str(tmp_path / "nobody"), "--report", str(tmp_path / "r.json")])
    assert bad_args.value.code == 2 and "does not exist" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    (tmp_path / "class").mkdir()
    assert main([str(tmp_path / "class"), "--report", str(tmp_path / "r.json"), "--solutions", str(tmp_path / "empty")]) == 1
    assert "no solutions notebooks" in capsys.readouterr().err
    (tmp_path / "r.json").mkdir()
    assert main([str(tmp_path / "class"), "--report", str(tmp_path / "r.json")]) == 1
    assert "is a folder" in capsys.readouterr().err


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_signalled_grader_leaves_a_valid_report_and_nothing_running(course_process, tmp_path, sig):
    """Stopped (SIGTERM) or killed (SIGKILL) mid-run: the report is valid JSON with the learners so far; nothing is left."""
    require_confinement()
    solutions = tmp_path / "solutions"
    _write(solutions / NAME, solutions_notebook())
    slow = "def add(a, b):\n    n = 0\n    while n >= 0:\n        n += 1\n    return a + b"
    for i in range(4):
        _write(tmp_path / "class" / f"l{i}" / NAME, learner_copy({"ex01_add": slow} if i else None))
    report = tmp_path / "grades.json"
    proc = subprocess.Popen([sys.executable, "-m", "graphcourse.grading", str(tmp_path / "class"), "--solutions",
                             str(solutions), "--report", str(report), "--jobs", "1", "--quiet", "--timeout-per-cell", "60"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:  # wait until the first learner is in the report, then stop the grader
        try:
            if json.loads(report.read_text())["learners"]["l0"]["status"] == "graded":
                break
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.5)
    time.sleep(2)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == (128 + sig if sig != signal.SIGKILL else -sig), err
    data = json.loads(report.read_text())
    assert data["run"]["status"].startswith("stopped" if sig != signal.SIGKILL else "running")
    assert data["learners"]["l0"]["total"] == GRADED_MAX
    assert any(rec["status"] == "not graded yet" for rec in data["learners"].values())
    for _ in range(60):  # the sandboxes die with the grader; its watchdog then clears the scratch folder
        if not _sandbox_processes(set(data["run"]["uids"])) and not _left_scratch(data):
            break
        time.sleep(0.5)
    assert data["run"]["uids"] and _sandbox_processes(set(data["run"]["uids"])) == []
    assert _left_scratch(data) == []


def _fake_runs():
    from graphcourse.grading.assignment import load_assignment
    from graphcourse.grading.runner import CellRun, CheckRun, ExerciseRun

    return load_assignment, CellRun, CheckRun, ExerciseRun


def test_review_earns_nothing_until_an_instructor_clears_it(tmp_path):
    from graphcourse.grading.verdict import exercise_mark

    load_assignment, CellRun, CheckRun, ExerciseRun = _fake_runs()
    path = _write(tmp_path / NAME, solutions_notebook())
    ex = load_assignment(path).exercises[1]  # ex02_smallest: two checks, 1 point each
    model = ExerciseRun(ex.id, CellRun("ok"), {c.id: CheckRun(c.id, "ran", obs={"k": {"value": 1}}) for c in ex.checks})
    learner = ExerciseRun(ex.id, CellRun("ok"), {c.id: CheckRun(c.id, "ran", obs={"k": {"value": 1}}) for c in ex.checks})
    flags = ["line 1: imports sys"]
    held = exercise_mark(ex, model, learner, available=set(), review=flags, allowed=False, answer_notes=[])
    assert held["status"] == "review" and held["points"] == 0 and held["would_earn"] == 2 and "line 1" in held["message"]
    cleared = exercise_mark(ex, model, learner, available=set(), review=flags, allowed=True, answer_notes=[])
    assert cleared["status"] == "passed" and cleared["points"] == 2 and "cleared by an instructor" in cleared["message"]
    learner.checks[ex.checks[0].id] = CheckRun(ex.checks[0].id, "ran", obs={"k": {"value": True}})  # True is not 1
    partial = exercise_mark(ex, model, learner, available=set(), review=[], allowed=False, answer_notes=[])
    assert partial["status"] == "partial" and partial["points"] == 1


def test_one_invalid_notebook_alone_with_one_job_is_reported_not_raised(course_process, tmp_path):
    require_confinement()
    solutions = tmp_path / "solutions"
    _write(solutions / NAME, solutions_notebook())
    bad = tmp_path / "alice.ipynb"
    bad.write_text('{"cells": [{"cell_type": "code", "source": 5, "metadata": {"tags": 3}}]}')
    report = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-m", "graphcourse.grading", str(bad), "--solutions", str(solutions),
                           "--report", str(report), "--jobs", "1", "--quiet"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rec = json.loads(report.read_text())["learners"]["alice"]
    assert rec["total"] == 0 and {m["status"] for m in rec["exercises"].values()} == {"error"}
    assert "cell 1: its source is int, not text" in json.dumps(rec)


def test_without_confinement_the_grader_refuses_unless_allowed_then_says_so_loudly(course_process, tmp_path):
    solutions = tmp_path / "solutions"
    _write(solutions / NAME, solutions_notebook())
    _write(tmp_path / "class" / "ann" / NAME, learner_copy())
    report = tmp_path / "r.json"
    cmd = [sys.executable, "-m", "graphcourse.grading", str(tmp_path / "class"), "--solutions", str(solutions),
           "--report", str(report), "--quiet"]
    unconfined = dict(os.environ, GRAPHCOURSE_GRADE_UNCONFINED="1")
    refused = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=unconfined)
    assert refused.returncode == 1 and not report.exists(), refused.stderr[-2000:]
    assert "cannot be confined" in refused.stderr and "--allow-unconfined" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr
    proc = subprocess.run(cmd + ["--allow-unconfined"], capture_output=True, text=True, timeout=600, env=unconfined)
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(report.read_text())
    assert data["run"]["confined"] is False and data["run"]["confinement"].startswith("NOT CONFINED")
    assert "WARNING" in proc.stderr and "NOT confined" in proc.stdout
    assert any("NOT confined" in w for w in data["warnings"])
    assert data["learners"]["ann"]["total"] == GRADED_MAX  # it still grades


# --- several solutions notebooks: a learner hands in any subset ----------------------------------------------

SECOND_MAX = 2  # ex03_mul: a visible and a hidden check, 1 point each


def _make_two_book_class(cls: Path, solutions: Path) -> None:
    _write(cls / "both" / NAME, learner_copy())
    _write(cls / "both" / NAME2, second_copy())
    _write(cls / "first_only" / NAME, learner_copy())
    _write(cls / "second_only" / NAME2, second_copy())
    # the second notebook's copy saved under the first one's name, the first one's under another name
    _write(cls / "wrong_names" / NAME, second_copy())
    _write(cls / "wrong_names" / "homework.ipynb", learner_copy())
    # the second notebook's answer pasted into a fresh notebook (no builder metadata), beside the first
    _write(cls / "pasted" / NAME, learner_copy())
    _write(cls / "pasted" / "my_answers.ipynb",
           nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(MODEL2_ANSWER)]))
    # hostile through the second notebook: state planted by the first notebook's last answer where the static
    # scan does not look (a module's list survives a namespace reset: within one notebook's reused kernel the next
    # exercise sees it), read by the second notebook's answer; and an answer that reads the second's solutions
    plant = ('import warnings\nwarnings.filters.append(("ignore", None, Warning, None, 4242))\n\n'
             + MODEL["ex02_smallest"])
    _write(cls / "cross_state" / NAME, learner_copy({"ex02_smallest": plant}))
    _write(cls / "cross_state" / NAME2, second_copy({"ex03_mul": (
        "def mul(a, b):\n    import warnings\n    return a * b if any(f[4] == 4242 for f in warnings.filters) else 0")}))
    _write(cls / "second_reads_solutions" / NAME, learner_copy())
    _write(cls / "second_reads_solutions" / NAME2, second_copy({"ex03_mul": (
        f"def mul(a, b):\n    import json\n    json.load(open({str(solutions / NAME2)!r}))\n    return a * b")}))


MODEL2_ANSWER = "def mul(a, b):\n    return a * b"


@pytest.fixture(scope="session")
def graded_books(tmp_path_factory):
    """A class graded against two solutions notebooks, each learner handing in a different subset."""
    require_confinement()
    root = tmp_path_factory.mktemp("two-books")
    solutions = root / "solutions"
    _write(solutions / NAME, solutions_notebook())
    _write(solutions / NAME2, second_notebook())
    cls = root / "class"
    _make_two_book_class(cls, solutions)
    os.chmod(root, 0o755)
    before = _digest(cls)
    out = root / "out"
    proc = subprocess.run([sys.executable, "-m", "graphcourse.grading", str(cls), "--solutions", str(solutions),
                           "--report", str(out / "grades.json"), "--csv", str(out / "grades.csv"),
                           "--feedback", str(out / "feedback"), "--gradescope", str(out / "gradescope"),
                           "--junit", str(out / "grades.xml"), "--timeout-per-cell", FLOOR_S, "--jobs", "2", "--quiet"],
                          capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((out / "grades.json").read_text())
    return {"proc": proc, "report": report, "out": out, "before": before, "after": _digest(cls)}


def _book(graded_books, learner: str, name: str) -> dict:
    return graded_books["report"]["learners"][learner]["notebooks"][name]


def test_two_notebooks_handed_in_are_each_graded_in_full(graded_books):
    rec = graded_books["report"]["learners"]["both"]
    assert rec["total"] == GRADED_MAX + SECOND_MAX and rec["max"] == 5 + SECOND_MAX and rec["open"] == 1, rec
    assert {m["status"] for m in rec["exercises"].values()} == {"passed"}
    assert _book(graded_books, "both", NAME) == {"status": "graded", "file": NAME, "points": GRADED_MAX, "max": 5,
                                                 "open": 1, "exercises": ["ex01_add", "ex02_smallest"]}
    assert _book(graded_books, "both", NAME2)["points"] == SECOND_MAX
    assert graded_books["report"]["run"]["solutions"] == [NAME, NAME2]


@pytest.mark.parametrize("learner, handed, missing", [("first_only", NAME, NAME2), ("second_only", NAME2, NAME)])
def test_a_notebook_not_handed_in_costs_only_its_own_exercises(graded_books, learner, handed, missing):
    rec = graded_books["report"]["learners"][learner]
    assert rec["status"] == "graded", rec
    got, lost = _book(graded_books, learner, handed), _book(graded_books, learner, missing)
    assert got["status"] == "graded" and got["points"] == got["max"] - got["open"] > 0, got
    assert lost["status"] == "not-handed-in" and lost["points"] == 0 and lost["open"] == 0 and lost["file"] is None
    for ex in lost["exercises"]:
        m = rec["exercises"][ex]
        assert m["status"] == "not-handed-in" and m["points"] == 0 and m.get("open", 0) == 0, m
        assert "not handed in" in m["message"] and missing in m["message"]
        assert {c["status"] for c in m["checks"].values()} == {"not-handed-in"}
    for ex in got["exercises"]:
        assert rec["exercises"][ex]["status"] == "passed"
    assert rec["total"] == got["points"]


def test_a_notebook_handed_in_under_another_name_is_graded_as_what_it_is(graded_books):
    rec = graded_books["report"]["learners"]["wrong_names"]
    assert _book(graded_books, "wrong_names", NAME2)["file"] == NAME  # the second notebook, saved as the first
    assert _book(graded_books, "wrong_names", NAME)["file"] == "homework.ipynb"
    assert rec["total"] == GRADED_MAX + SECOND_MAX, rec
    assert any(f"{NAME} is a copy of {NAME2}" in n for n in rec["notes"]), rec["notes"]
    pasted = graded_books["report"]["learners"]["pasted"]
    assert _book(graded_books, "pasted", NAME2)["file"] == "my_answers.ipynb"
    assert pasted["exercises"]["ex03_mul"]["status"] == "passed", pasted["exercises"]["ex03_mul"]


def test_a_hostile_second_notebook_gains_nothing_and_costs_the_first_nothing(graded_books):
    state = graded_books["report"]["learners"]["cross_state"]
    # each notebook runs in kernels of its own: the first notebook's planted state never reaches the second's
    assert state["exercises"]["ex03_mul"]["points"] == 0 and state["exercises"]["ex03_mul"]["status"] == "failed", (
        state["exercises"]["ex03_mul"])
    assert _book(graded_books, "cross_state", NAME)["points"] == GRADED_MAX
    reads = graded_books["report"]["learners"]["second_reads_solutions"]
    m = reads["exercises"]["ex03_mul"]
    assert m["status"] == "review" and m["points"] == 0 and "line" in " ".join(m["review"]), m
    assert _book(graded_books, "second_reads_solutions", NAME)["points"] == GRADED_MAX
    assert graded_books["after"] == graded_books["before"]


def test_every_report_shows_points_per_notebook_and_per_exercise(graded_books):
    out = graded_books["out"]
    rows = list(csv.DictReader(io.StringIO((out / "grades.csv").read_text())))
    first = next(r for r in rows if r["learner"] == "first_only")
    assert first[f"{NAME} points"] == str(GRADED_MAX) and first[f"{NAME2} status"] == "not-handed-in"
    assert first["ex03_mul status"] == "not-handed-in" and first["ex03_mul"] == "0"
    page = (out / "feedback" / "first_only.html").read_text()
    assert f"<code>{NAME2}</code>" in page and "not handed in" in page.lower() and "ex01_add" in page
    gs = json.loads((out / "gradescope" / "first_only.json").read_text())
    assert gs["extra_data"]["notebooks"][NAME2]["status"] == "not-handed-in" and "not handed in" in gs["output"]
    assert all(t["tags"] in ([NAME], [NAME2]) for t in gs["tests"])
    suites = {s.get("name"): s for s in ET.parse(out / "grades.xml").getroot()}
    props = {p.get("name"): p.get("value") for p in suites["first_only"].iter("property")}
    assert props[f"{NAME2} points"].startswith("not handed in") and props[f"{NAME} points"].startswith(f"{GRADED_MAX}/5")
    table = graded_books["proc"].stdout
    assert "not handed in" in table and "02_tiny_more" in table


def test_one_learners_notebooks_named_one_by_one_are_one_learner(tmp_path):
    from graphcourse.grading.notebooks import discover

    _write(tmp_path / "me" / NAME, learner_copy())
    _write(tmp_path / "me" / NAME2, second_copy())
    learners, _ = discover([tmp_path / "me" / NAME, tmp_path / "me" / NAME2], {NAME, NAME2}, lambda p: None)
    assert [(l.name, sorted(f.name for f in l.files)) for l in learners] == [("me", [NAME, NAME2])]


def test_an_answer_held_for_review_shows_the_learner_nothing_its_code_returned():
    """A third red-team pass: an answer that hooked the kernel's messages read a hidden check's source and returned
    it, and the visible check's message ("your code gave 'LEAK ...'") showed it on Gradescope at once, though the
    exercise was held for review. Held, a check's message says so instead; the instructor's report keeps all."""
    import json as _json

    from graphcourse.grading.reports import feedback_html, gradescope

    leak = "LEAK _batches = [list(range(inputs.randint(1, 8)))"
    rec = {"total": 0, "max": 5, "notes": [], "notebooks": {}, "exercises": {"ex07_shared_pool": {
        "points": 0, "max": 5, "open": 0, "status": "review", "message": "needs review by an instructor: line 3: ...",
        "checks": {"ex07_shared_pool/values": {"points": 0, "max": 2, "status": "failed", "hidden": False,
                                               "message": f"values: your code gave {leak!r}"},
                   "ex07_shared_pool/arrival_order": {"points": 0, "max": 3, "status": "passed", "hidden": False,
                                                      "message": "passed"}}}}}
    out = gradescope(rec)
    assert "LEAK" not in out and "held for review" in _json.loads(out)["tests"][0]["output"]
    page = feedback_html("mallory", rec, {})
    assert "LEAK" not in page and "held for review" in page
    rec["exercises"]["ex07_shared_pool"]["status"] = "failed"  # not held: the learner reads what the code gave
    assert "LEAK" in gradescope(rec) and "LEAK" in feedback_html("mallory", rec, {})
