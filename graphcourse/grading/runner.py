"""Running one exercise in a fresh, confined kernel with nbclient, and collecting each check's signed observations.

The grader's side (this module, nbclient, jupyter_client) runs outside the sandbox; the kernel runs inside it
(:mod:`.sandbox`) and talks to it over Unix sockets. Per exercise, one kernel runs, in order: a preamble (imports
the modules the course's own cells import, and the observe module, before any learner code: that time is not the
learner's), the set-up and context cells, a baseline snapshot, the answer, then per check a header, the check cell,
and a footer that signs the observations with a key only it carries. A check that times out or kills the kernel
costs that check: the kernel is replaced (set-up, context and answer rerun) and the next check goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hmac
import json
import os
import re
import secrets
import signal
import subprocess
import time
from dataclasses import dataclass, field
from hashlib import sha256
from pathlib import Path

import nbformat
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.kernelspec import KernelSpec
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from traitlets import DottedObjectName, Type

from .assignment import Check, Exercise
from .observe import MIME
from .sandbox import Sandbox

MAX_STREAM = 4000  # characters of printed output kept per cell (the rest is dropped as it arrives)
MAX_OUTPUTS = 50
MAX_PAYLOAD = 2_000_000
TRIPWIRE_BUFFER = 64 * 1024 * 1024  # what the grader keeps of one kernel's tripwire records between two reads
TRIPWIRE_READS = 16  # 1 MB reads of the tripwire's pipe per turn of the event loop
TRIPWIRE_RECORDS = 100_000  # records read from the pipe per call of Kernel.tripwire (a check sends far fewer)
TRIPWIRE_KEYS = frozenset({"obs", "flag", "mark", "installed", "end_flags"})  # what the tripwire's records hold
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@dataclass
class CellRun:
    kind: str  # ok, raised, timeout, dead, failed-start
    ename: str = ""
    evalue: str = ""
    seconds: float = 0.0
    outputs: list = field(default_factory=list)


@dataclass
class CheckRun:
    check: str
    kind: str  # ran, raised, timeout, dead, budget, not-run
    ename: str = ""
    evalue: str = ""
    obs: dict | None = None  # verified observations, or None
    hints: dict = field(default_factory=dict)
    said: dict = field(default_factory=dict)  # key -> the message of the exception it raised (shown, never compared)
    flags: list = field(default_factory=list)
    problem: str = ""  # why the observations were refused
    seconds: float = 0.0
    obs_counts: dict = field(default_factory=dict)  # how often each key came through the tripwire's pipe
    restored: list = field(default_factory=list)  # names the answer cell had rebound, put back for this check


@dataclass
class ExerciseRun:
    exercise: str
    answer: CellRun | None = None
    checks: dict[str, CheckRun] = field(default_factory=dict)
    problem: str = ""  # the grader could not run it (kernel did not start, set-up failed)
    restarts: int = 0
    seconds: float = 0.0


@dataclass
class Limits:
    """Seconds a cell may run: per answer cell and per check cell (calibrated), and for the course's own cells."""

    answer: dict[str, float]
    check: dict[str, float]
    given: float = 180.0
    floor: float = 20.0
    grader_cell: float = 30.0  # the grader's own header and footer cells

    def for_answer(self, ex: str) -> float:
        return self.answer.get(ex, self.floor)

    def for_check(self, check: str) -> float:
        return self.check.get(check, self.floor)


IOPUB_MAX_MESSAGE = 64 * 1024 * 1024
"""The largest output message the grader takes from a kernel (as on its other channels): a larger one is dropped,
connection and all, before it is read. Smaller would lose an honest answer's later output: each reconnection drops
what the kernel had queued for the grader, the checks' signed observations included."""
IOPUB_QUEUE = 4
"""Output messages the grader's socket holds while it is busy. Past that zmq stops reading from the kernel (nothing is
dropped): the backlog waits in the kernel's own memory, which its limit bounds, not in the grader's. With
IOPUB_MAX_MESSAGE, a kernel that floods its output holds at most 256 MB of the grader's memory."""


