"""Grade learners' exercise notebooks against the pristine checks in solutions/.

    python -m graphcourse.grade PATH... --report grades.json [--csv grades.csv]
                                [--timeout-per-cell 30] [--jobs N] [--solutions DIR]

PATH is one learner's notebook, a folder of one learner's notebooks, or a class folder
with one subfolder per learner (a flat folder holding several copies of the same exercise
notebook is read as one learner per notebook, named after the file, unless every copy is
named after the solutions notebook, like ``06_exercises.ipynb`` and ``06_exercises (1).ipynb``:
that is one learner's folder). When one learner has several notebooks that copy the same
solutions notebook, the most recently modified one is graded, and every exercise's message
and the printed output carry a warning naming the files.

For every learner notebook the grader finds the answer cells by the metadata the builder
wrote (``metadata.graphcourse``, then the ``exNN_name:answer`` tag, then the cell id; when
the learner deleted that cell, the last ungraded code cell that defines the same top-level
names as the model answer, noted in the message), puts each into a fresh copy of the solutions notebook in place of the model answer, and runs
that copy in its own kernel with nbclient: the set-up cells, then each exercise's answer
and the course's own check cells. So a check the learner deleted or rewrote changes
nothing. Exercises are graded one by one in that kernel; a cell that runs past the
timeout or a kernel that dies costs that exercise only: the kernel is restarted, the
set-up cells rerun, and grading goes on. Learners are graded in parallel, one process
and kernel each; the learner's files are copied to a temporary folder and never written.

The JSON report is {learner: {exercise_id: {"points", "max", "status", "message"}}}.
Statuses: passed (every check that ran passed), failed (a check's assert failed), error
(the answer or a check raised something else, the kernel died, or the notebook could not
be read; a message starting "not answered yet" when it was a stub's NotImplementedError),
timeout, missing (no answer cell, or no notebook, for that exercise). An exercise earns
all its points or none. "message" says why, then any notes, separated by "; ":

* "N check(s) skipped: needs a CUDA GPU" when a check could not run on the grading
  machine (it raised ``unittest.SkipTest``, see :func:`needs_cuda`); the status comes from
  the checks that ran, the table marks the cell with ``*`` and a warning line is printed;
* "answer cell ... not found: graded cell N, which defines ..." for the fallback above;
* "warning: 2 notebooks copy ...: graded ..., not ..." for several candidate notebooks.

Exit status 0 whenever grading ran, whatever the marks; 1 or 2, with a one-line reason,
when the grader itself could not run.

Limit: an answer is code that runs in the grader's kernel. The grader stops learners from
editing the checks, not from attacking the kernel (e.g. patching IPython to hide errors);
grade untrusted submissions inside a container.
"""

from __future__ import annotations

import argparse
import ast
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
import unittest
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import nbformat

from .build_exercises import KERNEL_NAME, ROOT, SOLUTIONS_DIR, Layout, layout_of, solution_paths, strip_outputs
from .errors import GraphCourseError

STATUSES = ("passed", "failed", "error", "timeout", "missing")
NEEDS_CUDA = "needs a CUDA GPU"
_SKIPPED = re.compile(r"\b(\d+) check\(s\) skipped: ([^;]+)")


def needs_cuda() -> None:
    """Skip the rest of this check cell when no CUDA GPU is here: raise ``unittest.SkipTest("needs a CUDA GPU")``.

    The grader records the check as skipped (the exercise's message and table say so) instead
    of passing it silently. In a notebook the cell shows one line, not a traceback; tag the
    cell ``raises-exception`` so that nbval, nbclient and "run all" go on past it.
    """
    try:
        import torch

        if torch.cuda.is_available():
            return
    except ImportError:
        pass
    with contextlib.suppress(Exception):
        shell = get_ipython()  # type: ignore[name-defined]  # noqa: F821 (defined inside IPython only)
        if not shell.custom_exceptions or shell.custom_exceptions == (unittest.SkipTest,):
            shell.set_custom_exc((unittest.SkipTest,), _show_skip)
    raise unittest.SkipTest(NEEDS_CUDA)


def _show_skip(shell, etype, value, tb, tb_offset=None) -> None:
    print(f"check skipped: {value} here. The grader marks it skipped; it runs where CUDA exists.")


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


def _result(points: int, max_points: int, status: str, message: str, notes: tuple[str, ...] | list[str] = ()) -> dict:
    """One exercise's mark; the message (cut to 240 characters) is followed by the notes, in full."""
    message = re.sub(r"\s+", " ", message).strip()
    message = message if len(message) <= 240 else message[:237] + "..."
    return {"points": points, "max": max_points, "status": status, "message": "; ".join([message, *notes])}


