"""Several ranks on two GPUs: the capture failures of serving on several ranks, each bounded by a timeout that kills its ranks.

The toy twin is ``toygraph.ranks``; these are the same scenarios with ``torch.distributed`` (NCCL) on two
GPUs. :func:`run_scenario` starts one process per rank (``multiprocessing``'s spawn context, as
``torch.multiprocessing.spawn`` uses in :mod:`graphcourse.gpulib.multigpu`), each in a fresh process group
on a free port; each rank pins its GPU with ``torch.cuda.set_device(rank)`` before anything else and
writes what it did, event by event, to a file, so a rank that hangs still says how far it got. Every
run is bounded by :func:`run_ranks`: after ``timeout_s`` it kills every rank's whole process group
(SIGKILL) and reports which ranks it killed and that nothing is left behind. A replayed collective needs
that bound of its own: ProcessGroupNCCL enqueues no work for its watchdog while capturing
(pytorch/pytorch#103503, which relanded #102542), so the process group's ``timeout`` is no guarantee for a hang inside a graph.

Scenarios (:data:`SCENARIOS`; what each shows is in its text there):

- ``matched``: every rank captures ``all_reduce`` of the same padded size and replays it: the baseline sum.
- ``pad_mismatch``: rank 1 captures its all-reduce at twice rank 0's size (padded to another bucket).
- ``skipped_replay``: both capture the same graph; the last rank replays it once fewer.
- ``graphed_vs_eager``: rank 0 replays its captured all-reduce; the last rank issues the same one eagerly.
- ``mixing``: each rank replays its graph and, before any sync, issues an eager all-reduce on the same
  communicator, under ``NCCL_GRAPH_MIXING_SUPPORT`` = ``option`` ("1", NCCL's default, or "0").
- ``teardown``: ``option="destroy_first"`` calls ``destroy_process_group()`` while the graph is alive
  (pytorch/pytorch#115388); ``"graphs_first"`` frees the graph, then destroys.

Checked on one H200 (torch 2.11.0+cu130, NCCL 2.28.9, 2026-12-02) with ``run_ranks(_scenario_rank, ..., world=1)``:
``matched``, ``mixing`` and both ``teardown`` orders ran start to end and left nothing behind; with one rank
torch warned that the CUDA graph is empty (an in-place all-reduce over one rank has nothing to launch), so
no collective was really captured there. Nothing here has run on two GPUs yet.

Every process keeps NVLink multicast off, as the course's machines need: ``NCCL_NVLS_ENABLE=0`` and
``TORCH_SYMM_MEM_DISABLE_MULTICAST=1`` are set in the parent (unless the caller set them) and again in
each rank before NCCL starts.

Sources: NCCL user guide, "Using NCCL with CUDA Graphs" (captured-ness and graph launches are collective)
and ``env.rst`` (``NCCL_GRAPH_MIXING_SUPPORT``); pytorch/pytorch#115388; pytorch/pytorch#103503;
vllm-project/vllm#2770; NVIDIA/nccl#1394 and #1417 (mismatched sizes: a hang or a wrong result).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import socket
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

__all__ = ["MULTICAST_OFF", "SCENARIOS", "RankRun", "check_scenario_args", "free_port", "leftover_processes",
           "run_ranks", "run_scenario"]

MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1"}
"""Set in every process: NVLink multicast (NVLS, symmetric-memory multicast) stays off on the course's machines."""

SCENARIOS: dict[str, str] = {
    "matched": "every rank captures all_reduce at the same size and replays it `replays` times: each replay's sum is "
               "right on every rank (the baseline the others break)",
    "pad_mismatch": "rank 1 captures its all_reduce at 2 x size, rank 0 at size: whether the replay hangs (killed after "
                    "the timeout) or finishes with a wrong tail; the values each rank saw if it finished",
    "skipped_replay": "the last rank replays one time fewer: the others' last replay waits in the all-reduce until the "
                      "timeout kills them; how many replays each rank finished",
    "graphed_vs_eager": "rank 0 replays a captured all_reduce while the last rank issues the same one eagerly: "
                        "captured-ness must be uniform over ranks (NCCL); whether it hangs, and the values if not",
    "mixing": "each rank replays its graph, then issues an eager all_reduce before any sync, under "
              "NCCL_GRAPH_MIXING_SUPPORT=option ('1' default, '0'): whether the sums stay right",
    "teardown": "option 'destroy_first': destroy_process_group() while the graph holding the communicator is alive "
                "(pytorch#115388: a hang, killed after the timeout); 'graphs_first': free the graph, then destroy; "
                "seconds each step took",
}
"""What each scenario shows or measures."""

