"""Grading one class on many machines with Dask's distributed scheduler (``--dask SCHEDULER``).

The machine you run the command on (the client) runs no learner code. It finds the learners, keeps those an
earlier report already graded (a rerun resumes), sends each Dask worker a share of the class with the solutions
and the seed, and writes every output (JSON, CSV, feedback, Gradescope, JUnit) as a one-machine run does. Each
worker grades its share with the same grader, in a process of its own (``python -m graphcourse.grading.cluster
worker``), each learner confined there as on one machine (root and bubblewrap on every worker; a worker that
cannot confine refuses, unless the client passed --allow-unconfined). The same notebooks, solutions and seed give
the same marks as a one-machine run; only the time limits, calibrated on each worker by its own run of the model
answers, are the worker's (the report lists them per worker).

    dask scheduler --host 10.0.0.1                          # prints the address: tcp://10.0.0.1:8786
    dask worker tcp://10.0.0.1:8786 --nthreads 4 --nworkers 1   # on each grading machine: learners at once there
    python -m graphcourse.grading CLASS --report grades.json --dask tcp://10.0.0.1:8786

Learners are shared out in proportion to each worker's threads, and a worker's share is graded by one grader
run there (the model answers once per worker, not per learner). Every learner is graded with the fewest GPUs any
worker has, so where a learner lands never changes their marks. A Dask scheduler has no login and sends the
solutions and notebooks unencrypted unless its TLS is configured: a network only the instructor reaches, and
``tls://`` (docs/grading.md, "On many machines").
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from ..core.paths import ROOT
from ..errors import GraphCourseError
from .notebooks import InvalidNotebook, Learner, read_bytes

SPEC_OPTIONS = ("timeout_floor", "timeout_factor", "budget", "memory_mb", "gpu_memory_mb", "allow_reviewed",
                "allow_unconfined", "only", "cuda", "devices")
"""The options that travel to the workers: those that change marks or confinement (jobs are each worker's own)."""


def _plain_name(name: str, what: str) -> str:
    """A file name received from the client, used as one path component and nothing more."""
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise GraphCourseError(f"refusing {what} name {name!r}: not a plain file name")
    return name


def shares(learners: list[Learner], threads: dict[str, int]) -> dict[str, list[Learner]]:
    """Learners dealt out to workers in proportion to their threads (deterministic: workers in address order)."""
    seats = [addr for addr in sorted(threads) for _ in range(max(1, int(threads[addr])))]
    out: dict[str, list[Learner]] = {addr: [] for addr in sorted(threads)}
    for i, learner in enumerate(learners):
        out[seats[i % len(seats)]].append(learner)
    return {addr: ls for addr, ls in out.items() if ls}


def _payload(learner: Learner) -> dict:
    """A learner's files as the grader reads them on one machine: never through a link, a regular file of at most
    MAX_BYTES; one it cannot read travels as its reason, and the worker reports it as one machine would."""
    files = []
    for f in learner.files:
        try:
            data, _ = read_bytes(f)
            mtime_ns = os.stat(f, follow_symlinks=False).st_mtime_ns
            files.append({"name": f.name, "mtime_ns": mtime_ns, "data": data})
        except (InvalidNotebook, OSError) as exc:
            files.append({"name": f.name, "error": str(exc)})
    return {"name": learner.name, "notes": list(learner.notes), "files": files}


def course_code_sha256(root: Path = ROOT) -> str:
    """The grader's and the toy's code: a worker whose code differs from the client's would mark differently."""
    h = hashlib.sha256()
    for folder in ("graphcourse", "toygraph"):
        for path in sorted((root / folder).rglob("*.py")):
            h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


# --- on a worker --------------------------------------------------------------------------------------------
def worker_facts() -> dict:
    """What a worker can grade with: run on every worker (client.run) before any share is sent."""
    from .engine import cuda_devices_here
    from .sandbox import detect

    conf = detect()
    return {"devices": cuda_devices_here(), "code": course_code_sha256(), "confined": conf.confined,
            "reasons": list(conf.reasons)}


def _sweep_stale(tmp_root: Path) -> None:
    """Scratch folders of earlier shares whose worker was killed (the pid in their name is gone)."""
    for folder in tmp_root.glob("graphcourse-cluster-*-*"):
        pid = folder.name.split("-")[2]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(folder, ignore_errors=True)


def grade_share(spec: dict, solutions: dict[str, bytes], learners: list[dict]) -> dict:
    """Run on a Dask worker: grade these learners with the grader in a process of its own; return its report.

    The grader stops (its clean-up runs) when the client sets the run's stop event or this worker goes away."""
    from distributed import Event, get_worker

    started = time.monotonic()
    worker = get_worker()
    tmp_root = Path(tempfile.gettempdir())
    _sweep_stale(tmp_root)
    tmp = Path(tempfile.mkdtemp(prefix=f"graphcourse-cluster-{os.getpid()}-", dir=tmp_root))
    os.chmod(tmp, 0o700)  # the learners' notebooks and the solutions: the kernels' uids never read here
    proc = log = None
    stopped = False
    try:
        sol = tmp / "solutions"
        sol.mkdir()
        for name, data in solutions.items():
            (sol / _plain_name(name, "solutions notebook")).write_bytes(data)
        listed = []
        for i, learner in enumerate(learners):
            paths, unreadable = [], {}
            for j, f in enumerate(learner["files"]):
                folder = tmp / "learners" / str(i) / str(j)  # one folder per file: each keeps its own name
                folder.mkdir(parents=True)
                path = folder / _plain_name(f["name"], "notebook")
                if "error" in f:  # the client could not read it: graded as unreadable, as on one machine
                    unreadable[str(path)] = f["error"]
                else:
                    path.write_bytes(f["data"])
                    os.utime(path, ns=(f["mtime_ns"], f["mtime_ns"]))  # the most recent copy is the one graded
                paths.append(str(path))
            listed.append({"name": learner["name"], "notes": learner["notes"], "files": paths,
                           "unreadable": unreadable})
        jobs = max(1, int(worker.state.nthreads))
        (tmp / "spec.json").write_text(json.dumps({**spec, "jobs": jobs, "solutions": str(sol), "learners": listed,
                                                   "parent": os.getpid()}))
        log = open(tmp / "grader.log", "wb")
        proc = subprocess.Popen([sys.executable, "-P", "-m", "graphcourse.grading.cluster", "worker",
                                 str(tmp / "spec.json"), str(tmp / "report.json")], cwd=ROOT,
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        stop = Event(spec["stop_event"])
        while proc.poll() is None:
            try:
                if stop.wait(timeout=1):
                    stopped = True
                    break
            except Exception:  # the scheduler unreachable for a moment: go on waiting for the grader
                time.sleep(1)
        if stopped:
            raise GraphCourseError("stopped by the client")
        said = (tmp / "grader.log").read_text(errors="replace").strip().splitlines()
        if proc.returncode != 0 or not (tmp / "report.json").is_file():
            raise GraphCourseError(f"the grader on {socket.gethostname()} exited with {proc.returncode}: "
                                   + " | ".join(said[-3:])[-600:])
        return {"report": json.loads((tmp / "report.json").read_text()), "host": socket.gethostname(),
                "address": worker.address, "jobs": jobs, "seconds": round(time.monotonic() - started, 1)}
    finally:
        if proc is not None and proc.poll() is None:  # stopped: the grader cleans up on SIGTERM
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if log is not None:
            log.close()
        shutil.rmtree(tmp, ignore_errors=True)


def _worker_main(spec_path: Path, out: Path) -> int:
    """python -m graphcourse.grading.cluster worker SPEC REPORT: the grader for one worker's share."""
    spec = json.loads(spec_path.read_text())
    parent = int(spec["parent"])
    orphan = threading.Event()

    def watch() -> None:  # the Dask worker went away: stop (the grader's clean-up runs), leave nothing behind
        while os.getppid() == parent:
            time.sleep(2)
        orphan.set()
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(120)  # the grader's clean-up did not end: end anyway (its watchdog still sweeps the kernels)
        shutil.rmtree(spec_path.parent, ignore_errors=True)
        os._exit(143)
    threading.Thread(target=watch, daemon=True).start()
    try:
        return _grade_spec(spec, out) if os.getppid() == parent else 143
    finally:
        if orphan.is_set() or os.getppid() != parent:  # nobody is left to remove the scratch folder
            shutil.rmtree(spec_path.parent, ignore_errors=True)


def _grade_spec(spec: dict, out: Path) -> int:
    from .engine import Grader, Options, Outputs

    if spec["code"] != course_code_sha256():
        print("grade: this worker's course code differs from the client's: set both up from the same course",
              file=sys.stderr)
        return 1
    opts = {k: spec["options"][k] for k in SPEC_OPTIONS if k in spec["options"]}
    opts["allow_reviewed"] = set(opts.get("allow_reviewed") or [])
    opts["only"] = set(opts["only"]) if opts.get("only") else None
    options = Options(**opts, jobs=spec["jobs"], seed=spec["seed"], progress=False)
    learners = [Learner(l["name"], [Path(p) for p in l["files"]], list(l["notes"]),
                        {Path(p): why for p, why in l["unreadable"].items()}) for l in spec["learners"]]
    try:
        grader = Grader([], Path(spec["solutions"]), options, Outputs(out), learners=learners)
        if grader.solutions_digest != spec["solutions_sha256"]:
            raise GraphCourseError("the solutions arrived changed (their digest differs from the client's)")
    except GraphCourseError as exc:
        print(f"grade: {exc}", file=sys.stderr)
        return 1

    async def run():
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.add_signal_handler(sig, task.cancel)
        return await grader.run()
    try:
        asyncio.run(run())
    except asyncio.CancelledError:
        print("grade: stopped by a signal", file=sys.stderr)
        return 143
    except (GraphCourseError, OSError) as exc:
        print(f"grade: {exc}", file=sys.stderr)
        return 1
    return 0


# --- on the client ------------------------------------------------------------------------------------------
class Cluster:
    """The client's side: a connection to the scheduler, what its workers can grade with, and the shares sent."""

    def __init__(self, grader, client, facts: dict[str, dict], threads: dict[str, int], code: str) -> None:
        self.grader, self.client, self.facts, self.threads, self.code = grader, client, facts, threads, code
        self.jobs = sum(threads.values())
        self.stop_event = f"graphcourse-stop-{uuid.uuid4().hex}"
        self.futures: dict = {}

    @classmethod
    async def connect(cls, grader) -> "Cluster":
        """Connect, ask every worker what it can grade with, and fix what the run grades with: the workers'
        fewest GPUs (every learner is graded alike, whichever worker they land on). Refuses, saying why, a worker
        with other course code, or one that cannot confine learners unless --allow-unconfined."""
        try:
            from distributed import Client
        except ImportError:
            raise GraphCourseError("--dask needs Dask's distributed scheduler: pip install -e '.[cluster]' "
                                   "(make test installs it)") from None
        from .engine import available_needs

        address = grader.options.dask
        try:
            client = await Client(address, asynchronous=True, timeout=grader.options.dask_timeout)
        except (OSError, asyncio.TimeoutError) as exc:
            raise GraphCourseError(f"--dask {address}: no Dask scheduler answered ({type(exc).__name__}: {exc}); "
                                   "start one with `dask scheduler` and give the address it prints") from None
        try:
            workers = (await client.scheduler.identity(n_workers=-1))["workers"]
            threads = {addr: max(1, int(w.get("nthreads") or 1)) for addr, w in workers.items()}
            if not threads:
                raise GraphCourseError(f"--dask {address}: the scheduler has no workers: start `dask worker "
                                       f"{address}` on each grading machine")
            facts = await client.run(worker_facts)
            code = course_code_sha256()
            other = sorted(a for a, f in facts.items() if f["code"] != code)
            if other:
                raise GraphCourseError(f"--dask: worker(s) {', '.join(other)} run other course code than this machine: "
                                       "set every machine up from the same course (same commit), then grade again")
            loose = sorted(a for a, f in facts.items() if not f["confined"])
            if loose and not grader.options.allow_unconfined:
                raise GraphCourseError(f"--dask: worker(s) {', '.join(loose)} cannot confine learners' code ("
                                       + "; ".join(facts[loose[0]]["reasons"]) + "): run each worker as root with "
                                       "bubblewrap installed (docs/grading.md), or pass --allow-unconfined for "
                                       "notebooks you trust")
        except BaseException:
            await client.close()
            raise
        threads = {a: n for a, n in threads.items() if a in facts}
        devices = min(int(f["devices"]) for f in facts.values())
        if grader.options.devices is not None:
            devices = min(devices, grader.options.devices)
        grader.options.devices = devices
        grader.available = available_needs(grader.options.cuda, devices)
        if len({int(f["devices"]) for f in facts.values()}) > 1:
            grader.warnings.append(f"the grading machines differ in GPUs ({', '.join(sorted(str(f['devices']) for f in facts.values()))}): "
                                   f"every learner is graded as with {devices}, so checks needing more stay open")
        return cls(grader, client, facts, threads, code)

    async def grade(self, learners: list[Learner], bar) -> None:
        """Grade `learners` on the workers; each learner's record goes into the report as its share comes back (a
        share whose worker fails marks its learners 'error', saying why; a rerun grades just them)."""
        from distributed import as_completed

        from ..core.exercise_format import solution_paths

        grader = self.grader
        spec = {"seed": grader.seed, "solutions_sha256": grader.solutions_digest, "code": self.code,
                "stop_event": self.stop_event,
                "options": {k: (sorted(v) if isinstance(v, set) else v)
                            for k in SPEC_OPTIONS for v in [getattr(grader.options, k)]}}
        solutions = {p.name: p.read_bytes() for p in solution_paths(grader.solutions_dir)}
        dealt = shares(learners, self.threads)
        by_key = {}
        for addr, share in dealt.items():
            fut = self.client.submit(grade_share, spec, solutions, [_payload(l) for l in share],
                                     workers=[addr], allow_other_workers=True, pure=False, retries=0,
                                     key=f"graphcourse-grade-{uuid.uuid4().hex}")
            self.futures[fut] = addr
            by_key[fut.key] = share
        grader.report["run"]["cluster"] = {"scheduler": grader.options.dask, "workers": []}
        confined: list[bool] = []
        said: dict[str, list[str]] = {}
        async for fut in as_completed(list(self.futures)):
            addr, share = self.futures[fut], by_key[fut.key]
            try:
                result = await fut
                report = result["report"]
                if report["run"].get("seed") != grader.seed or \
                        report["run"].get("solutions_sha256") != grader.solutions_digest:
                    raise GraphCourseError("it graded with another seed or other solutions")
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # this share only, said plainly
                why = f"{type(exc).__name__}: {str(exc)[:400]}"
                for learner in share:
                    grader.report["learners"][learner.name] = grader._learner_record(
                        "error", [f"the grading machine {addr} failed ({why}); grade again to retry"])
                    grader._write(learner.name)
                    bar.update()
                said[addr] = [f"grading machine {addr} failed: {why}"]
                continue
            run = report["run"]
            confined.append(bool(run.get("confined")))
            grader.report["run"]["cluster"]["workers"].append(
                {"address": result["address"], "host": result["host"], "threads": result["jobs"],
                 "learners": len(share), "seconds": result["seconds"], "confined": run.get("confined"),
                 "confinement": run.get("confinement"), "time_limits_s": run.get("time_limits_s")})
            grader.report["run"]["confinement"] = run.get("confinement")
            said[addr] = list(report.get("warnings", []))
            for learner in share:  # the share's learners, whatever the report holds
                rec = report["learners"].get(learner.name)
                if not isinstance(rec, dict):
                    rec = grader._learner_record("error", [f"the grading machine {addr} returned no record"])
                grader.report["learners"][learner.name] = rec
                grader._write(learner.name)
                bar.update()
        for addr in sorted(said):  # in one order, however the shares finished
            grader.warnings += [w for w in said[addr] if w not in grader.warnings]
        grader.report["run"]["confined"] = bool(confined) and all(confined)
        grader.report["run"]["cluster"]["workers"].sort(key=lambda w: w["address"])

    async def close(self) -> None:
        """Stop what still runs on the workers (their graders clean up), then disconnect."""
        pending = [f for f in self.futures if not f.done()]
        if pending:
            try:
                from distributed import Event

                await Event(self.stop_event, client=self.client).set()
            except Exception:
                pass
            try:
                await self.client.cancel(pending)
            except Exception:
                pass
        await self.client.close()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 3 or argv[0] != "worker":
        print("usage: python -m graphcourse.grading.cluster worker SPEC REPORT (run by a Dask worker; to grade a "
              "class on many machines: python -m graphcourse.grading CLASS --report R --dask SCHEDULER)",
              file=sys.stderr)
        return 2
    return _worker_main(Path(argv[1]), Path(argv[2]))


if __name__ == "__main__":
    sys.exit(main())