class _KernelClient(AsyncKernelClient):
    """A kernel client whose output channel is bounded before it connects (zmq applies a socket's size limit and
    queue length to the connections it makes after they are set): a kernel sending 32 MB messages in a loop once
    took the grader from 100 MB to 2.7 GB in three seconds, its messages queued in the grader."""

    def connect_iopub(self, identity: bytes | None = None):
        import zmq

        if getattr(self, "curve_publickey", None) is not None:  # not the grader's kernels: no keys in their files
            return super().connect_iopub(identity)
        sock = self.context.socket(zmq.SUB)
        sock.linger = 1000
        sock.setsockopt(zmq.MAXMSGSIZE, IOPUB_MAX_MESSAGE)
        sock.setsockopt(zmq.RCVHWM, IOPUB_QUEUE)
        if identity:
            sock.identity = identity
        sock.connect(self._make_url("iopub"))
        sock.setsockopt(zmq.SUBSCRIBE, b"")
        return sock


class _KernelManager(AsyncKernelManager):
    """Writes the connection file readable by the sandbox's uid (and nobody else); its clients' output is bounded."""

    sandbox_uid: int | None = None
    client_class = DottedObjectName("graphcourse.grading.runner._KernelClient")
    client_factory = Type(klass="graphcourse.grading.runner._KernelClient")

    def write_connection_file(self, **kwargs):
        super().write_connection_file(**kwargs)
        if self.sandbox_uid is not None:
            os.chown(self.connection_file, self.sandbox_uid, self.sandbox_uid)


class _Client(NotebookClient):
    """nbclient with bounded outputs: an answer that prints gigabytes cannot fill the grader's memory."""

    def output(self, outs, msg, display_id, cell_index):
        msg_type = msg.get("msg_type")
        content = msg.get("content") or {}
        if msg_type == "stream":
            kept = sum(len(o.get("text", "")) for o in outs if o.get("output_type") == "stream")
            if kept >= MAX_STREAM:
                return None
            text = str(content.get("text", ""))[: MAX_STREAM - kept]
            msg = dict(msg, content=dict(content, text=text))
        elif msg_type in ("display_data", "execute_result", "update_display_data"):
            data = content.get("data") or {}
            if not isinstance(data, dict) or MIME not in data:
                return None  # pictures and HTML are not needed to grade
            msg = dict(msg, content={"data": {MIME: data[MIME]}, "metadata": {}})
        if len(outs) >= MAX_OUTPUTS:
            return None
        return super().output(outs, msg, None, cell_index)


