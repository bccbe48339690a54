"""Grading a class: the model answers once, then every learner, each exercise in a fresh confined kernel.

Order of a run: read solutions/ (trusted), find the learners, run the model answers in the same sandbox (this
calibrates the time limits and gives the observations to compare with), then grade learners ``jobs`` at a time;
each learner's result goes to the reports as soon as it is known. Exercises that timed out are retried once at
the end, one at a time (the machine is quieter then), and the retry's result stands.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..core.exercise_format import NEEDS, solution_paths
from ..core.paths import ROOT
from ..errors import GraphCourseError
from . import model_cache, reports
from .assignment import Assignment, Exercise, load_assignments
from .notebooks import (InvalidNotebook, Learner, LearnerNotebook, _copy_name, cell_names, discover, find_answer,
                        read_learner)
from .runner import ExerciseRun, Limits, Session, run_exercise
from .sandbox import Confinement, Limits as SandboxLimits, Sandbox, UidPool, detect, unmount_under
from .scan import scan
from .verdict import exercise_mark

FORMAT = "graphcourse-grades/2"
STOPPED = "stopped before the end: learners marked 'not graded yet' were not graded"


def assignment_seed(solutions_dir: Path) -> int:
    """The hidden inputs' seed of an assignment: drawn from the solutions notebooks' code, so it is fixed.

    The same notebook earns the same marks in every run (gradebook, feedback pages, a regrade, another
    machine) only if its hidden inputs are the same. A seed kept from the solutions needs no state
    that could be lost and cannot be known by a learner, who never reads solutions/. Only the code
    cells count (names and sources): a change to an answer or a check draws new inputs, a corrected
    sentence in the prose does not; ``--seed N`` (a new term, say) chooses others on purpose.
    The report records the seed each run used.
    """
    return int(solutions_code_sha256(solutions_dir)[:8], 16) % (2**31 - 1) + 1


def solutions_code_sha256(solutions_dir: Path) -> str:
    """One digest of the solutions notebooks' code cells (notebook names and cell sources, in order)."""
    import nbformat

    digest = hashlib.sha256()
    for path in solution_paths(solutions_dir):
        digest.update(path.name.encode() + b"\0")
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code":
                digest.update(cell.source.encode() + b"\0")
        digest.update(b"\1")
    return digest.hexdigest()


def solutions_sha256(solutions_dir: Path) -> str:
    """One digest of the solutions notebooks (names and bytes): the assignment's identity in a report."""
    digest = hashlib.sha256()
    for path in solution_paths(solutions_dir):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def start_watchdog(scratch: Path, pool: "UidPool | None", course_root: Path) -> subprocess.Popen:
    """The run's watchdog (graphcourse.grading.watchdog), holding the run's uid locks until it exits.

    The watchdog kills whatever still runs with the run's uids after the grader ends. It inherits the locks' file
    descriptors, so a uid stays taken until that sweep is over: released with the grader alone, a uid could go to
    another grader starting on the same machine, whose kernel the sweep would then kill ("Kernel died before
    replying to kernel_info", seen with two graders side by side)."""
    return subprocess.Popen([sys.executable, "-m", "graphcourse.grading.watchdog", str(scratch),
                             *map(str, pool.uids if pool else [])],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            pass_fds=tuple(pool.fds) if pool else (),
                            cwd=str(course_root), env=dict(os.environ, PYTHONPATH=str(course_root)))


@dataclass
class Options:
    timeout_floor: float = 20.0  # seconds: the least any learner cell gets
    timeout_factor: float = 20.0  # times the model answer's time for the same cell
    budget: float = 600.0  # seconds per learner, all exercises together (retries apart)
    jobs: int | None = None
    memory_mb: int = 4096
    gpu_memory_mb: int = 65536
    roster: list[str] | None = None  # every learner expected: one not found is reported 'not handed in'
    regrade_all: bool = False  # False: keep learners an earlier report graded with the same notebooks and solutions
    allow_reviewed: set[str] = field(default_factory=set)  # learner, learner:exercise, or "*"
    allow_unconfined: bool = False  # grade even where learners' kernels cannot be confined (own or trusted work)
    cuda: bool | None = None  # None: detect
    progress: bool = True
    seed: int | None = None
    only: set[str] | None = None  # grade only these exercise ids
    devices: int | None = None  # GPUs to grade with (None: those here); a Dask run gives its workers' fewest
    dask: str | None = None  # a Dask scheduler's address: the workers grade, this machine runs no learner code
    dask_timeout: float = 30.0  # seconds to wait for the scheduler to answer
    fresh_model: bool = False  # run the model answers even where a kept run of them fits (graphcourse.grading.model_cache)