def skipped_checks(mark: dict) -> int:
    """How many of an exercise's checks were skipped on the grading machine (from its message)."""
    return sum(int(n) for n, _ in _SKIPPED.findall(mark.get("message", "")))


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


def defined_names(source: str) -> set[str]:
    """The top-level names a cell defines (def, class, assignment targets); empty when it is not Python."""
    source = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    return names


def fallback_answer(nb: nbformat.NotebookNode, wanted: set[str], given: set[str]) -> int | None:
    """The last ungraded code cell that defines every name in wanted (the learner deleted the answer cell), or None.

    Cells the builder marked (check, set-up, another exercise's answer) and cells whose source
    is one of the course's given cells are never taken."""
    def graded(c) -> bool:
        g = c.get("metadata", {}).get("graphcourse")
        tags = c.get("metadata", {}).get("tags") or []
        return bool(g) or any(t == "setup" or re.fullmatch(r"ex\d{2}_[a-z0-9_]+:\w+", str(t)) for t in tags)
    if not wanted:
        return None
    found = [i for i, c in enumerate(nb.cells)
             if c.get("cell_type") == "code" and not graded(c) and _text(c.get("source", "")).strip() not in given
             and wanted <= defined_names(_text(c.get("source", "")))]
    return found[-1] if found else None


def _text(source) -> str:
    return "".join(source) if isinstance(source, list) else str(source)


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


def _failure(kind: str, ename: str, evalue: str, role: str, k: int, timeout_s: float) -> tuple[str, str]:
    """(status, message) for a cell that did not run cleanly."""
    if kind == "timeout":
        where = "your answer cell" if role == "answer" else f"check {k}"
        return "timeout", f"{where} ran longer than {timeout_s:g} s (an infinite loop?); the kernel was restarted"
    if kind == "dead":
        return "error", ("the kernel died while running this exercise (os._exit, a crash, or out of memory); "
                         "it was restarted for the next exercise")
    if ename == "NotImplementedError" and role in ("answer", "check"):  # a stub, wherever it was called from
        return "error", f"not answered yet (NotImplementedError: {evalue})"
    if role == "answer":
        return "error", f"your answer cell raised {ename}: {evalue}"
    if role == "context":
        return "error", f"the exercise's set-up cell raised {ename}: {evalue}"
    if ename == "AssertionError":
        return "failed", evalue or f"check {k} failed"
    return "error", f"check {k} raised {ename}: {evalue}"


def grade_notebook(path: Path | None, solution: Solution, timeout_s: float, workdir: str, lone: bool = True,
                   notes: tuple[str, ...] = ()) -> dict[str, dict]:
    """Grade one learner notebook (None: not handed in) against one solutions notebook; one result per exercise.

    notes (e.g. a warning about which of several notebooks was graded) end every exercise's message."""
    exercises = solution.layout.exercises
    if path is None:
        return {ex.id: _result(0, ex.points, "missing", f"no notebook for {solution.name} was handed in", notes)
                for ex in exercises}
    try:
        learner = nbformat.read(path, as_version=4)
        if not isinstance(learner.get("cells"), list):
            raise ValueError("it has no list of cells")
    except Exception as exc:
        reason = f"could not read {path.name} as a notebook ({type(exc).__name__}: {exc})"
        return {ex.id: _result(0, ex.points, "error", reason, notes) for ex in exercises}

    nb = copy.deepcopy(solution.nb)
    for cell in nb.cells:  # every error of a graded cell must reach the grader, SkipTest included
        tags = cell.get("metadata", {}).get("tags")
        if tags and "raises-exception" in tags:
            cell.metadata["tags"] = [t for t in tags if t != "raises-exception"]
    given = {_text(c.source).strip() for i, c in enumerate(solution.nb.cells) if i not in {ex.answer for ex in exercises}}
    results: dict[str, dict] = {}
    ex_notes: dict[str, list[str]] = {}
    todo = []
    for ex in exercises:
        ex_notes[ex.id] = list(notes)
        found = answer_cells(learner, ex.id)
        if found:
            source = found[-1].get("source", "")
        else:
            wanted = defined_names(_text(solution.nb.cells[ex.answer].source))
            i = fallback_answer(learner, wanted, given)
            if i is None:
                results[ex.id] = _result(0, ex.points, "missing", f"no answer cell for {ex.id} (tag {ex.id}:answer) in "
                                         f"{path.name}, and no other code cell defines {', '.join(sorted(wanted))}", notes)
                continue
            source = learner.cells[i].get("source", "")
            ex_notes[ex.id].insert(0, f"answer cell {ex.id}-answer not found: graded cell {i + 1}, which defines "
                                      f"{', '.join(sorted(wanted))} (keep your answers in the answer cells)")
        nb.cells[ex.answer].source = _text(source)
        todo.append(ex)

    kernel = _Kernel(nb, workdir, timeout_s)
    started = False
    try:
        for ex in todo:
            if not started:
                try:
                    kernel.start()
                except Exception as exc:
                    results[ex.id] = _result(0, ex.points, "error", f"the kernel did not start ({type(exc).__name__}: {exc})",
                                             ex_notes[ex.id])
                    continue
                started, failed = True, None
                for k, i in enumerate(solution.layout.setup, 1):
                    kind, ename, evalue = kernel.run(i)
                    if kind != "ok":
                        failed = f"the notebook's set-up cell {k} failed ({kind} {ename}: {evalue})"
                        break
                if failed:
                    results[ex.id] = _result(0, ex.points, "error", failed, ex_notes[ex.id])
                    kernel.stop()
                    started = False
                    continue
            failure, skips = None, []
            steps = [("context", k, i) for k, i in enumerate(ex.context, 1)] + [("answer", 1, ex.answer)]
            steps += [("check", k, i) for k, i in enumerate(ex.checks, 1)]
            for role, k, i in steps:
                kind, ename, evalue = kernel.run(i)
                if kind == "raised" and role == "check" and ename == "SkipTest":
                    skips.append(evalue.strip() or "cannot run here")  # the checks that ran decide the status
                    continue
                if kind != "ok":
                    failure = _failure(kind, ename, evalue, role, k, timeout_s)
                    if kind in ("timeout", "dead"):
                        kernel.stop()
                        started = False
                    break
            skip_notes = [f"{len(skips)} check(s) skipped: {', '.join(dict.fromkeys(skips))}"] if skips else []
            ran = len(ex.checks) - len(skips)
            if failure:
                results[ex.id] = _result(0, ex.points, *failure, skip_notes + ex_notes[ex.id])
            else:
                what = f"all {ran} check{'s' * (ran != 1)}" + (" that ran" if skips else "")
                results[ex.id] = _result(ex.points, ex.points, "passed", f"{what} passed", skip_notes + ex_notes[ex.id])
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