class Kernel:
    """One confined kernel, started fresh; run(source) returns a CellRun and never raises for the learner's doing."""

    def __init__(self, sandbox: Sandbox, startup_timeout: float = 120) -> None:
        self.sandbox = sandbox
        self.startup_timeout = startup_timeout
        self.client: _Client | None = None
        self.km: _KernelManager | None = None
        self._reply: dict = {}
        self.alive = False
        self.tripwire_fd: int | None = None
        self.marks = 0  # footers whose mark the grader has read
        self._pending = bytearray()  # grows in place: a kernel filling the buffer costs linear time, not quadratic
        self._overflow = False

    @property
    def tripwire_path(self) -> Path:
        return self.sandbox.socket_dir / "tripwire"

    def _open_tripwire(self) -> None:
        """The grader's end of the tripwire's pipe (see .tripwire): made before the kernel starts, read after each cell."""
        path = self.tripwire_path
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        os.mkfifo(path, 0o600)
        if self.sandbox.confinement.confined:
            os.chown(path, self.sandbox.uid, self.sandbox.uid)
        self.tripwire_fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        asyncio.get_running_loop().add_reader(self.tripwire_fd, self._read_tripwire)

    def _read_tripwire(self) -> None:
        """Move what the pipe holds into the grader's buffer (called by the event loop whenever it is readable, so a
        kernel writing a large observation never waits on a full pipe)."""
        if self.tripwire_fd is None:
            return
        for _ in range(TRIPWIRE_READS):  # then back to the event loop, which calls again while the pipe is readable:
            try:                         # threads of a kernel that keep the pipe full cannot hold the grader here
                chunk = os.read(self.tripwire_fd, 1 << 20)
            except (BlockingIOError, OSError):
                return
            if not chunk:
                return
            if len(self._pending) + len(chunk) > TRIPWIRE_BUFFER:
                self._overflow = True  # the tripwire writes far less than this for any honest check
                continue
            self._pending += chunk

    def tripwire(self) -> list[dict]:
        """Every record the kernel's tripwire wrote since the last call (never blocks). At most TRIPWIRE_RECORDS
        lines are read per call; lines the tripwire does not write are counted, not kept (a kernel writing millions
        of `{}` lines into the pipe once took the grader to 2.7 GB)."""
        self._read_tripwire()
        end = self._pending.rfind(b"\n") + 1  # whole lines only; a record cut short waits for its end
        chunk = bytes(self._pending[:end])
        del self._pending[:end]
        out: list[dict] = []
        if self._overflow:
            self._overflow = False
            out.append({"flag": "the kernel wrote more into the tripwire's pipe than the grader keeps"})
        start, lines, strange = 0, 0, 0
        while start < len(chunk):
            stop = chunk.find(b"\n", start)
            line, start = chunk[start:stop], stop + 1
            lines += 1
            if lines > TRIPWIRE_RECORDS:
                out.append({"flag": "the kernel wrote more records into the tripwire's pipe than the tripwire writes"})
                break
            try:
                rec = json.loads(line.decode("utf-8", "replace"))
            except (ValueError, RecursionError):
                rec = None
            if isinstance(rec, dict) and TRIPWIRE_KEYS & rec.keys():
                out.append(rec)
            else:
                strange += 1
        if strange:
            out.append({"flag": f"the tripwire's pipe carried {strange} record(s) the tripwire does not write"})
        return out

    async def start(self) -> None:
        self.sandbox.prepare()
        self._open_tripwire()
        km = _KernelManager(transport="ipc", ip=str(self.sandbox.socket_dir / "zmq"),
                            connection_file=str(self.sandbox.socket_dir / "kernel.json"))
        km.sandbox_uid = self.sandbox.uid if self.sandbox.confinement.confined else None
        km._kernel_spec = KernelSpec(argv=self.sandbox.kernel_argv(), language="python", display_name="graded",
                                     env={}, interrupt_mode="signal")
        km.autorestart = False
        self.km = km
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("")])
        self.client = _Client(nb, km=km, timeout=60, startup_timeout=self.startup_timeout, allow_errors=True,
                              record_timing=False, iopub_timeout=10, raise_on_iopub_timeout=False,
                              shutdown_kernel="immediate", on_cell_executed=self._executed)
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"} if self.sandbox.confinement.confined else dict(
            os.environ, PYTHONPATH=str(self.sandbox.course_root), MPLBACKEND="Agg")
        self.client.km = km
        await self.client.async_start_new_kernel(env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                                 stdin=subprocess.DEVNULL)
        self.alive = True
        await self.client.async_start_new_kernel_client()
        _limit_message_size(self.client.kc)

    def _executed(self, cell=None, cell_index=None, execute_reply=None, **_):
        self._reply = (execute_reply or {}).get("content") or {}

    async def run(self, source: str, timeout: float) -> CellRun:
        if not self.alive or self.client is None:
            return CellRun("dead", evalue="the kernel is not running")
        cell = nbformat.v4.new_code_cell(source)
        self.client.timeout = max(1, int(timeout + 0.999))
        self._reply = {}
        start = time.monotonic()
        try:
            await self.client.async_execute_cell(cell, 0, store_history=False)
        except CellTimeoutError:
            await self.stop()
            return CellRun("timeout", seconds=time.monotonic() - start)
        except DeadKernelError:
            await self.stop()
            return CellRun("dead", seconds=time.monotonic() - start)
        except asyncio.CancelledError:
            await self.stop()
            raise
        except Exception as exc:  # a broken channel, a malformed message: the kernel is not usable any more
            await self.stop()
            return CellRun("dead", type(exc).__name__, str(exc)[:200], time.monotonic() - start)
        seconds = time.monotonic() - start
        reply = self._reply
        if reply.get("status") == "error":
            return CellRun("raised", str(reply.get("ename", ""))[:200], ANSI.sub("", str(reply.get("evalue", "")))[:1000],
                           seconds, list(cell.outputs))
        if reply.get("status") not in ("ok", None):
            return CellRun("raised", "aborted", str(reply.get("status"))[:50], seconds, list(cell.outputs))
        return CellRun("ok", seconds=seconds, outputs=list(cell.outputs))

    async def stop(self) -> None:
        """Kill the kernel and everything it started; remove its socket folder."""
        self.alive = False
        client, km = self.client, self.km
        self.client = self.km = None
        if client is not None:
            with contextlib.suppress(Exception):
                if client.kc is not None:
                    client.kc.stop_channels()
        if km is not None:
            proc = getattr(getattr(km, "provisioner", None), "process", None)
            if proc is not None:
                with contextlib.suppress(Exception):
                    os.killpg(proc.pid, signal.SIGKILL)
                with contextlib.suppress(Exception):
                    proc.kill()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(km.shutdown_kernel(now=True), 10)
            if proc is not None:
                with contextlib.suppress(Exception):
                    proc.wait(timeout=10)
            with contextlib.suppress(Exception):
                await km._async_cleanup_resources()
        if self.tripwire_fd is not None:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(self.tripwire_fd)
            with contextlib.suppress(OSError):
                os.close(self.tripwire_fd)
            self.tripwire_fd = None
        self.sandbox.sweep()
        self.sandbox.remove()