@dataclass
class Outputs:
    report: Path
    csv: Path | None = None
    feedback: Path | None = None
    gradescope: Path | None = None
    junit: Path | None = None


def cuda_devices_here() -> int:
    """How many CUDA GPUs torch sees here (0 without CUDA), asked in a child so the grader never touches CUDA."""
    if not any(Path("/dev").glob("nvidia[0-9]*")):
        return 0
    try:
        out = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.is_available() and "
                              "torch.cuda.device_count())"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    last = out.stdout.strip().splitlines()[-1:] or ["0"]
    return int(last[0]) if last[0].isdigit() else 0


def cuda_here() -> bool:
    return cuda_devices_here() > 0


def available_needs(cuda: bool | None, devices: int | None = None) -> set[str]:
    """The check needs this machine meets: "cuda" with a GPU, "cuda2" with two or more."""
    if cuda is False:
        return set()
    n = cuda_devices_here() if devices is None else devices
    if cuda is None and n == 0:
        return set()
    return {"cuda"} | ({"cuda2"} if n >= 2 else set())


def _clean_stale(tmp: Path) -> None:
    """Remove socket folders of earlier grader runs that were killed (their pid is gone)."""
    for d in tmp.glob("graphcourse-grade-*"):
        try:
            pid = int(d.name.split("-")[2])
        except (IndexError, ValueError):
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            unmount_under(d)
            shutil.rmtree(d, ignore_errors=True)
        except PermissionError:
            pass