_OPTIONS = {"mixing": ("1", "0"), "teardown": ("destroy_first", "graphs_first")}
_DEFAULT_OPTION = {"mixing": "1", "teardown": "graphs_first"}


def free_port() -> int:
    """A free TCP port on this host for the process group's rendezvous."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --------------------------------------------------------------------------- the bounded launcher

@dataclass
class RankRun:
    """How a run of ranks ended: per-rank events and exit codes, whether the timeout fired, whom it killed."""

    world: int
    timeout_s: float
    timed_out: bool
    killed: list[int]
    exitcodes: list[int | None]
    events: list[list[dict]] = field(default_factory=list)
    leftovers: list[int] = field(default_factory=list)
    """Pids of any process of a rank's process group still running after the cleanup: always [] when it works."""
    wall_s: float = 0.0

    def last(self, rank: int) -> str:
        """The last event rank wrote ('' if none)."""
        return self.events[rank][-1]["event"] if self.events[rank] else ""

    def reached(self, rank: int, event: str) -> bool:
        """Whether rank wrote this event."""
        return any(e["event"] == event for e in self.events[rank])


def _check_timeout(timeout_s: Any) -> float:
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not timeout_s > 0:
        raise ValueError(f"timeout_s is a number of seconds > 0, got {timeout_s!r}.")
    return float(timeout_s)


def _rank_main(target: Callable, rank: int, world: int, args: tuple, env: dict[str, str], out: str) -> None:
    """A rank's process: its own process group (so a kill takes its children too), the environment, then target."""
    os.setsid()
    os.environ.update(MULTICAST_OFF)
    os.environ.update(env)
    path = f"{out}.{rank}"
    t0 = time.monotonic()

    def log(event: str, **found: Any) -> None:
        with open(path, "a") as f:
            f.write(json.dumps({"event": event, "t_s": round(time.monotonic() - t0, 4), **found}) + "\n")

    try:
        target(rank, world, log, *args)
    except Exception as exc:  # recorded, so the parent can say what failed on which rank
        log("error", error=f"{type(exc).__name__}: {exc}".splitlines()[0])
        raise SystemExit(1)


def _alive(pid: int) -> bool:
    """Whether pid runs (a zombie, exited but not yet reaped, does not count)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


def leftover_processes(pgids: list[int]) -> list[int]:
    """Pids of running processes in any of these process groups (Linux /proc; elsewhere the leaders only)."""
    if not os.path.isdir("/proc"):
        return [p for p in pgids if _alive(p)]
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                rest = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        state, pgrp = rest[0], int(rest[2])
        if pgrp in pgids and state not in ("Z", "X"):
            found.append(int(entry))
    return found


def run_ranks(target: Callable, args: tuple = (), *, world: int = 2, timeout_s: float = 60.0,
              env: dict[str, str] | None = None) -> RankRun:
    """Run target(rank, world, log, *args) in `world` processes; after timeout_s kill each rank's process group.

    `target` must be a module-level function (the spawn context pickles it), and the caller's main
    module must be importable again in each rank: a script guarded by ``if __name__ == "__main__":``, a
    notebook or pytest, not ``python -`` reading stdin. `log(event, **values)` appends one JSON line to
    the rank's event file. Every rank's process group is killed at the end
    whether or not the timeout fired, so no child a rank started outlives the run.
    """
    timeout_s = _check_timeout(timeout_s)
    if isinstance(world, bool) or not isinstance(world, int) or world < 1:
        raise ValueError(f"world is a number of ranks >= 1, got {world!r}.")
    if not callable(target):
        raise ValueError(f"target is a module-level function of (rank, world, log, *args), got {target!r}.")
    for key, value in MULTICAST_OFF.items():
        os.environ.setdefault(key, value)
    ctx = multiprocessing.get_context("spawn")
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "rank")
        procs = [ctx.Process(target=_rank_main, args=(target, r, world, tuple(args), dict(env or {}), out),
                             daemon=False) for r in range(world)]
        for p in procs:
            p.start()
        deadline = t0 + timeout_s
        timed_out, killed = False, []
        try:
            for p in procs:
                p.join(max(0.0, deadline - time.monotonic()))
            timed_out = any(p.is_alive() for p in procs)
        finally:
            for r, p in enumerate(procs):
                if p.is_alive():
                    killed.append(r)
                try:
                    os.killpg(p.pid, signal.SIGKILL)  # the rank and anything it started (it called setsid)
                except (ProcessLookupError, PermissionError):
                    pass
                if p.is_alive():
                    p.kill()
                p.join(10)
        # SIGKILL is delivered at once but a process takes a moment to die (longer on a loaded machine): a group
        # counts as left behind only if a member still runs after a few seconds
        settle = time.monotonic() + 5.0
        leftovers = leftover_processes([p.pid for p in procs])
        while leftovers and time.monotonic() < settle:
            time.sleep(0.05)
            leftovers = leftover_processes([p.pid for p in procs])
        events = []
        for r in range(world):
            try:
                with open(f"{out}.{r}") as f:
                    events.append(_read_events(f))
            except OSError:
                events.append([])
    return RankRun(world, timeout_s, timed_out, killed, [p.exitcode for p in procs], events, leftovers,
                   round(time.monotonic() - t0, 3))


def _read_events(lines: Iterable[str]) -> list[dict]:
    """A rank's events; a line cut short when the rank was killed mid-write ends the list."""
    events = []
    for line in lines:
        if not line.strip():
            continue
        try:
            events.append(json.loads(line))
        except ValueError:
            break
    return events