def _limit_message_size(kc) -> None:
    """A kernel that sends one enormous message is disconnected instead of filling the grader's memory (the output
    channel is bounded tighter, before it connects: _KernelClient)."""
    try:
        import zmq

        for name in ("shell_channel", "stdin_channel", "control_channel"):
            chan = getattr(kc, name, None)
            sock = getattr(chan, "socket", None)
            if sock is not None:
                sock.setsockopt(zmq.MAXMSGSIZE, 64 * 1024 * 1024)
    except Exception:
        pass


def preamble(modules: list[str], pipe: str) -> str:
    """The first cell of a fresh kernel: the course's imports, then the tripwire (see .tripwire), before any answer."""
    lines = ["import importlib as _gc_importlib", "import graphcourse.grading.observe as _gc_observe",
             "import graphcourse.grading.tripwire as _gc_tripwire",
             "import graphcourse.grading.checks as _gc_checks  # sealed with the rest, however a check imports it",
             f"for _gc_m in {modules!r}:",
             "    try:",
             "        _gc_importlib.import_module(_gc_m)",
             "    except Exception:",
             "        pass",
             "try:  # pyzmq starts a garbage-collector thread at the kernel's first large message; start it now, so",
             "    import zmq.utils.garbage as _gc_zmq_garbage  # an answer that prints a lot is not 'a thread left running'",
             "    if not _gc_zmq_garbage.gc.is_alive():",
             "        _gc_zmq_garbage.gc.start()",
             "    del _gc_zmq_garbage",
             "except Exception:",
             "    pass",
             "_gc_observe._save_process_state()",
             f"_gc_tripwire.install({pipe!r})",
             "del _gc_importlib, _gc_m, _gc_observe, _gc_tripwire, _gc_checks"]
    return "\n".join(lines)


def baseline(names: tuple = ()) -> str:
    """The grader's cell after the given ones: snapshot the kernel, and remember what the names the checks read but do
    not bind (see read_names) are bound to, so that each check sees them as the exercise gave them."""
    return (f"import graphcourse.grading.observe as _gc_observe\n_gc_observe._baseline({tuple(names)!r})\n"
            "del _gc_observe")


def answer_cell(answer: str) -> str:
    """The grader's cell just before the answer: the tripwire learns the file name the answer's code will carry."""
    return (f"from graphcourse.grading.tripwire import answer_cell as _gc_answer_cell\n_gc_answer_cell({answer!r})\n"
            "del _gc_answer_cell")


def header(check: str, seed: int, names: tuple = ()) -> str:
    return (f"from graphcourse.grading.observe import _begin as _gc_begin\n"
            f"_gc_begin({check!r}, {int(seed)}, {tuple(names)!r})\ndel _gc_begin")


def bound_names(sources: list[str]) -> tuple:
    """Every name the check cells bind anywhere (assignments, loop targets, imports, defs): the answer's code must not
    rebind or refill them while a check runs (see observe._check_bindings)."""
    import ast

    names: set[str] = set()
    for source in sources:
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update((a.asname or a.name).split(".")[0] for a in node.names if a.name != "*")
    return tuple(sorted(names))


def read_names(checks: list[str], given: list[str] = (), bound: tuple | None = None) -> tuple:
    """The global names a check can meet that the check cells do not bind: those the check cells read, and those the
    functions of the given cells (the exercise's set-up and context) read when a check calls them. That is the
    exercise's given names (SharedPool, PROFILES, and ToyGraph, which SharedPool's methods build graphs with), the
    built-ins (len, sorted), and the answer's functions. observe._baseline keeps what the first two kinds are bound
    to after the given cells, and each check's header puts them back if the answer rebound them. (What a given cell
    reads at its top level or in a class body ran before the answer, and never runs again.) bound: the check cells'
    bound_names, where the caller has them."""
    import symtable

    def read(table, everywhere: bool) -> set[str]:
        here = table.get_type() == "function" or everywhere
        out = {s.get_name() for s in table.get_symbols() if here and s.is_referenced() and (
            table.get_type() == "module" or s.is_global() and not s.is_declared_global())}
        for child in table.get_children():
            out |= read(child, everywhere)
        return out

    names: set[str] = set()
    for source, everywhere in [(c, True) for c in checks] + [(g, False) for g in given]:
        try:
            names |= read(symtable.symtable(source, "<cell>", "exec"), everywhere)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
    return tuple(sorted(names - set(bound_names(checks) if bound is None else bound)))


