"""Grade learners' exercise notebooks against the pristine checks in solutions/.

    python -m graphcourse.grade PATH... --report grades.json [--csv grades.csv]
                                [--timeout-per-cell 30] [--jobs N] [--solutions DIR]

PATH is one learner's notebook, a folder of one learner's notebooks, or a class folder
with one subfolder per learner (a flat folder holding several copies of the same exercise
notebook is read as one learner per notebook, named after the file).

For every learner notebook the grader finds the answer cells by the metadata the builder
wrote (``metadata.graphcourse``, then the ``exNN_name:answer`` tag, then the cell id), puts
each into a fresh copy of the solutions notebook in place of the model answer, and runs
that copy in its own kernel with nbclient: the set-up cells, then each exercise's answer
and the course's own check cells. So a check the learner deleted or rewrote changes
nothing. Exercises are graded one by one in that kernel; a cell that runs past the
timeout or a kernel that dies costs that exercise only: the kernel is restarted, the
set-up cells rerun, and grading goes on. Learners are graded in parallel, one process
and kernel each; the learner's files are copied to a temporary folder and never written.

Statuses: passed (every check ran), failed (a check's assert failed), error (the answer
or a check raised something else, the kernel died, or the notebook could not be read),
timeout, missing (no answer cell, or no notebook, for that exercise). An exercise earns
all its points or none. Exit status 0 whenever grading ran, whatever the marks; 1 or 2,
with a one-line reason, when the grader itself could not run.

Limit: an answer is code that runs in the grader's kernel. The grader stops learners from
editing the checks, not from attacking the kernel (e.g. patching IPython to hide errors);
grade untrusted submissions inside a container.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import nbformat

from .build_exercises import KERNEL_NAME, ROOT, SOLUTIONS_DIR, Layout, layout_of, solution_paths, strip_outputs
from .errors import GraphCourseError

STATUSES = ("passed", "failed", "error", "timeout", "missing")


@dataclass(frozen=True)
class Solution:
    """One pristine solutions notebook and its graded layout."""

    name: str
    nb: nbformat.NotebookNode
    layout: Layout

    @property
    def exercises(self) -> dict[str, int]:
        return {ex.id: ex.points for ex in self.layout.exercises}


def load_solutions(solutions_dir: Path) -> list[Solution]:
    """Read every solutions notebook; a clear GraphCourseError when there is none or one is malformed."""
    paths = solution_paths(solutions_dir)
    if not paths:
        raise GraphCourseError(f"no solutions notebooks (*.ipynb) in {solutions_dir}: nothing to grade against.")
    out = []
    for p in paths:
        nb = nbformat.read(p, as_version=4)
        out.append(Solution(p.name, strip_outputs(nb), layout_of(nb, p.name)))
    return out


def _result(points: int, max_points: int, status: str, message: str) -> dict:
    message = re.sub(r"\s+", " ", message).strip()
    return {"points": points, "max": max_points, "status": status,
            "message": message if len(message) <= 240 else message[:237] + "..."}


def _strip_ansi(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


# --- finding the learner's answers ----------------------------------------------------------

def answer_cells(nb: nbformat.NotebookNode, exercise_id: str) -> list[nbformat.NotebookNode]:
    """The learner's answer cells for one exercise: by builder metadata, else by tag, else by cell id."""
    def meta(c):
        g = c.get("metadata", {}).get("graphcourse", {})
        return isinstance(g, dict) and g.get("exercise") == exercise_id and g.get("role") == "answer"
    for match in (meta,
                  lambda c: f"{exercise_id}:answer" in (c.get("metadata", {}).get("tags") or []),
                  lambda c: c.get("id") == f"{exercise_id}-answer"):
        found = [c for c in nb.cells if match(c)]
        if found:
            return found
    return []


def solution_for(nb: nbformat.NotebookNode, path: Path, solutions: list[Solution], lone: bool) -> Solution | None:
    """Which solutions notebook a learner notebook copies: by builder metadata, by file name, or the only one."""
    by_name = {s.name: s for s in solutions}
    source = nb.get("metadata", {}).get("graphcourse", {}).get("source") if isinstance(nb.get("metadata"), dict) else None
    if source in by_name:
        return by_name[source]
    if path.name in by_name:
        return by_name[path.name]
    ids = {c.get("metadata", {}).get("graphcourse", {}).get("exercise") for c in nb.cells if isinstance(c.get("metadata"), dict)}
    for s in solutions:
        if ids & set(s.exercises):
            return s
    return solutions[0] if lone and len(solutions) == 1 else None


