"""A hostile class cannot break the grader: what each attack earns, and what it costs its classmates.

The class (tests/adversarial/classroom.py) holds honest classmates, some with names a terminal or a spreadsheet would
misread, hostile learners (tests/adversarial/learners/*.py: each a thing a bored or desperate student might try, with
an honest part: the model answer in some exercises), and notebooks that are not valid notebooks. It is graded once,
by the grader's command line, as an instructor would grade it. Then:

* no hostile learner earns points its honest part does not earn;
* every honest classmate gets full marks (every point graded on this machine);
* a death armed in one answer costs no later exercise;
* no learner file changes (checksums), and no file appears in the class folder;
* no process outlives the grader, and nothing is left in its temporary folder;
* the report is complete, valid, and escapes every name (JSON, CSV, terminal, HTML feedback, JUnit),
  also when the grader is stopped by a signal mid-run.

Every process an attack starts carries the run's marker (in its command line or its environment), so a survivor can
be found, and is ended after the test has recorded it. Attacks that signal or hijack processes only touch processes
of this run. These tests describe the confinement the grader must give; they are the red team's, not the grader's.
"""

from __future__ import annotations

import csv
import glob
import hashlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "adversarial"))
import classroom  # noqa: E402

MARKER_ENV = "GRAPHCOURSE_ADVERSARY_RUN"
FLAGGED = {  # attacks that touch the grading machinery: the grader lists them as "needs review"
    "input_transformer", "ast_transformer", "wrap_run_cell", "rebind_assertion", "shadow_builtins", "patch_toygraph",
    "sys_modules", "settrace_checks", "kill_grader", "sigstop_parent", "signal_classmates", "steal_secret",
    "read_solutions", "proc_classmate", "overwrite_classmates", "symlink_report", "ctypes_crash", "gc_hunt",
    "write_files", "hijack_kernels", "second_notebook_rewrites_first",
    # held by the tripwire (graphcourse/grading/tripwire.py) or the toy's guards, at run time:
    "forge_replay_count", "forge_sync_count", "observe_from_answer", "reseed_hidden_inputs", "patch_observe_mock",
    "transformer_forges_footer", "rebind_check_global",
    # found by attacking the tripwire as a student would (a trap the footer springs, code named as a package's,
    # records written straight into the pipe, a thread of library frames only, a stolen footer key):
    "len_trap_forges_obs", "len_trap_forges_syncs", "doctest_trusted_code", "rawthread_pipe_forge",
    "thread_rewrites_replays", "keytheft_resign",
    # a second pass: object.__setattr__ reached by a name in a string, and code hidden in a string annotation
    "fmt_getfield_setattr", "pydoc_locate_setattr", "typing_forwardref_hidden",
}  # (stealthy_solutions and mock_any pass the static scan: confinement and plain data must stop them)