# --------------------------------------------------------------------------- the scenarios (two GPUs, NCCL)

def check_scenario_args(name: str, *, world: int = 2, size: int = 1024, replays: int = 3, timeout_s: float = 120.0,
                        option: str | None = None) -> str | None:
    """Check a scenario's arguments (no GPU needed); return the option it will use."""
    if name not in SCENARIOS:
        raise KeyError(f"no scenario {name!r}; there are {sorted(SCENARIOS)}.")
    if isinstance(world, bool) or not isinstance(world, int) or world < 2:
        raise ValueError(f"a scenario needs at least 2 ranks, got world={world!r}.")
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"size is a number of float32 elements >= 1, got {size!r}.")
    least = 2 if name == "skipped_replay" else 1
    if isinstance(replays, bool) or not isinstance(replays, int) or replays < least:
        raise ValueError(f"replays is a whole number >= {least} for {name!r}, got {replays!r}.")
    _check_timeout(timeout_s)
    if name in _OPTIONS:
        option = _DEFAULT_OPTION[name] if option is None else option
        if option not in _OPTIONS[name]:
            raise ValueError(f"scenario {name!r} takes option in {_OPTIONS[name]}, got {option!r}.")
        return option
    if option is not None:
        raise ValueError(f"scenario {name!r} takes no option, got {option!r}.")
    return None