class Grader:
    def __init__(self, paths: list[Path], solutions_dir: Path, options: Options, outputs: Outputs,
                 course_root: Path = ROOT, learners: list[Learner] | None = None) -> None:
        self.paths, self.options, self.outputs, self.course_root = paths, options, outputs, course_root
        self.solutions_dir = Path(solutions_dir)
        self.given_learners = learners  # a Dask worker's share, found by the client (see .cluster)
        self.assignments: list[Assignment] = load_assignments(solutions_dir)
        if options.only:
            known = {ex.id for a in self.assignments for ex in a.exercises}
            unknown = sorted(set(options.only) - known)
            if unknown:
                raise GraphCourseError(f"--only {', '.join(unknown)}: no such exercise (known: {', '.join(sorted(known))})")
            for a in self.assignments:
                a.exercises = [ex for ex in a.exercises if ex.id in options.only]
            self.assignments = [a for a in self.assignments if a.exercises]
        self.confinement: Confinement = detect()
        if not self.confinement.confined and not options.allow_unconfined and not options.dask:  # (workers check)
            raise GraphCourseError(
                "learners' code cannot be confined on this machine (" + "; ".join(self.confinement.reasons) + "), and "
                "grading runs every learner's code with your rights. Grade as root with bubblewrap installed (Debian: "
                "apt install bubblewrap; docs/grading.md), or, only for notebooks you trust, pass --allow-unconfined "
                "(make grade-class UNCONFINED=1); for your own notebooks use --own-work (make grade-me).")
        self.available = available_needs(options.cuda, options.devices)
        self.seed = options.seed if options.seed is not None else assignment_seed(solutions_dir)
        self.solutions_digest = solutions_sha256(solutions_dir)
        self.warnings: list[str] = []
        self.report: dict = {}
        self.model: dict[str, ExerciseRun] = {}
        self.limits: Limits | None = None
        self.tmp: Path | None = None
        self.slots: asyncio.Queue | None = None
        self.uid_pool: UidPool | None = None
        self.started = time.time()
        self.hints = {ex.id: ex.hint for a in self.assignments for ex in a.exercises}
        self.exercise_by_id = {ex.id: ex for a in self.assignments for ex in a.exercises}
        # what each notebook's kernels import before any answer runs: that notebook's own modules (a toy-only
        # notebook's kernel does not pay for torch's import)
        self.modules = {a.name: list(dict.fromkeys(m for ex in a.exercises for m in ex.modules)) for a in self.assignments}
        self.chosen: dict[tuple[str, str], LearnerNotebook] = {}  # (learner, assignment): the notebook read, once
        self.chosen_notes: dict[tuple[str, str], list[str]] = {}

    # --- set-up ----------------------------------------------------------------------------------------
    def _copy_of(self, path: Path) -> str | None:
        try:
            nb = read_learner(path)
        except (InvalidNotebook, OSError):
            return None
        return self._assignment_for(nb, lone=False)

    def _assignment_for(self, nb: LearnerNotebook, lone: bool) -> str | None:
        """Which solutions notebook a learner's notebook is a copy of, whatever the learner named the file.

        In order: the builder's stamp (metadata graphcourse.source); the exercise ids in its cells (metadata, tags,
        cell ids: a copy renamed, or its cells pasted into another notebook); the file name (also '... (1).ipynb',
        '-Copy1'); the answer names its code cells define (a notebook rebuilt by hand); with one solutions notebook,
        a learner's only notebook."""
        names = {a.name for a in self.assignments}
        if nb.source_name in names:
            return nb.source_name
        ids: set[str] = set()
        for c in nb.cells:
            if isinstance(c.graphcourse.get("exercise"), str):
                ids.add(c.graphcourse["exercise"])
            ids |= {t.split(":", 1)[0] for t in c.tags if ":" in t}
            if c.id:
                ids.add(c.id.split("-", 1)[0])
        counts = [(len(ids & {ex.id for ex in a.exercises}), a.name) for a in self.assignments]
        best = max(counts)
        if best[0] and [n for n, _ in counts].count(best[0]) == 1:
            return best[1]
        for a in self.assignments:
            if nb.path.name == a.name or _copy_name(nb.path.name, a.name):
                return a.name
        defined: set[str] = set()
        for c in nb.cells:
            if c.type == "code":
                defined |= cell_names(c)
        counts = [(len(defined & {n for ex in a.exercises for n in ex.names}), a.name) for a in self.assignments]
        best = max(counts)
        if best[0] and [n for n, _ in counts].count(best[0]) == 1:
            return best[1]
        return self.assignments[0].name if lone and len(self.assignments) == 1 else None

    def sandbox(self, slot: int) -> Sandbox:
        assert self.tmp is not None
        return Sandbox(self.confinement, slot, self.tmp / f"slot-{slot}", self.course_root,
                       SandboxLimits(memory_mb=self.options.memory_mb, gpu_memory_mb=self.options.gpu_memory_mb), gpu="cuda" in self.available,
                       uid=self.uid_pool.uids[slot - 1] if self.uid_pool else 0)

    def _learner_record(self, status: str, notes: list[str] | None = None) -> dict:
        return {"status": status, "total": 0, "max": sum(ex.max for a in self.assignments for ex in a.exercises),
                "open": 0, "exercises": {}, "notes": notes or [], "files": [],
                "notebooks": {a.name: {"status": status, "file": None, "points": 0, "max": sum(ex.max for ex in a.exercises),
                                       "open": 0, "exercises": [ex.id for ex in a.exercises]}
                              for a in self.assignments}}

    def _write(self, learner: str | None = None) -> None:
        """Rewrite the reports (atomically); write this learner's feedback and Gradescope file."""
        self.report["run"]["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.report["run"]["wall_s"] = round(time.time() - self.started, 1)
        self.report["warnings"] = list(dict.fromkeys(self.warnings))
        if learner is not None:  # every record is written here once it is placed: one order, however it was made
            self.in_order(self.report["learners"][learner])
        out = self.outputs
        written = reports.write_atomic(out.report, reports.to_json(self.report))
        if written != out.report:
            self.warnings.append(f"{out.report} became a folder during the run: the report is in {written}")
        if out.csv:
            reports.write_atomic(out.csv, reports.to_csv(self.report))
        if out.junit:
            reports.write_atomic(out.junit, reports.junit(self.report))
        stems = reports.file_names(self.report["learners"])
        if out.feedback:
            reports.write_atomic(out.feedback / "index.html", reports.index_html(self.report, stems, out.feedback.name))
        if learner is not None:
            rec = self.report["learners"][learner]
            if out.feedback:
                reports.write_atomic(out.feedback / f"{stems[learner]}.html", reports.feedback_html(learner, rec, self.hints))
            if out.gradescope:
                reports.write_atomic(out.gradescope / f"{stems[learner]}.json", reports.gradescope(rec))

    # --- running -----------------------------------------------------------------------------------------
    async def _with_slot(self, coro_fn):
        assert self.slots is not None
        slot = await self.slots.get()
        try:
            return await coro_fn(slot)
        finally:
            self.slots.put_nowait(slot)

    async def _model(self) -> None:
        """Run every exercise's model answer (trusted) in the same sandbox: observations to compare, and timings.

        Each notebook in kernels of its own, as a learner's, and the notebooks side by side on the run's slots
        (with --jobs 2 and six notebooks, the model answers take about half the time they took one after another)."""
        generous = Limits({}, {}, given=600, floor=600)

        async def model_run(slot: int, a: Assignment) -> list[tuple[str, ExerciseRun]]:
            out = []
            session = Session(self.sandbox(slot), self.modules[a.name])
            try:
                for ex in a.exercises:
                    checks = [c for c in ex.checks if all(n in self.available for n in c.needs)]
                    out.append((ex.id, await run_exercise(ex, ex.model, session.sandbox, generous, self.seed, checks,
                                                          trusted=True, session=session)))
            finally:
                await session.close()
            return out
        digest = self._model_key()
        kept = model_cache.load(digest) if digest and not self.options.fresh_model else None
        if kept is not None and list(kept) == [ex.id for a in self.assignments for ex in a.exercises]:
            self.model = kept
            self.report["run"]["model_answers"] = "cached"
        else:
            runs = await asyncio.gather(*(self._with_slot(lambda slot, a=a: model_run(slot, a))
                                          for a in self.assignments))
            self.model = {ex_id: run for notebook in runs for ex_id, run in notebook}  # in the solutions' order
            self.report["run"]["model_answers"] = "run"
            why = self._model_not_kept() if digest else "only a confined run keeps it"
            if why:
                self.report["run"]["model_answers"] = f"run (not kept: {why})"
            elif model_cache.save(digest, self.model) is None:
                self.report["run"]["model_answers"] = f"run (not kept: {model_cache.folder()} cannot be written)"
        answer, check = {}, {}
        f, floor = self.options.timeout_factor, self.options.timeout_floor
        for ex_id, run in self.model.items():
            ex = self.exercise_by_id[ex_id]
            if run.problem:
                raise GraphCourseError(f"the model answer of {ex_id} could not be run here: {run.problem}")
            if run.answer is not None and run.answer.kind != "ok":
                self.warnings.append(f"the model answer of {ex_id} raised {run.answer.ename}: {run.answer.evalue[:200]} "
                                     "(fix solutions/)")
            answer[ex_id] = max(floor, f * (run.answer.seconds if run.answer else 0))
            for c in ex.checks:
                r = run.checks.get(c.id)
                if r is None:
                    continue
                check[c.id] = max(floor, f * r.seconds)
                if r.obs is None or r.kind != "ran":
                    self.warnings.append(f"the model answer fails its own check {c.id} ({r.kind} {r.ename}: "
                                         f"{(r.problem or r.evalue)[:200]}): that check is not graded (fix solutions/)")
                elif not r.obs and c.points:
                    self.warnings.append(f"check {c.id} observes nothing (no observe() call): it cannot tell answers "
                                         "apart and is not graded (convert it to the observe protocol)")
                    r.obs = None
                elif [f for f in r.flags if not f.startswith("threads still running")]:  # threads: see unexpected_flags
                    self.warnings.append(f"the model answer of {ex_id} trips the run-time review flags in {c.id}: "
                                         f"{'; '.join(r.flags)[:200]}")
            for flag in scan(ex.model):
                self.warnings.append(f"the model answer of {ex_id} would need review: {flag}")
        self.limits = Limits(answer, check, given=max(180.0, floor * 3), floor=floor)

    def _model_key(self) -> str | None:
        """The name of this run's kept model run (graphcourse.grading.model_cache), or None: only a confined run,
        whose learners cannot write the grader's files, reads or keeps one."""
        if not self.confinement.confined or self.options.dask:
            return None
        return model_cache.key(solutions_sha256=self.solutions_digest, seed=self.seed,
                               exercises=[ex.id for a in self.assignments for ex in a.exercises],
                               available=self.available, devices=self.options.devices or 0,
                               course_root=self.course_root)

    def _model_not_kept(self) -> str:
        """Why the model run just made may not be kept ("" when it may): every answer and check must have run, and
        it must read back the same."""
        for ex_id, run in self.model.items():
            if run.problem or (run.answer is not None and run.answer.kind != "ok"):
                return f"the model answer of {ex_id} did not run cleanly"
            failed = [c for c, r in run.checks.items() if r.kind != "ran" or r.obs is None]
            if failed:
                return f"the model answer fails {failed[0]}"
        import dataclasses

        plain = {k: dataclasses.asdict(v) for k, v in self.model.items()}
        try:
            same = json.loads(json.dumps(plain)) == plain
        except (TypeError, ValueError):
            same = False
        return "" if same else "its records do not read back the same from JSON"

    def _allowed(self, learner: str, ex_id: str) -> bool:
        allow = self.options.allow_reviewed
        return "*" in allow or learner in allow or f"{learner}:{ex_id}" in allow

    async def _grade_exercise(self, learner: str, ex: Exercise, answer, slot: int, deadline: float | None,
                              session: Session | None = None) -> tuple[dict, ExerciseRun | None]:
        if answer.source is None:
            return exercise_mark(ex, self.model[ex.id], None, available=self.available, review=[], allowed=False,
                                 answer_notes=answer.notes,
                                 missing=f"no answer cell for {ex.id} (tag {ex.id}:answer), and no other code cell "
                                         f"defines {', '.join(sorted(ex.names))}"), None
        if answer.stub:  # the untouched stub: nothing to run, nothing earned
            hint = re.search(r"NotImplementedError\((['\"])(.*?)\1\)", answer.source)
            mark = exercise_mark(ex, self.model[ex.id], None, available=self.available, review=[], allowed=False,
                                 answer_notes=answer.notes, missing_status="not-answered",
                                 missing="not answered yet" + (f" (NotImplementedError: {hint[2]})" if hint else ""))
            mark["answer_cells"] = answer.cells
            return mark, None
        flags = scan(answer.source)
        if session is not None and session.sandbox.slot != slot:
            session = None
        checks = [c for c in ex.checks if all(n in self.available for n in c.needs)
                  and self.model[ex.id].checks.get(c.id) is not None and self.model[ex.id].checks[c.id].obs is not None]
        sandbox = session.sandbox if session is not None else self.sandbox(slot)
        run = await run_exercise(ex, answer.source, sandbox, self.limits, self.seed, checks, deadline,
                                 session=session, reusable=not flags)
        mark = exercise_mark(ex, self.model[ex.id], run, available=self.available, review=flags,
                             allowed=self._allowed(learner, ex.id), answer_notes=answer.notes)
        mark["answer_cells"] = answer.cells
        mark["seconds"] = round(run.seconds, 2)
        return mark, run

    async def _grade_learner(self, learner: Learner, slot: int) -> None:
        rec = self._learner_record("graded", list(learner.notes))
        await self._grade_learner_in(learner, slot, rec)

    async def _grade_learner_in(self, learner: Learner, slot: int, rec: dict) -> None:
        deadline = time.monotonic() + self.options.budget
        candidates: dict[str, list[LearnerNotebook]] = {}
        broken: dict[str, list[str]] = {}
        for f in learner.files:
            try:
                if f in learner.unreadable:  # read by the Dask client, which could not (see .cluster)
                    raise InvalidNotebook(learner.unreadable[f])
                nb = read_learner(f)
            except (InvalidNotebook, OSError) as exc:  # OSError: gone or closed to the grader since it was found
                target = next((a.name for a in self.assignments  # its name, or a copy's ('06_exercises (1)')
                               if a.name == f.name or _copy_name(f.name, a.name)), None)
                if target is None and len(self.assignments) == 1 and len(learner.files) == 1:
                    target = self.assignments[0].name
                if target:
                    broken.setdefault(target, []).append(str(exc))
                rec["notes"].append(f"could not read {f.name}: {exc}")
                rec["files"].append({"path": f.name, "error": str(exc)})
                continue
            rec["files"].append({"path": f.name, "sha256": nb.sha256})
            rec["notes"] += nb.notes
            a = self._assignment_for(nb, lone=len(learner.files) == 1)
            if a is None:
                rec["notes"].append(f"{f.name} is not a copy of any exercise notebook "
                                    f"({', '.join(x.name for x in self.assignments)}): not graded")
                continue
            if f.name != a and not _copy_name(f.name, a):
                rec["notes"].append(f"{f.name} is a copy of {a} (its cells say so): graded as {a}")
            candidates.setdefault(a, []).append(nb)
        for a in self.assignments:
            found = candidates.get(a.name, [])
            nb = max(found, key=lambda n: (n.mtime, n.path.name == a.name)) if found else None
            book = rec["notebooks"][a.name]
            book["status"] = "graded" if nb is not None else "unreadable" if a.name in broken else "not-handed-in"
            book["file"] = nb.path.name if nb is not None else None
            notes: list[str] = []
            if nb is not None:
                self.chosen[(learner.name, a.name)] = nb
                self.chosen_notes[(learner.name, a.name)] = notes
            if len(found) > 1:
                others = ", ".join(repr(n.path.name) for n in found if n is not nb)
                notes.append(f"warning: {len(found)} notebooks copy {a.name}: graded {nb.path.name!r} (the most recently "
                             f"modified), not {others}")
                self.warnings.append(f"{learner.name}: {notes[-1][len('warning: '):]}")
            # each notebook in kernels of its own: nothing one notebook's answers leave behind reaches another's
            session = Session(self.sandbox(slot), self.modules[a.name])
            try:
                for ex in a.exercises:
                    if nb is None:
                        if a.name in broken:
                            mark = exercise_mark(ex, self.model[ex.id], None, available=self.available, review=[],
                                                 allowed=False, answer_notes=notes, missing_status="error",
                                                 missing=f"could not read the notebook: {broken[a.name][0]}")
                        else:
                            mark = exercise_mark(ex, self.model[ex.id], None, available=self.available, review=[],
                                                 allowed=False, answer_notes=notes, missing_status="not-handed-in",
                                                 missing=f"not handed in: no copy of {a.name} among this learner's "
                                                         "notebooks")
                        rec["exercises"][ex.id] = mark
                        continue
                    answer = find_answer(nb.cells, ex.id, ex.names, ex.stub, a.given, set())
                    answer.notes = answer.notes + notes
                    mark, _ = await self._grade_exercise(learner.name, ex, answer, slot, deadline, session)
                    rec["exercises"][ex.id] = mark
            finally:
                await session.close()
        self._total(rec)
        self.report["learners"][learner.name] = rec

    def _total(self, rec: dict) -> None:
        rec["total"] = sum(m["points"] for m in rec["exercises"].values())
        rec["max"] = sum(m["max"] for m in rec["exercises"].values())
        rec["open"] = sum(m.get("open", 0) for m in rec["exercises"].values())
        for book in rec.get("notebooks", {}).values():
            marks = [rec["exercises"][e] for e in book["exercises"] if e in rec["exercises"]]
            book["points"] = sum(m["points"] for m in marks)
            book["max"] = sum(m["max"] for m in marks)
            book["open"] = sum(m.get("open", 0) for m in marks)

    async def _retry_timeouts(self, learners: list[Learner]) -> None:
        """Regrade, one at a time, every exercise that timed out; the retry's result stands."""
        by_name = {l.name: l for l in learners}
        deadlines: dict[str, float] = {}  # one budget per learner for all its retries
        todo = [(name, ex_id) for name, rec in self.report["learners"].items()
                for ex_id, m in rec["exercises"].items()
                if any(c["status"] == "timeout" for c in m.get("checks", {}).values()) or m["status"] == "timeout"]
        for name, ex_id in todo:
            learner = by_name.get(name)
            if learner is None:
                continue
            ex = self.exercise_by_id[ex_id]
            a = next(a for a in self.assignments if ex in a.exercises)
            nb = self.chosen.get((name, a.name))  # the bytes read the first time: a learner file is read once
            if nb is None:
                continue
            answer = find_answer(nb.cells, ex.id, ex.names, ex.stub, a.given, set())
            answer.notes = answer.notes + self.chosen_notes.get((name, a.name), [])
            deadline = deadlines.setdefault(name, time.monotonic() + self.options.budget)
            mark, _ = await self._with_slot(lambda slot: self._grade_exercise(name, ex, answer, slot, deadline))
            mark["message"] += "; graded twice: the first attempt timed out"
            self.report["learners"][name]["exercises"][ex_id] = mark
            self._total(self.report["learners"][name])
            self._write(name)

    def _roster(self, learners: list[Learner]) -> list[str]:
        """Learners on the roster who handed in nothing: in every report, 'not handed in'. Returns their names."""
        if not self.options.roster:
            return []
        found = {l.name for l in learners}
        absent = [n for n in dict.fromkeys(self.options.roster) if n not in found]
        for name in absent:
            rec = self._learner_record("not-handed-in", ["on the roster, but no notebook was handed in"])
            for a in self.assignments:
                for ex in a.exercises:
                    rec["exercises"][ex.id] = exercise_mark(
                        ex, None, None, available=self.available, review=[], allowed=False, answer_notes=[],
                        missing_status="not-handed-in", missing="not handed in: no notebook from this learner")
                rec["notebooks"][a.name]["status"] = "not-handed-in"
            self.report["learners"][name] = rec
        extra = sorted(found - set(self.options.roster))
        if extra:
            self.warnings.append(f"not on the roster, graded anyway: {', '.join(reports.shown(n) for n in extra[:10])}"
                                 + (f" and {len(extra) - 10} more" if len(extra) > 10 else ""))
        return absent

    def _marking(self) -> dict:
        """The options that change marks: a learner is kept from an earlier report only if they are the same."""
        o = self.options
        return {"allow_reviewed": sorted(o.allow_reviewed), "only": sorted(o.only or []), "floor": o.timeout_floor,
                "factor": o.timeout_factor, "budget": o.budget, "memory_mb": o.memory_mb, "gpu_memory_mb": o.gpu_memory_mb}

    def _progress(self, n: int):
        from tqdm import tqdm

        return tqdm(total=n, unit="learner", desc="grading", disable=not self.options.progress or None, file=sys.stderr)

    def _write_known(self, absent: list[str], kept: set[str]) -> None:
        """The report as it starts, with the learners already known: absent from the roster, kept from before."""
        self._write()
        for name in [*absent, *kept]:
            self._write(name)

    async def _run_on_cluster(self, learners: list[Learner], absent: list[str], kept: set[str]) -> dict:
        """The Dask workers grade (see .cluster); this machine writes every output as learners come back."""
        self.report["run"].update(confined=False, confinement="graded by the Dask workers (see run.cluster)")
        bar = self._progress(len(learners))
        try:
            with self._running(bar):
                self._write_known(absent, kept)
                if learners:
                    await self.cluster.grade(learners, bar)
        finally:
            await self.cluster.close()
        return self.report

    @contextlib.contextmanager
    def _running(self, bar):
        """However a run ends, its status and the report on disk say so: "complete" when the body ends, STOPPED on
        Ctrl-C (which goes on), "running" after the grader's own error; the progress bar is closed first."""
        try:
            yield
            self.report["run"]["status"] = "complete"
        except asyncio.CancelledError:
            self.report["run"]["status"] = STOPPED
            raise
        finally:
            bar.close()
            self._write()

    def in_order(self, rec: dict) -> dict:
        """A record in the one order every output is written in: notebooks, exercises and checks as the solutions
        list them. Records read back from JSON (an earlier report's, a Dask worker's) have sorted keys, and a fresh
        record lists checks not graded here first: _write(learner) puts each record through this as it is placed, so
        each output reads the same however its learners were graded (here, kept from an earlier run, or on a Dask
        worker)."""
        def ordered(d: dict, first: list[str]) -> dict:
            return {k: d[k] for k in [*first, *sorted(set(d) - set(first))] if k in d}
        if isinstance(rec.get("notebooks"), dict):
            rec["notebooks"] = ordered(rec["notebooks"], [a.name for a in self.assignments])
        if isinstance(rec.get("exercises"), dict):
            rec["exercises"] = ordered(rec["exercises"], list(self.exercise_by_id))
            for ex_id, mark in rec["exercises"].items():
                if isinstance(mark, dict) and isinstance(mark.get("checks"), dict) and ex_id in self.exercise_by_id:
                    mark["checks"] = ordered(mark["checks"], [c.id for c in self.exercise_by_id[ex_id].checks])
        return rec

    def _earlier(self, learners: list[Learner]) -> set[str]:
        """Learners the report already on disk graded with the same notebooks, solutions and seed: their records
        are kept (a rerun after Ctrl-C, or after adding a learner, grades only what changed)."""
        if self.options.regrade_all or not self.outputs.report.is_file():
            return set()
        try:
            old = json.loads(self.outputs.report.read_text())
            run = old["run"]
            same = (old.get("format") == FORMAT and run.get("seed") == self.seed
                    and run.get("solutions_sha256") == self.solutions_digest
                    and run.get("exercises") == self.report["run"]["exercises"]
                    and run.get("checks_needing") == self.report["run"]["checks_needing"]
                    and run.get("marking") == self.report["run"]["marking"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return set()
        if not same:
            return set()
        kept = set()
        for learner in learners:
            rec = old.get("learners", {}).get(learner.name)
            if not isinstance(rec, dict) or rec.get("status") in ("not graded yet", "error", None):
                continue
            try:
                now = sorted((f.name, hashlib.sha256(f.read_bytes()).hexdigest()) for f in learner.files)
            except OSError:
                continue
            before = sorted((f.get("path"), f.get("sha256")) for f in rec.get("files", []) if isinstance(f, dict))
            if now and now == before:
                self.report["learners"][learner.name] = rec
                kept.add(learner.name)
        if kept:
            self.report["run"]["kept_from_earlier_report"] = len(kept)
            # the time limits the kept learners were graded under and, on a cluster, the machines that graded
            # them: a model run in this run, or a cluster run, replaces these for the learners it grades
            for key in ("time_limits_s", "cluster"):
                if key in run:
                    self.report["run"][key] = run[key]
        return kept

    async def run(self) -> dict:
        if self.given_learners is not None:
            learners, skipped = list(self.given_learners), []
        else:
            own = {p.resolve() for p in (self.outputs.feedback, self.outputs.gradescope) if p is not None}
            learners, skipped = discover(self.paths, {a.name for a in self.assignments}, self._copy_of, own)
        if not learners:
            raise GraphCourseError(f"no learner notebooks (*.ipynb) under {', '.join(map(str, self.paths))}."
                                   + (f" Skipped: {'; '.join(f'{p}: {r}' for p, r in skipped[:5])}" if skipped else ""))
        jobs = max(1, self.options.jobs or os.cpu_count() or 1)
        if self.options.dask:  # before the report is begun: what it can check is what the workers can
            from .cluster import Cluster

            self.cluster = await Cluster.connect(self)
            jobs = self.cluster.jobs
        if not self.confinement.confined and not self.options.dask:
            self.warnings.append("learners' code was NOT confined: " + "; ".join(self.confinement.reasons)
                                 + ". Grade untrusted notebooks only where bubblewrap runs as root (see docs/grading.md).")
        self.report = {"format": FORMAT, "run": {
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started)), "status": "running",
            "confinement": self.confinement.describe(), "confined": self.confinement.confined,
            "checks_needing": {n: n in self.available for n in NEEDS}, "jobs": jobs,
            "solutions": [a.name for a in self.assignments],
            "exercises": [ex.id for a in self.assignments for ex in a.exercises],
            "seed": self.seed, "solutions_sha256": self.solutions_digest,  # the seed is never shown to a kernel
            "marking": self._marking()},
            "learners": {l.name: self._learner_record("not graded yet") for l in learners},
            "skipped": [{"path": p, "reason": r} for p, r in skipped], "warnings": []}
        absent = self._roster(learners)
        kept = self._earlier(learners)
        learners = [l for l in learners if l.name not in kept]
        if self.options.dask:
            return await self._run_on_cluster(learners, absent, kept)
        tmp_root = Path(tempfile.gettempdir())
        if len(str(tmp_root)) > 50 and Path("/tmp").is_dir():  # a Unix socket's path must fit in 107 bytes
            tmp_root = Path("/tmp")
        _clean_stale(tmp_root)
        self.tmp = Path(tempfile.mkdtemp(prefix=f"graphcourse-grade-{os.getpid()}-", dir=tmp_root))
        os.chmod(self.tmp, 0o711)
        self.report["run"]["scratch"] = str(self.tmp)  # removed at the end, however the run ends
        if self.confinement.confined:
            self.uid_pool = UidPool(jobs)
            self.report["run"]["uids"] = list(self.uid_pool.uids)
        watchdog = start_watchdog(self.tmp, self.uid_pool, self.course_root)
        self.slots = asyncio.Queue()
        for s in range(1, jobs + 1):
            self.slots.put_nowait(s)
        bar = self._progress(len(learners))
        try:
            with self._running(bar):
                self._write_known(absent, kept)
                if not learners:  # every learner kept from the earlier report: nothing to run
                    return self.report
                await self._model()
                self.report["run"]["time_limits_s"] = {"floor": self.options.timeout_floor,
                                                       "factor": self.options.timeout_factor,
                                                       "answer": {k: round(v, 1) for k, v in self.limits.answer.items()},
                                                       "budget_per_learner": self.options.budget}

                async def one(learner: Learner):
                    try:
                        await self._with_slot(lambda slot: self._grade_learner(learner, slot))
                    except asyncio.CancelledError:
                        raise
                    except Exception as exc:  # the grader's own fault: this learner only, said plainly
                        self.report["learners"][learner.name] = self._learner_record(
                            "error", [f"the grader failed on this learner ({type(exc).__name__}: {exc})"])
                    self._write(learner.name)
                    bar.update()
                await asyncio.gather(*(one(l) for l in learners))
                await self._retry_timeouts(learners)
        finally:
            unmount_under(self.tmp)
            shutil.rmtree(self.tmp, ignore_errors=True)
            if self.uid_pool is not None:
                self.uid_pool.release()
            watchdog.stdin.close()
            try:
                watchdog.wait(timeout=30)
            except subprocess.TimeoutExpired:
                watchdog.kill()
        return self.report