def _digest(root: Path) -> dict[str, str]:
    out = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_symlink():
            out[rel] = "link:" + os.readlink(p)
        elif p.is_dir():
            out[rel] = "dir"
        else:
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _marked(run_id: str) -> list[int]:
    """Processes of this run still alive: the marker in their command line or environment (not this process)."""
    found = []
    for d in glob.glob("/proc/[0-9]*"):
        pid = int(d.rsplit("/", 1)[1])
        if pid == os.getpid():
            continue
        try:
            with open(f"{d}/cmdline", "rb") as f:
                cmd = f.read()
            with open(f"{d}/environ", "rb") as f:
                env = f.read()
            with open(f"{d}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state == "Z":
            continue
        if run_id.encode() in cmd or run_id.encode() in env:
            found.append(pid)
    return found


def _end(pids: list[int]) -> None:
    for pid in pids:
        for sig in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.kill(pid, sig)
            except OSError:
                pass


def _survivors(run_id: str, grace_s: float = 10.0) -> list[str]:
    """Processes of this run still alive after a grace period, described; they are ended afterwards."""
    deadline = time.monotonic() + grace_s
    pids = _marked(run_id)
    while pids and time.monotonic() < deadline:
        time.sleep(0.5)
        pids = _marked(run_id)
    described = []
    for pid in pids:
        try:
            described.append(f"{pid}: " + open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode()[:120])
        except OSError:
            pass
    _end(pids)
    return described


def _grade(root: Path, out: Path, run_id: str, extra: list[str] = (), stop_when_graded: bool = False,
           stop_signal: int = signal.SIGTERM) -> dict:
    """Grade root with the grader's command line, as an instructor would; optionally signal it mid-run."""
    tmp = Path(tempfile.mkdtemp(prefix="gca-"))  # short: a kernel's IPC socket path must fit in 107 bytes
    env = dict(os.environ, TMPDIR=str(tmp), **{MARKER_ENV: run_id})
    args = [sys.executable, "-m", "graphcourse.grading", str(root), "--report", str(out / "grades.json"),
            "--csv", str(out / "grades.csv"), "--feedback", str(out / "feedback"), "--junit", str(out / "grades.xml"),
            "--jobs", "2", "--quiet", "--timeout-per-cell", "20", *extra]
    start = time.monotonic()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    signalled = False
    try:
        if stop_when_graded:  # signal the grader once one learner is graded, while the next is being graded
            while proc.poll() is None and time.monotonic() - start < 900:
                time.sleep(1)
                try:
                    report = json.loads((out / "grades.json").read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    continue
                if any(r.get("status") != "not graded yet" for r in report.get("learners", {}).values()):
                    if proc.poll() is None:
                        signalled = True
                        proc.send_signal(stop_signal)
                    break
            stdout, stderr = proc.communicate(timeout=120)
        else:
            stdout, stderr = proc.communicate(timeout=3000)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        pytest.fail(f"the grader did not finish: {stderr[-2000:]}")
    wall = time.monotonic() - start
    survivors = _survivors(run_id)
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # whatever the grader left in its own session
    except OSError:
        pass
    left = sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*"))
    shutil.rmtree(tmp, ignore_errors=True)
    return {"returncode": proc.returncode, "stdout": stdout, "stderr": stderr, "wall_s": wall,
            "survivors": survivors, "tmp_left": left, "signalled": signalled, "out": out}


@pytest.fixture(scope="session")
def graded_class(tmp_path_factory):
    run_id = f"gcadv{secrets.token_hex(6)}"
    root = tmp_path_factory.mktemp("adversarial-class")
    learners = classroom.build(root, run_id)
    before = _digest(root)
    out = tmp_path_factory.mktemp("adversarial-out")
    result = _grade(root, out, run_id)
    result.update(learners=learners, root=root, before=before, after=_digest(root), run_id=run_id)
    report = out / "grades.json"
    result["report_text"] = report.read_text(encoding="utf-8") if report.is_file() else None
    if os.environ.get("GRAPHCOURSE_KEEP_REPORTS") and result["report_text"]:  # keep it for a closing note
        Path(os.environ["GRAPHCOURSE_KEEP_REPORTS"]).mkdir(parents=True, exist_ok=True)
        Path(os.environ["GRAPHCOURSE_KEEP_REPORTS"], "adversarial.json").write_text(result["report_text"])
        Path(os.environ["GRAPHCOURSE_KEEP_REPORTS"], "adversarial.stdout").write_text(result["stdout"])
    print(f"\nadversarial class: {len(learners)} learners graded in {result['wall_s']:.0f} s")
    return result


def _report(graded) -> dict:
    assert graded["returncode"] == 0, graded["stderr"][-3000:]
    assert graded["report_text"] is not None, "no report was written"
    return json.loads(graded["report_text"])


def _marks(graded, name: str) -> dict:
    report = _report(graded)
    assert name in report["learners"], f"{name!r} is missing from the report"
    return report["learners"][name]


def _learners(graded, kind: str) -> list[classroom.Learner]:
    return [l for l in graded["learners"].values() if l.kind == kind]


def _graded_max(mark: dict) -> int:
    return mark["max"] - mark.get("open", 0)


def test_odd_names_are_reported_escaped(graded_class):
    report = _report(graded_class)
    for learner in _learners(graded_class, "odd"):
        assert learner.name in report["learners"], repr(learner.name)


def test_every_honest_classmate_gets_full_marks(graded_class):
    for learner in _learners(graded_class, "honest"):
        rec = _marks(graded_class, learner.name)
        for ex_id, mark in rec["exercises"].items():
            assert mark["points"] == _graded_max(mark) > 0, (learner.name, ex_id, mark)


@pytest.mark.parametrize("name", sorted(p.stem for p in classroom.LEARNERS.glob("*.py")))
def test_no_hostile_learner_earns_points_its_honest_part_does_not_earn(graded_class, name):
    learner = graded_class["learners"][name]
    rec = _marks(graded_class, name)
    for ex_id, mark in rec["exercises"].items():
        if ex_id not in learner.honest:
            assert mark["points"] == 0, (f"{name} ({learner.attack}) earned {mark['points']} in {ex_id}", mark)
    assert rec["total"] <= sum(_graded_max(m) for e, m in rec["exercises"].items() if e in learner.honest)


@pytest.mark.parametrize("name", sorted(p.stem for p in classroom.LEARNERS.glob("*.py")
                                        if "# later: full" in p.read_text(encoding="utf-8")))
def test_a_death_armed_in_one_answer_costs_no_later_exercise(graded_class, name):
    learner = graded_class["learners"][name]
    rec = _marks(graded_class, name)
    for ex_id in learner.later:
        mark = rec["exercises"][ex_id]
        assert mark["points"] == _graded_max(mark), (f"{name}: {ex_id} paid for {learner.attack}", mark)


def test_answers_that_touch_the_grading_machinery_are_flagged_for_review(graded_class):
    unflagged = []
    for name in sorted(FLAGGED & set(graded_class["learners"])):
        rec = _marks(graded_class, name)
        learner = graded_class["learners"][name]
        attacked = [e for e in rec["exercises"] if e not in learner.honest]
        if not any(rec["exercises"][e]["status"] == "review" for e in attacked):
            unflagged.append(name)
    assert not unflagged, f"not listed as needs review: {unflagged}"


def test_notebooks_that_are_not_notebooks_are_reported_with_a_reason(graded_class):
    report = _report(graded_class)
    skipped = {Path(s["path"]).parent.name: s["reason"] for s in report.get("skipped", [])}
    unreadable = {"invalid_binary", "invalid_deep", "invalid_empty", "invalid_truncated", "invalid_not_object",
                  "invalid_cells_dict"}
    for learner in _learners(graded_class, "invalid"):
        if learner.name in report["learners"]:
            rec = report["learners"][learner.name]
            assert rec["total"] == 0, (learner.name, rec)  # every one of them holds stubs at best
            if learner.name in unreadable:  # not a notebook at all: said so, with the reason
                assert rec["notes"] and any(m["status"] == "error" for m in rec["exercises"].values()), (
                    learner.name, rec["notes"])
        else:
            assert learner.name in skipped and skipped[learner.name], (learner.name, "neither graded nor skipped")


def test_no_learner_file_changes_and_nothing_appears_in_the_class_folder(graded_class):
    before, after = graded_class["before"], graded_class["after"]
    changed = sorted(p for p in before if after.get(p) != before[p])
    appeared = sorted(set(after) - set(before))
    assert not changed and not appeared, {"changed": changed, "appeared": appeared}


def test_no_process_outlives_the_grader_and_no_temporary_file_is_left(graded_class):
    assert graded_class["survivors"] == [], graded_class["survivors"]
    assert graded_class["tmp_left"] == [], graded_class["tmp_left"][:20]


def _check_reports(graded, names: list[str]) -> None:
    """The JSON parses and names every learner; no output carries a raw escape or a formula; HTML and XML escape."""
    out: Path = graded["out"]
    report = json.loads((out / "grades.json").read_text(encoding="utf-8"))
    assert set(names) <= set(report["learners"]) | {Path(s["path"]).parent.name for s in report.get("skipped", [])}
    for text in (graded["stdout"], graded["stderr"]):
        assert "\x1b" not in text and "\x07" not in text, repr(text[:500])
    if (out / "grades.csv").exists():
        with open(out / "grades.csv", newline="", encoding="utf-8") as f:
            for row in csv.reader(f):
                for cell in row:
                    assert not cell[:1] in ("=", "+", "-", "@", "\t", "\r"), row
                    assert "\x1b" not in cell, row
    for page in (out / "feedback").glob("*") if (out / "feedback").exists() else []:
        html = page.read_text(encoding="utf-8", errors="replace")
        assert "<img src=x" not in html and "<script>alert" not in html and "\x1b" not in html, page.name
    if (out / "grades.xml").exists():
        ET.parse(out / "grades.xml")
        assert "\x1b" not in (out / "grades.xml").read_text(encoding="utf-8")


def test_the_report_is_complete_valid_and_escapes_every_name(graded_class):
    report = _report(graded_class)
    assert report["run"]["status"] == "complete"
    for name, rec in report["learners"].items():
        assert rec["status"] != "not graded yet", name
        assert set(rec["exercises"]) == {ex.id for ex in classroom.exercises()} or rec["total"] == 0, name
    _check_reports(graded_class, list(graded_class["learners"]))


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_grader_stopped_mid_run_leaves_a_valid_report_and_nothing_running(course_process, tmp_path, stop):
    run_id = f"gcadv{secrets.token_hex(6)}"
    root = tmp_path / "class"
    learners = classroom.build(root, run_id, only=["honest", "detached_children", "fork_bomb", "invalid_tags_int",
                                                   "memory_hog"])
    out = tmp_path / "out"
    out.mkdir()
    graded = _grade(root, out, run_id, stop_when_graded=True, stop_signal=stop)
    if not graded["signalled"]:
        assert graded["returncode"] == 0, graded["stderr"][-2000:]
        pytest.skip("the class was graded before the signal: nothing to interrupt on this machine")
    assert graded["returncode"] != 0
    report = json.loads((out / "grades.json").read_text(encoding="utf-8"))  # written atomically: always whole
    assert set(report["learners"]) | {Path(s["path"]).parent.name for s in report.get("skipped", [])} >= {
        n for n, l in learners.items() if l.kind != "invalid"}
    assert graded["survivors"] == [], graded["survivors"]
    if stop == signal.SIGTERM:
        assert report["run"]["status"] != "complete"
        assert graded["tmp_left"] == [], graded["tmp_left"][:20]
        _check_reports(graded, [n for n, l in learners.items() if l.kind != "invalid"])


CLEARED = ["forge_replay_count", "forge_sync_count", "observe_from_answer", "reseed_hidden_inputs",
           "patch_observe_mock", "transformer_forges_footer", "rebind_check_global", "len_trap_forges_obs",
           "rawthread_pipe_forge", "thread_rewrites_replays",
           "read_solutions", "proc_classmate", "input_transformer", "ast_transformer", "wrap_run_cell",
           "fake_skiptest", "rebind_assertion", "shadow_builtins", "patch_toygraph", "always_equal", "sys_modules",
           "forge_output", "steal_secret", "settrace_checks", "gc_hunt", "lookup_table", "base_exceptions"]


@pytest.fixture(scope="session")
def graded_cleared(tmp_path_factory):
    """The attacks on the verdict, graded as if an instructor had cleared every review (--allow-reviewed '*'):
    the flags are a second line; the verdict, judged outside the kernel from signed plain data, is the first."""
    run_id = f"gcadv{secrets.token_hex(6)}"
    root = tmp_path_factory.mktemp("cleared-class")
    learners = classroom.build(root, run_id, only=CLEARED)
    out = tmp_path_factory.mktemp("cleared-out")
    result = _grade(root, out, run_id, extra=["--allow-reviewed", "*"])
    result.update(learners=learners)
    report = out / "grades.json"
    result["report_text"] = report.read_text(encoding="utf-8") if report.is_file() else None
    if os.environ.get("GRAPHCOURSE_KEEP_REPORTS") and result["report_text"]:
        Path(os.environ["GRAPHCOURSE_KEEP_REPORTS"]).mkdir(parents=True, exist_ok=True)
        Path(os.environ["GRAPHCOURSE_KEEP_REPORTS"], "cleared.json").write_text(result["report_text"])
    return result


@pytest.mark.parametrize("name", CLEARED)
def test_a_cleared_attack_on_the_verdict_still_earns_nothing(graded_cleared, name):
    learner = graded_cleared["learners"][name]
    rec = _marks(graded_cleared, name)
    for ex_id, mark in rec["exercises"].items():
        if ex_id not in learner.honest:
            assert mark["points"] == 0, (f"{name} ({learner.attack}), cleared, earned {mark['points']} in {ex_id}",
                                         mark)


def test_cleared_attacks_leave_nothing_running(graded_cleared):
    assert graded_cleared["survivors"] == [] and graded_cleared["tmp_left"] == []


SECOND_NOTEBOOK = ["second_notebook_stealthy", "second_notebook_rewrites_first"]


@pytest.mark.parametrize("name", SECOND_NOTEBOOK)
def test_a_hostile_second_notebook_earns_nothing_there_and_costs_the_first_nothing(graded_class, name):
    learner = graded_class["learners"][name]
    rec = _marks(graded_class, name)
    assert {b["status"] for b in rec["notebooks"].values()} == {"graded"}, rec["notebooks"]
    for ex_id, mark in rec["exercises"].items():
        if ex_id in learner.honest:  # its honest answers, in either notebook, keep every point graded here
            assert mark["points"] == _graded_max(mark), (name, ex_id, mark)
        else:
            assert mark["points"] == 0, (name, ex_id, mark)


def test_a_learner_who_hands_in_one_notebook_is_not_missing_from_the_others(graded_class):
    report = _report(graded_class)
    first, *others = [b.name for b in classroom.BOOKS]
    rec = report["learners"]["read_solutions"]  # hands in the first notebook only
    assert rec["status"] == "graded" and rec["notebooks"][first]["status"] == "graded"
    for book in others:
        assert rec["notebooks"][book]["status"] == "not-handed-in" and rec["notebooks"][book]["points"] == 0
        for ex_id in rec["notebooks"][book]["exercises"]:
            assert rec["exercises"][ex_id]["status"] == "not-handed-in"
    for learner in _learners(graded_class, "honest"):  # honest classmates hand in every notebook
        assert {b["status"] for b in report["learners"][learner.name]["notebooks"].values()} == {"graded"}