@functools.lru_cache(maxsize=256)
def exercise_names(checks: tuple[str, ...], given: tuple[str, ...]) -> tuple[tuple, tuple]:
    """(bound_names, read_names) of an exercise's check cells and given cells: worked out once per grader run, not
    again for every learner's run of the exercise."""
    bound = bound_names(list(checks))
    return bound, read_names(list(checks), list(given), bound)


def footer(key: str) -> str:
    return f"from graphcourse.grading.observe import _end as _gc_end\n_gc_end({key!r})\ndel _gc_end"


def _sent_observations(records: list[dict], check: str) -> tuple[dict, dict]:
    """(observations, hints) of one check as its tripwire sent them, the last record of a key winning (as in observe)."""
    obs: dict = {}
    hints: dict = {}
    for rec in records:
        if "obs" in rec and rec.get("check") == check and isinstance(rec.get("obs"), str) \
                and isinstance(rec.get("record"), dict):
            obs[rec["obs"]] = rec["record"]
            if isinstance(rec.get("hint"), str):
                hints[rec["obs"]] = rec["hint"]
    return obs, hints


def _sent_messages(records: list[dict], check: str) -> dict:
    """key -> the message of the exception a key's last record raised (observe reads it without running the
    exception's code: see observe.exception_message). For the learner's feedback only, never compared."""
    said: dict = {}
    for rec in records:
        if "obs" in rec and rec.get("check") == check and isinstance(rec.get("obs"), str):
            if isinstance(rec.get("said"), str):
                said[rec["obs"]] = rec["said"][:500]
            else:
                said.pop(rec["obs"], None)
    return said


def _observation_counts(records: list[dict], check: str) -> dict:
    """How many times each key of one check came through the pipe (a check records a key as often as the model's
    run of it does; more is someone else writing into the pipe)."""
    counts: dict = {}
    for rec in records:
        if "obs" in rec and rec.get("check") == check and isinstance(rec.get("obs"), str):
            counts[rec["obs"]] = counts.get(rec["obs"], 0) + 1
    return counts


def _tripped(records: list[dict]) -> list[str]:
    """The tripwire's records as review flags ("tampering: what (where)"), in the order they were written."""
    out = []
    for rec in records:
        if "flag" in rec:
            where = str(rec.get("where") or "")[:80]
            out.append(f"tampering: {str(rec['flag'])[:160]}" + (f" ({where})" if where else ""))
    return list(dict.fromkeys(out))


def verify(outputs: list, key: str, check: str) -> tuple[dict | None, dict, list[str], str, list[str]]:
    """(observations, hints, flags, problem, restored) from a footer's outputs: only a payload signed with key counts.
    restored: the names the check's header put back (see observe._restore_given)."""
    valid, extra = None, 0
    for out in outputs:
        data = out.get("data") if isinstance(out, dict) else None
        if not isinstance(data, dict) or MIME not in data:
            continue
        blob = data[MIME]
        if not isinstance(blob, dict) or not isinstance(blob.get("payload"), str) or not isinstance(blob.get("mac"), str):
            extra += 1
            continue
        text = blob["payload"]
        if len(text) > MAX_PAYLOAD:
            extra += 1
            continue
        good = hmac.new(bytes.fromhex(key), text.encode(), sha256).hexdigest()
        if hmac.compare_digest(good, blob["mac"]) and valid is None:
            valid = text
        else:
            extra += 1
    if valid is None:
        return None, {}, [], ("no signed observations came back from this check (the kernel's grading code did not "
                              "run as written)" if not extra else "observations came back unsigned or wrongly signed"), []
    try:
        payload = json.loads(valid)
    except (ValueError, RecursionError):
        return None, {}, [], "the observations could not be read", []
    if not isinstance(payload, dict) or payload.get("check") != check or not isinstance(payload.get("obs"), dict):
        return None, {}, [], "the observations belong to another check", []
    flags = [str(f)[:200] for f in payload.get("flags") or [] if isinstance(f, str)]
    if extra:
        flags.append(f"{extra} extra observation output(s) appeared beside the grader's (forged?)")
    hints = payload.get("hints") if isinstance(payload.get("hints"), dict) else {}
    restored = [str(n)[:60] for n in payload.get("restored") or [] if isinstance(n, str)][:20]
    return payload["obs"], hints, flags, "", restored


