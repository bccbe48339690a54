"""python -m graphcourse.grading: grade a class of exercise notebooks, each learner confined (see docs/grading.md).

    python -m graphcourse.grading PATH... --report grades.json [--csv grades.csv] [--feedback DIR]
        [--gradescope DIR] [--junit grades.xml] [--jobs N] [--timeout-per-cell S] [--budget-per-learner S]
        [--allow-reviewed LEARNER[:EXERCISE]] [--solutions DIR] [--dask SCHEDULER] [--quiet]

PATH is one learner's notebook, one learner's folder, or a class folder with one folder per learner (notebooks may
sit one level deeper, e.g. alice/hw/06_exercises.ipynb). Exit status 0 whenever grading ran, whatever the marks;
1 with a one-line reason when the grader could not run; 128+N when stopped by signal N (the report then holds the
learners graded so far).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import time
from pathlib import Path

from ..core.paths import SOLUTIONS_DIR
from ..errors import GraphCourseError
from . import reports
from .engine import Grader, Options, Outputs


SWITCHES = {
    "--regrade-all": "grade every learner again (default: keep those the report already graded with the same "
                     "notebooks, solutions and seed, so a rerun after Ctrl-C grades only what is left)",
    "--own-work": "you are grading your own notebooks (make grade-me): where confinement is not available (no root or "
                  "bubblewrap, as on a laptop) say so in one line instead of warning; the code still runs unconfined, "
                  "so never use it for other people's notebooks",
    "--allow-unconfined": "grade even where learners' kernels cannot be confined (no root or bubblewrap): their code "
                          "then runs with your rights, so only for notebooks you trust (default: refuse)",
    "--fresh-model": "run the model answers even where this machine kept a run of the same solutions, course and seed "
                     "(a confined run keeps one in ~/.cache/graphcourse/model-runs; docs/grading.md)",
    "--quiet": "no progress bar (the table and warnings still print)",
}
"""The on/off switches, each off unless given."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m graphcourse.grading", description=__doc__.splitlines()[0])
    p.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="a learner notebook, a learner's folder, or a class folder")
    p.add_argument("--report", type=Path, required=True, help="where to write the JSON report (rewritten as each learner finishes)")
    p.add_argument("--csv", type=Path, help="also write a CSV gradebook")
    p.add_argument("--feedback", type=Path, metavar="DIR", help="write one HTML feedback page per learner into DIR")
    p.add_argument("--gradescope", type=Path, metavar="DIR", help="write one Gradescope results.json per learner into DIR")
    p.add_argument("--junit", type=Path, help="also write JUnit XML (one test case per check)")
    p.add_argument("--timeout-per-cell", type=float, default=20, metavar="S",
                   help="the least time a learner's cell gets (default 20); each cell gets 20x the model answer's time if more")
    p.add_argument("--budget-per-learner", type=float, default=600, metavar="S",
                   help="seconds for all of one learner's exercises together (default 600)")
    p.add_argument("--jobs", type=int, default=None, metavar="N", help="learners graded at once (default: the number of cores)")
    p.add_argument("--memory-mb", type=int, default=4096, metavar="MB", help="address space per kernel process (default 4096)")
    p.add_argument("--gpu-memory-mb", type=int, default=65536, metavar="MB",
                   help="address space per kernel process where checks may use CUDA (default 65536: CUDA does not "
                        "initialise under a few GB)")
    p.add_argument("--allow-reviewed", action="append", default=[], metavar="LEARNER[:EXERCISE]",
                   help="award the points of answers flagged 'needs review' once you have read them ('*' for all)")
    p.add_argument("--solutions", type=Path, default=SOLUTIONS_DIR, help="the pristine notebooks (default: solutions/)")
    p.add_argument("--only", action="append", default=[], metavar="EXERCISE",
                   help="grade only this exercise (repeat for more); the others are left out of the report")
    p.add_argument("--seed", type=int, default=None,
                   help="the hidden inputs' seed (default: one fixed by the solutions' contents, so every rerun, "
                        "export and machine gives the same marks; give another for a new term)")
    p.add_argument("--roster", type=Path, metavar="FILE",
                   help="the class list, one learner (folder) name per line: one who handed in nothing is reported "
                        "'not handed in' in every output")
    p.add_argument("--dask", metavar="SCHEDULER",
                   help="grade on a Dask cluster (e.g. tcp://10.0.0.1:8786): its workers grade, each learner confined "
                        "there; this machine writes every output (needs the course's 'cluster' extra; docs/grading.md)")
    for switch, text in SWITCHES.items():
        p.add_argument(switch, action="store_true", help=text)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    for p in args.paths:
        if not p.exists() and not p.is_symlink():
            parser.error(f"{p} does not exist: give a learner notebook, a learner's folder or a class folder")
    if args.timeout_per_cell <= 0 or args.budget_per_learner <= 0 or (args.jobs is not None and args.jobs < 1):
        parser.error("--timeout-per-cell and --budget-per-learner must be > 0 and --jobs at least 1")
    try:
        for target in [args.report, args.csv, args.junit]:
            if target is not None:
                reports.check_target(target)
        for folder in [args.feedback, args.gradescope]:
            if folder is not None:
                folder.mkdir(parents=True, exist_ok=True)
        roster = None
        if args.roster is not None:
            try:
                roster = [ln.strip() for ln in args.roster.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
            except (OSError, UnicodeDecodeError) as exc:
                parser.error(f"--roster {args.roster}: cannot read it ({exc}); give a text file, one learner per line")
        options = Options(timeout_floor=args.timeout_per_cell, budget=args.budget_per_learner, jobs=args.jobs,
                          memory_mb=args.memory_mb, gpu_memory_mb=args.gpu_memory_mb, allow_reviewed=set(args.allow_reviewed), progress=not args.quiet,
                          seed=args.seed, only=set(args.only) or None, roster=roster,
                          regrade_all=args.regrade_all, allow_unconfined=args.allow_unconfined or args.own_work,
                          dask=args.dask, fresh_model=args.fresh_model)
        grader = Grader(args.paths, args.solutions, options,
                        Outputs(args.report, args.csv, args.feedback, args.gradescope, args.junit))
    except (GraphCourseError, OSError) as exc:
        print(f"grade: {reports.terminal(exc)}", file=sys.stderr)
        return 1
    if args.dask:
        pass  # the workers confine (or refuse); the report says how each did
    elif not grader.confinement.confined and args.own_work:
        print("grade: grading your own notebooks as you (not confined: no root or bubblewrap needed); a class is "
              "graded confined (docs/grading.md)", file=sys.stderr)
    elif not grader.confinement.confined:
        print("grade: WARNING: learners' code will NOT be confined: " + "; ".join(grader.confinement.reasons), file=sys.stderr)
    start = time.perf_counter()
    stopped: list[int] = []

    async def run():
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.add_signal_handler(sig, lambda s=sig: (stopped.append(s), task.cancel()))
        return await grader.run()

    try:
        report = asyncio.run(run())
    except asyncio.CancelledError:
        print(f"grade: stopped by signal {stopped[0] if stopped else '?'}; the report in {args.report} holds the "
              "learners graded so far", file=sys.stderr)
        return 128 + (stopped[0] if stopped else 15)
    except (GraphCourseError, OSError) as exc:
        print(f"grade: {reports.terminal(exc)}", file=sys.stderr)
        return 1
    print(reports.table(report))
    if len(report["learners"]) <= 3:
        for name, rec in report["learners"].items():
            line = reports.handed_in_line(name, rec)
            if line:
                print(line)
    kept = report["run"].get("kept_from_earlier_report") or 0
    print(f"\n{len(report['learners'])} learner(s) graded in {time.perf_counter() - start:.1f} s "
          + (f"({kept} kept from the earlier report: same notebooks, solutions and seed; --regrade-all grades them "
             "again) " if kept else "")
          + f"({'confined' if report['run'].get('confined') else 'NOT confined'}"
          + (f", on {len(report['run'].get('cluster', {}).get('workers', []))} Dask worker(s)" if args.dask else "")
          + f"); report in {args.report}"
          + "".join(f", {what} in {p}" for what, p in (("CSV", args.csv), ("feedback", args.feedback),
                                                        ("Gradescope", args.gradescope), ("JUnit", args.junit)) if p))
    for s in report.get("skipped", []):
        print(f"skipped: {reports.terminal(s['path'])}: {s['reason']}")
    for w in report.get("warnings", []):
        if args.own_work and w.startswith("learners' code was NOT confined"):
            continue  # said once above, in the words for one's own work
        print(f"warning: {reports.terminal(w)}")
    review = [(n, ex) for n, rec in report["learners"].items() for ex, m in rec["exercises"].items() if m["status"] == "review"]
    if review:
        print(f"needs review: {len(review)} answer(s) touch the grading machinery and earn nothing until cleared "
              f"(read them, then --allow-reviewed LEARNER:EXERCISE): "
              + ", ".join(f"{reports.shown(n)}:{ex}" for n, ex in review[:10]))
    return 0