# --- running one notebook --------------------------------------------------------------------

class _Kernel:
    """One kernel running cells of one notebook through nbclient; restartable after a timeout or a death."""

    def __init__(self, nb: nbformat.NotebookNode, cwd: str, timeout_s: float) -> None:
        self.nb, self.cwd, self.timeout_s = nb, cwd, timeout_s
        self.stack: contextlib.ExitStack | None = None
        self.client = None

    def start(self) -> None:
        from nbclient import NotebookClient

        self.stop()
        self.client = NotebookClient(self.nb, timeout=self.timeout_s, kernel_name=KERNEL_NAME, record_timing=False,
                                     shutdown_kernel="immediate", startup_timeout=60, allow_errors=False,
                                     resources={"metadata": {"path": self.cwd}})
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
        self.stack = contextlib.ExitStack()
        self.stack.enter_context(self.client.setup_kernel(env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

    def stop(self) -> None:
        if self.stack is not None:
            with contextlib.suppress(Exception):
                self.stack.close()
        self.stack = self.client = None

    def run(self, index: int) -> tuple[str, str, str]:
        """Run cell index: ("ok", "", ""), ("raised", ename, evalue), ("timeout", ...) or ("dead", ...)."""
        from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

        try:
            self.client.execute_cell(self.nb.cells[index], index)
            return "ok", "", ""
        except CellExecutionError as exc:
            return "raised", exc.ename, _strip_ansi(exc.evalue)
        except CellTimeoutError:
            return "timeout", "", ""
        except DeadKernelError:
            return "dead", "", ""
        except Exception as exc:  # the kernel channel broke some other way: treat as a dead kernel
            return "dead", type(exc).__name__, str(exc)


def _outcome(kind: str, ename: str, evalue: str, role: str, k: int, points: int, timeout_s: float) -> dict | None:
    if kind == "ok":
        return None
    if kind == "timeout":
        where = "your answer cell" if role == "answer" else f"check {k}"
        return _result(0, points, "timeout", f"{where} ran longer than {timeout_s:g} s (an infinite loop?); the kernel was restarted")
    if kind == "dead":
        return _result(0, points, "error", "the kernel died while running this exercise (os._exit, a crash, or out of "
                                          "memory); it was restarted for the next exercise")
    if role == "answer":
        return _result(0, points, "error", f"your answer cell raised {ename}: {evalue}")
    if role == "context":
        return _result(0, points, "error", f"the exercise's set-up cell raised {ename}: {evalue}")
    if ename == "AssertionError":
        return _result(0, points, "failed", evalue or f"check {k} failed")
    if ename == "NotImplementedError":
        return _result(0, points, "error", f"not answered yet (NotImplementedError: {evalue})")
    return _result(0, points, "error", f"check {k} raised {ename}: {evalue}")


def grade_notebook(path: Path | None, solution: Solution, timeout_s: float, workdir: str, lone: bool = True) -> dict[str, dict]:
    """Grade one learner notebook (None: not handed in) against one solutions notebook; one result per exercise."""
    exercises = solution.layout.exercises
    if path is None:
        return {ex.id: _result(0, ex.points, "missing", f"no notebook for {solution.name} was handed in") for ex in exercises}
    try:
        learner = nbformat.read(path, as_version=4)
        if not isinstance(learner.get("cells"), list):
            raise ValueError("it has no list of cells")
    except Exception as exc:
        reason = f"could not read {path.name} as a notebook ({type(exc).__name__}: {exc})"
        return {ex.id: _result(0, ex.points, "error", reason) for ex in exercises}

    nb = copy.deepcopy(solution.nb)
    results: dict[str, dict] = {}
    todo = []
    for ex in exercises:
        found = answer_cells(learner, ex.id)
        if not found:
            results[ex.id] = _result(0, ex.points, "missing", f"no answer cell for {ex.id} (tag {ex.id}:answer) in {path.name}")
            continue
        source = found[-1].get("source", "")
        nb.cells[ex.answer].source = "".join(source) if isinstance(source, list) else str(source)
        todo.append(ex)

    kernel = _Kernel(nb, workdir, timeout_s)
    started = False
    try:
        for ex in todo:
            if not started:
                try:
                    kernel.start()
                except Exception as exc:
                    results[ex.id] = _result(0, ex.points, "error", f"the kernel did not start ({type(exc).__name__}: {exc})")
                    continue
                started, failed = True, None
                for k, i in enumerate(solution.layout.setup, 1):
                    kind, ename, evalue = kernel.run(i)
                    if kind != "ok":
                        failed = f"the notebook's set-up cell {k} failed ({kind} {ename}: {evalue})"
                        break
                if failed:
                    results[ex.id] = _result(0, ex.points, "error", failed)
                    kernel.stop()
                    started = False
                    continue
            result = None
            steps = [("context", k, i) for k, i in enumerate(ex.context, 1)] + [("answer", 1, ex.answer)]
            steps += [("check", k, i) for k, i in enumerate(ex.checks, 1)]
            for role, k, i in steps:
                kind, ename, evalue = kernel.run(i)
                result = _outcome(kind, ename, evalue, role, k, ex.points, timeout_s)
                if result is not None:
                    if kind in ("timeout", "dead"):
                        kernel.stop()
                        started = False
                    break
            n = len(ex.checks)
            results[ex.id] = result or _result(ex.points, ex.points, "passed", f"all {n} check{'s' * (n != 1)} passed")
    finally:
        kernel.stop()
    return {ex.id: results[ex.id] for ex in exercises}


# --- learners --------------------------------------------------------------------------------

def _notebooks(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.ipynb") if p.is_file() and not p.name.startswith("."))


def _subfolders(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".") and _notebooks(p))


def _source_key(path: Path, solutions: list[Solution]) -> str:
    try:
        nb = nbformat.read(path, as_version=4)
        s = solution_for(nb, path, solutions, lone=False)
        return s.name if s else f"?{path.name}"
    except Exception:
        return path.name


def discover(paths: list[Path], solutions: list[Solution]) -> list[tuple[str, list[Path]]]:
    """(learner name, notebooks) for every learner under the given paths."""
    names = {s.name for s in solutions}
    found: list[tuple[str, list[Path]]] = []
    for path in paths:
        if path.is_file():
            found.append((path.parent.name if path.name in names and path.parent.name else path.stem, [path]))
            continue
        subs = _subfolders(path)
        loose = _notebooks(path)
        if subs:  # a class folder
            found += [(d.name, _notebooks(d)) for d in subs]
            found += [(p.stem, [p]) for p in loose]
        elif loose:
            keys = [_source_key(p, solutions) for p in loose]
            if len(set(keys)) == len(keys):
                found.append((path.resolve().name, loose))
            else:  # several copies of one exercise notebook: one learner each
                found += [(p.stem, [p]) for p in loose]
    seen: dict[str, int] = {}
    unique = []
    for name, files in found:
        seen[name] = seen.get(name, 0) + 1
        unique.append((name if seen[name] == 1 else f"{name} ({seen[name]})", files))
    return unique


def grade_learner(files: list[Path], solutions_dir: str, timeout_s: float) -> dict[str, dict]:
    """Grade one learner's notebooks (copied to a temporary folder first) against every solutions notebook."""
    solutions = load_solutions(Path(solutions_dir))
    out: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="graphcourse-grade-") as tmp:
        copies = []
        for n, f in enumerate(files):
            dest = Path(tmp) / f"{n}" / f.name
            dest.parent.mkdir()
            shutil.copyfile(f, dest)
            copies.append(dest)
        assigned: dict[str, Path] = {}
        for c in copies:
            try:
                nb = nbformat.read(c, as_version=4)
                s = solution_for(nb, c, solutions, lone=len(copies) == 1)
            except Exception:  # unreadable: grade it against its namesake (or the only solution) to report why
                s = next((s for s in solutions if s.name == c.name), solutions[0] if len(copies) == 1 else None)
            if s is not None and (s.name not in assigned or c.name == s.name):
                assigned[s.name] = c
        for s in solutions:
            work = Path(tmp) / f"run-{s.name}"
            work.mkdir()
            out.update(grade_notebook(assigned.get(s.name), s, timeout_s, str(work)))
    return out


def grade(paths: list[Path], solutions_dir: Path = SOLUTIONS_DIR, timeout_s: float = 30, jobs: int | None = None,
          progress: bool = True) -> dict[str, dict[str, dict]]:
    """{learner: {exercise_id: {points, max, status, message}}} for every learner under paths."""
    from tqdm import tqdm

    solutions = load_solutions(solutions_dir)
    learners = discover(paths, solutions)
    if not learners:
        raise GraphCourseError(f"no learner notebooks (*.ipynb) under {', '.join(map(str, paths))}.")
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(learners)))
    report: dict[str, dict] = {}
    bar = tqdm(total=len(learners), unit="learner", desc="grading", disable=not progress or None, file=sys.stderr)
    if jobs == 1:
        for name, files in learners:
            report[name] = grade_learner(files, str(solutions_dir), timeout_s)
            bar.update()
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = {pool.submit(grade_learner, files, str(solutions_dir), timeout_s): name for name, files in learners}
            for fut in as_completed(futures):
                name = futures[fut]
                try:
                    report[name] = fut.result()
                except Exception as exc:  # a worker crashed: that learner gets errors, the class goes on
                    report[name] = {ex: _result(0, p, "error", f"the grader failed on this learner ({type(exc).__name__}: {exc})")
                                    for s in solutions for ex, p in s.exercises.items()}
                bar.update()
    bar.close()
    return {name: report[name] for name, _ in learners}