def _copy_name(name: str, solution_name: str) -> bool:
    """Whether a file name is the solutions notebook's own name or a copy of it ('06_exercises (1).ipynb', '-Copy1')."""
    stem = Path(solution_name).stem
    return re.fullmatch(rf"{re.escape(stem)}(\s*\(\d+\)|-Copy\d*|[ _-]copy\d*)?\.ipynb", name, re.IGNORECASE) is not None


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
            if len(set(keys)) == len(keys) or all(_copy_name(p.name, k) for p, k in zip(loose, keys)):
                found.append((path.resolve().name, loose))  # one learner (several copies of one notebook: see grade_learner)
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
    return _grade_learner(files, solutions_dir, timeout_s)[0]


def _grade_learner(files: list[Path], solutions_dir: str, timeout_s: float) -> tuple[dict[str, dict], list[str]]:
    """grade_learner's marks, and the warnings to print (several notebooks copying one solutions notebook)."""
    solutions = load_solutions(Path(solutions_dir))
    out: dict[str, dict] = {}
    warnings: list[str] = []
    with tempfile.TemporaryDirectory(prefix="graphcourse-grade-") as tmp:
        candidates: dict[str, list[tuple[Path, Path]]] = {}
        for n, f in enumerate(files):
            dest = Path(tmp) / f"{n}" / f.name
            dest.parent.mkdir()
            shutil.copyfile(f, dest)
            try:
                nb = nbformat.read(dest, as_version=4)
                s = solution_for(nb, dest, solutions, lone=len(files) == 1)
            except Exception:  # unreadable: grade it against its namesake (or the only solution) to report why
                s = next((s for s in solutions if s.name == f.name), solutions[0] if len(files) == 1 else None)
            if s is not None:
                candidates.setdefault(s.name, []).append((f, dest))
        for s in solutions:
            found = candidates.get(s.name, [])
            notes: tuple[str, ...] = ()
            chosen = max(found, key=lambda fd: (fd[0].stat().st_mtime, fd[0].name == s.name)) if found else None
            if len(found) > 1:
                others = ", ".join(repr(f.name) for f, _ in found if f != chosen[0])
                said = (f"{len(found)} notebooks copy {s.name}: graded {chosen[0].name!r} (the most recently modified), "
                        f"not {others}")
                notes = (f"warning: {said}",)
                warnings.append(said)
            work = Path(tmp) / f"run-{s.name}"
            work.mkdir()
            out.update(grade_notebook(chosen[1] if chosen else None, s, timeout_s, str(work), notes=notes))
    return out, warnings