RESET = ("get_ipython().reset(new_session=False)\n"
         "import graphcourse.grading.observe as _gc_observe\n_gc_observe._restore_process_state()\ndel _gc_observe")


class Session:
    """The kernel one learner's (or the model's) exercises run in, one after another.

    A kernel is kept for the next exercise only while every exercise ended cleanly: the answer and each check ran
    (or raised), nothing timed out or died, no review flag (static or at run time), the observations were signed.
    Between exercises the kernel's namespace is reset and the set-up cells rerun; after anything unusual the next
    exercise gets a fresh kernel, so nothing an answer armed can reach a later exercise."""

    def __init__(self, sandbox: Sandbox, modules: list[str]) -> None:
        self.sandbox = sandbox
        self.modules = list(dict.fromkeys(modules))
        self.kernel: Kernel | None = None
        self.kernels_started = 0

    async def close(self) -> None:
        if self.kernel is not None:
            await self.kernel.stop()
        self.kernel = None


async def run_exercise(ex: Exercise, answer: str, sandbox: Sandbox, limits: Limits, seed: int,
                       checks: list[Check], deadline: float | None = None, trusted: bool = False,
                       session: Session | None = None, reusable: bool = True) -> ExerciseRun:
    """Run one exercise: given cells, the answer, and each of `checks` (the kernel replaced after a death).

    With a session, a clean kernel left by the previous exercise is reused (reset first); without one, a fresh
    kernel is started and stopped at the end. reusable=False: never hand this exercise's kernel on."""
    run = ExerciseRun(ex.id)
    started = time.monotonic()
    own = session is None
    session = session or Session(sandbox, ex.modules)
    modules = list(dict.fromkeys(session.modules + ex.modules))

    def left() -> float:
        return float("inf") if deadline is None else deadline - time.monotonic()

    async def fresh(reuse: bool) -> str:
        """A kernel with everything before the checks run; '' or why it failed."""
        nonlocal reused
        kernel = session.kernel
        steps: list[tuple[str, str]] = []
        reused = bool(reuse and kernel is not None and kernel.alive)
        if reused:
            steps.append(("reset", RESET))
        else:
            await session.close()
            kernel = session.kernel = Kernel(sandbox)
            session.kernels_started += 1
            try:
                await kernel.start()
            except asyncio.CancelledError:
                await session.close()
                raise
            except Exception as exc:
                await session.close()
                return f"the kernel did not start ({type(exc).__name__}: {str(exc)[:200]})"
            steps.append(("preamble", preamble(modules, str(kernel.tripwire_path))))
        steps += [("set-up", s) for s in ex.setup] + [("context", s) for s in ex.context] + [("baseline", baseline(given_names))]
        for what, source in steps:
            result = await kernel.run(source, limits.given)
            if result.kind != "ok":
                return f"the course's {what} cell did not run ({result.kind} {result.ename}: {result.evalue[:200]})"
            if what == "preamble":
                with contextlib.suppress(OSError):
                    kernel.tripwire_path.unlink()  # the kernel holds its end open; nothing else may open the pipe now
                if not any(r.get("installed") for r in kernel.tripwire()):
                    return "the grader's tripwire did not start in the kernel"
        if left() <= 0:
            return "budget"
        told = await kernel.run(answer_cell(answer), limits.grader_cell)
        if told.kind != "ok":
            return f"the grader's cell before the answer did not run ({told.kind} {told.ename})"
        result = await kernel.run(answer, min(limits.for_answer(ex.id), left()))
        if run.answer is None or run.answer.kind == "ok":
            run.answer = result
        answer_flags.extend(f"while the answer ran: {f}" for f in _tripped(kernel.tripwire()))
        return ""

    clean = reused = False
    answer_flags: list[str] = []
    check_names, given_names = exercise_names(tuple(c.source for c in ex.checks), tuple(ex.setup) + tuple(ex.context))
    try:
        why = await fresh(reuse=True)
        if why and reused and why != "budget":
            run.restarts += 1
            why = await fresh(reuse=False)  # a reused kernel that would not reset: one fresh try
        if why:
            run.problem = why
            return run
        for check in checks:
            if run.answer is not None and run.answer.kind in ("timeout", "dead"):  # every check would meet it again
                run.checks[check.id] = CheckRun(check.id, run.answer.kind)
                continue
            kernel = session.kernel
            if kernel is None or not kernel.alive:
                run.restarts += 1
                why = await fresh(reuse=False)
                if why:
                    run.checks[check.id] = CheckRun(check.id, "budget" if why == "budget" else "dead",
                                                    problem=why if why != "budget" else "")
                    continue
                kernel = session.kernel
            if left() <= 0:
                run.checks[check.id] = CheckRun(check.id, "budget")
                continue
            head = await kernel.run(header(check.id, seed, check_names), min(limits.grader_cell, left()))
            if head.kind != "ok":
                run.checks[check.id] = CheckRun(check.id, head.kind if head.kind in ("timeout", "dead") else "raised",
                                                head.ename, head.evalue,
                                                problem="the grader's header cell did not run: the kernel was changed")
                continue
            early = kernel.tripwire()  # what came through the pipe during the header: flags only
            body = await kernel.run(check.source, min(limits.for_check(check.id), left()))
            result = CheckRun(check.id, "ran" if body.kind == "ok" else body.kind, body.ename, body.evalue,
                              seconds=body.seconds)
            if body.kind in ("timeout", "dead"):
                run.checks[check.id] = result
                continue
            during = kernel.tripwire()  # the check's observations: only what came while the check cell ran counts
            key = secrets.token_hex(32)
            foot = await kernel.run(footer(key), min(limits.grader_cell, left()))
            after = kernel.tripwire()
            records = early + during + after
            late = [r for r in early + after if "obs" in r]
            if foot.kind in ("timeout", "dead"):
                result.kind = foot.kind
                result.problem = "the kernel stopped answering after this check (something the answer armed?)"
            elif foot.kind != "ok":
                result.problem = f"the grader's footer cell did not run ({foot.kind} {foot.ename}): the kernel was changed"
            else:
                result.obs, result.hints, result.flags, result.problem, result.restored = verify(foot.outputs, key,
                                                                                                 check.id)
                if result.obs is not None:  # what counts is what left the kernel as the check recorded it
                    sent, sent_hints = _sent_observations(during, check.id)
                    result.obs_counts = _observation_counts(during, check.id)
                    if late:
                        result.flags.append(f"{len(late)} observation(s) came through the tripwire's pipe while no "
                                            "check cell ran (sent by something the answer armed); they do not count")
                    if sent != result.obs:
                        result.flags.append("the observations the footer signed differ from those the check recorded "
                                            "as it ran (changed inside the kernel); the recorded ones count")
                    result.obs, result.hints = sent, sent_hints
                    result.said = _sent_messages(during, check.id)
                sent_flags = [r["end_flags"] for r in after if r.get("check") == check.id
                              and isinstance(r.get("end_flags"), list)]
                if result.obs is not None:  # the footer's flags as the pipe carried them count, whatever the payload says
                    if not sent_flags:
                        result.flags.append("the footer's review flags did not come through the tripwire's pipe (the "
                                            "kernel's grading code was changed or the pipe cut)")
                    result.flags = list(dict.fromkeys(result.flags + [f for fs in sent_flags for f in fs
                                                                      if isinstance(f, str)]))
                marks = [r for r in early + during + after if "mark" in r]
                if marks != [{"mark": check.id, "n": kernel.marks + 1}]:
                    result.flags.append("the grader's footer did not run as written: its mark did not come through "
                                        "the tripwire's pipe (the kernel's grading code was changed or the pipe cut)")
                kernel.marks += len(marks)
            if result.obs is not None:
                result.flags = answer_flags + _tripped(records) + result.flags
            run.checks[check.id] = result
        clean = (reusable and not run.problem and run.restarts == 0 and run.answer is not None
                 and run.answer.kind in ("ok", "raised")
                 and all(c.kind in ("ran", "raised") and not c.flags and not c.problem for c in run.checks.values()))
    finally:
        if own or not clean:
            await session.close()
        run.seconds = time.monotonic() - started
    return run