# --- reports ---------------------------------------------------------------------------------

def exercise_ids(report: dict[str, dict[str, dict]]) -> list[str]:
    """Every exercise id in the report, sorted."""
    return sorted({ex for marks in report.values() for ex in marks})


def write_csv(report: dict[str, dict[str, dict]], path: Path) -> None:
    """One row per learner: total, max, then points and status per exercise."""
    ids = exercise_ids(report)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["learner", "total", "max"] + [c for ex in ids for c in (ex, f"{ex} status")])
        for name, marks in report.items():
            w.writerow([name, sum(m["points"] for m in marks.values()), sum(m["max"] for m in marks.values())]
                       + [c for ex in ids for c in (marks[ex]["points"], marks[ex]["status"])])


def table(report: dict[str, dict[str, dict]]) -> str:
    """A readable table: one row per learner, `points/max status` per exercise, then the total."""
    ids = exercise_ids(report)
    rows = [["learner"] + ids + ["total"]]
    for name, marks in report.items():
        total, top = sum(m["points"] for m in marks.values()), sum(m["max"] for m in marks.values())
        rows.append([name] + [f"{marks[ex]['points']}/{marks[ex]['max']} {marks[ex]['status']}" for ex in ids] + [f"{total}/{top}"])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m graphcourse.grade", description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="a learner notebook, a learner's folder, or a class folder")
    parser.add_argument("--report", type=Path, required=True, help="where to write the JSON report")
    parser.add_argument("--csv", type=Path, help="also write a CSV for a gradebook")
    parser.add_argument("--timeout-per-cell", type=float, default=30, metavar="S", help="seconds a cell may run (default 30)")
    parser.add_argument("--jobs", type=int, default=None, metavar="N", help="learners graded at once (default: the number of cores)")
    parser.add_argument("--solutions", type=Path, default=SOLUTIONS_DIR, help="the pristine notebooks (default: solutions/)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar and no table")
    args = parser.parse_args(argv)
    for p in args.paths:
        if not p.exists():
            parser.error(f"{p} does not exist: give a learner notebook, a learner's folder or a class folder")
    if args.timeout_per_cell <= 0 or (args.jobs is not None and args.jobs < 1):
        parser.error("--timeout-per-cell must be > 0 and --jobs at least 1")
    start = time.perf_counter()
    try:
        report = grade(args.paths, args.solutions, args.timeout_per_cell, args.jobs, progress=not args.quiet)
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text(json.dumps(report, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        if args.csv:
            args.csv.parent.mkdir(parents=True, exist_ok=True)
            write_csv(report, args.csv)
    except (GraphCourseError, OSError) as exc:
        print(f"grade: {exc}", file=sys.stderr)
        return 1
    if not args.quiet:
        print(table(report))
        print(f"\n{len(report)} learner(s) graded in {time.perf_counter() - start:.1f} s; report in {args.report}"
              + (f", CSV in {args.csv}" if args.csv else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