def grade(paths: list[Path], solutions_dir: Path = SOLUTIONS_DIR, timeout_s: float = 30, jobs: int | None = None,
          progress: bool = True, warnings: list[str] | None = None) -> dict[str, dict[str, dict]]:
    """{learner: {exercise_id: {points, max, status, message}}} for every learner under paths.

    Warnings to show the instructor ("learner: ...") are appended to `warnings` when given."""
    from tqdm import tqdm

    solutions = load_solutions(solutions_dir)
    learners = discover(paths, solutions)
    if not learners:
        raise GraphCourseError(f"no learner notebooks (*.ipynb) under {', '.join(map(str, paths))}.")
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(learners)))
    report: dict[str, dict] = {}
    notes: dict[str, list[str]] = {}
    bar = tqdm(total=len(learners), unit="learner", desc="grading", disable=not progress or None, file=sys.stderr)
    if jobs == 1:
        for name, files in learners:
            report[name], said = _grade_learner(files, str(solutions_dir), timeout_s)
            notes[name] = said
            bar.update()
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = {pool.submit(_grade_learner, files, str(solutions_dir), timeout_s): name for name, files in learners}
            for fut in as_completed(futures):
                name = futures[fut]
                try:
                    report[name], notes[name] = fut.result()
                except Exception as exc:  # a worker crashed: that learner gets errors, the class goes on
                    report[name] = {ex: _result(0, p, "error", f"the grader failed on this learner ({type(exc).__name__}: {exc})")
                                    for s in solutions for ex, p in s.exercises.items()}
                bar.update()
    bar.close()
    if warnings is not None:
        warnings += [f"{name}: {w}" for name, _ in learners for w in notes.get(name, [])]
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
    """A readable table: one row per learner, `points/max status` per exercise (`*`: checks skipped), then the total."""
    ids = exercise_ids(report)
    rows = [["learner"] + ids + ["total"]]
    starred = False
    for name, marks in report.items():
        total, top = sum(m["points"] for m in marks.values()), sum(m["max"] for m in marks.values())
        cells = []
        for ex in ids:
            m = marks[ex]
            star = "*" if skipped_checks(m) else ""
            starred = starred or bool(star)
            cells.append(f"{m['points']}/{m['max']} {m['status']}{star}")
        rows.append([name] + cells + [f"{total}/{top}"])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    if starred:
        lines.append("* some checks were skipped on this machine (see the message in the JSON report); the status "
                     "comes from the checks that ran")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m graphcourse.grade", description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="a learner notebook, a learner's folder, or a class folder")
    parser.add_argument("--report", type=Path, required=True, help="where to write the JSON report")
    parser.add_argument("--csv", type=Path, help="also write a CSV for a gradebook")
    parser.add_argument("--timeout-per-cell", type=float, default=30, metavar="S", help="seconds a cell may run (default 30)")
    parser.add_argument("--jobs", type=int, default=None, metavar="N", help="learners graded at once (default: the number of cores)")
    parser.add_argument("--solutions", type=Path, default=SOLUTIONS_DIR, help="the pristine notebooks (default: solutions/)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar (the table and warnings still print)")
    args = parser.parse_args(argv)
    for p in args.paths:
        if not p.exists():
            parser.error(f"{p} does not exist: give a learner notebook, a learner's folder or a class folder")
    if args.timeout_per_cell <= 0 or (args.jobs is not None and args.jobs < 1):
        parser.error("--timeout-per-cell must be > 0 and --jobs at least 1")
    start = time.perf_counter()
    try:
        warnings: list[str] = []
        report = grade(args.paths, args.solutions, args.timeout_per_cell, args.jobs, progress=not args.quiet,
                       warnings=warnings)
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text(json.dumps(report, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        if args.csv:
            args.csv.parent.mkdir(parents=True, exist_ok=True)
            write_csv(report, args.csv)
    except (GraphCourseError, OSError) as exc:
        print(f"grade: {exc}", file=sys.stderr)
        return 1
    print(table(report))
    print(f"\n{len(report)} learner(s) graded in {time.perf_counter() - start:.1f} s; report in {args.report}"
          + (f", CSV in {args.csv}" if args.csv else ""))
    for w in warnings:
        print(f"warning: {w}")
    skips = [hit for marks in report.values() for m in marks.values() for hit in _SKIPPED.findall(m["message"])]
    if skips:
        reasons = ", ".join(dict.fromkeys(r.strip() for _, r in skips))
        print(f"warning: {sum(int(n) for n, _ in skips)} check(s) could not run on this machine ({reasons}) and were "
              "skipped: marks with * come from the other checks alone; grade where they can run to include them")
    return 0


if __name__ == "__main__":
    sys.exit(main())