def _scenario_rank(rank: int, world: int, log: Callable, name: str, port: int, size: int, replays: int,
                   pg_timeout_s: float, option: str | None) -> None:
    import datetime

    import torch
    import torch.distributed as dist

    from .multigpu import capture_all_reduce

    torch.cuda.set_device(rank)              # before anything else: every default stream on this rank's GPU
    device = torch.device("cuda", rank)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=device,
                            timeout=datetime.timedelta(seconds=pg_timeout_s))
    last = rank == world - 1
    log("init", nccl=".".join(str(v) for v in torch.cuda.nccl.version()),
        mixing=os.environ.get("NCCL_GRAPH_MIXING_SUPPORT", "unset (NCCL default 1)"),
        nvls=os.environ.get("NCCL_NVLS_ENABLE"), symm_multicast_off=os.environ.get("TORCH_SYMM_MEM_DISABLE_MULTICAST"))
    n = 2 * size if (name == "pad_mismatch" and rank == 1) else size
    buf = torch.zeros(n, device=device)
    warm = torch.zeros(size, device=device)   # the same size on every rank: the warm-up itself must match
    g = capture_all_reduce(buf, torch.cuda.Stream(device=device), warm=warm)
    log("captured", size=n)
    expected = world * (world + 1) / 2
    mine = replays - 1 if (name == "skipped_replay" and last) else replays
    extra = torch.zeros(4, device=device)
    for k in range(mine):
        buf.fill_(float(rank + 1))
        if name == "graphed_vs_eager" and last:
            dist.all_reduce(buf)              # the same collective, eager on this rank, graphed on rank 0
            log("eager_issued", k=k)
        else:
            g.replay()
            log("replay_issued", k=k)
        if name == "mixing":
            extra.fill_(float(rank + 1))
            dist.all_reduce(extra)            # eager, while the replay may still be outstanding
            log("eager_issued", k=k)
        t = time.monotonic()
        torch.cuda.synchronize()
        found = {"head": buf[:2].tolist(), "tail": buf[-2:].tolist(), "expected": expected,
                 "right": bool(torch.all(buf == expected)), "sync_s": round(time.monotonic() - t, 4)}
        if name == "mixing":
            found["eager_right"] = bool(torch.all(extra == expected))
        log("replay_done", k=k, **found)
    if option == "destroy_first":
        t = time.monotonic()
        log("destroy_start")
        dist.destroy_process_group()          # the graph still holds the communicator (pytorch#115388)
        log("destroyed", s=round(time.monotonic() - t, 4))
        del g
        log("graph_freed")
    else:                                     # the safe order: graphs first, then the communicator
        del g
        torch.cuda.synchronize()
        log("graph_freed")
        t = time.monotonic()
        dist.destroy_process_group()
        log("destroyed", s=round(time.monotonic() - t, 4))
    log("done")


def run_scenario(name: str, *, world: int = 2, size: int = 1024, replays: int = 3, timeout_s: float = 120.0,
                 option: str | None = None) -> dict[str, Any]:
    """Run one scenario on `world` GPUs (NCCL), bounded by timeout_s; return what each rank did and how it ended."""
    option = check_scenario_args(name, world=world, size=size, replays=replays, timeout_s=timeout_s, option=option)
    import torch

    if torch.cuda.device_count() < world:
        raise RuntimeError(f"scenario {name!r} runs one rank per GPU and needs {world} GPUs; this machine has "
                           f"{torch.cuda.device_count()}. toygraph.ranks shows the same scenario on any machine.")
    env = {"NCCL_GRAPH_MIXING_SUPPORT": option} if name == "mixing" else {}
    run = run_ranks(_scenario_rank, (name, free_port(), size, replays, max(timeout_s * 2, 60.0), option),
                    world=world, timeout_s=timeout_s, env=env)
    return {"scenario": name, "option": option, "world": world, "size": size, "replays": replays,
            "timed_out": run.timed_out, "killed": run.killed, "exitcodes": run.exitcodes,
            "finished": [run.reached(r, "done") for r in range(world)],
            "last_event": [run.last(r) for r in range(world)], "events": run.events,
            "leftovers": run.leftovers, "wall_s": run.wall_s, "timeout_s": run.timeout_s,
            "env": {k: os.environ.get(k) for k in MULTICAST_OFF}}


# --------------------------------------------------------------------------- CPU targets for the launcher's tests

def _sleeper(rank: int, world: int, log: Callable, seconds: float, with_child: bool) -> None:
    """A rank that hangs: it sleeps (and, with_child, starts a child that sleeps too)."""
    import subprocess
    import sys

    found: dict[str, Any] = {"nvls": os.environ.get("NCCL_NVLS_ENABLE"),
                             "symm": os.environ.get("TORCH_SYMM_MEM_DISABLE_MULTICAST"), "pid": os.getpid()}
    if with_child:
        child = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({seconds})"])
        found["child_pid"] = child.pid
    log("started", **found)
    time.sleep(seconds)
    log("woke")


def _finisher(rank: int, world: int, log: Callable, value: int) -> None:
    """A rank that finishes at once."""
    log("done", rank=rank, world=world, value=value, mixing=os.environ.get("NCCL_GRAPH_MIXING_SUPPORT"))


def _failer(rank: int, world: int, log: Callable) -> None:
    """A rank that raises on rank 1."""
    if rank == 1:
        raise RuntimeError("rank 1 failed on purpose")
    log("done")
