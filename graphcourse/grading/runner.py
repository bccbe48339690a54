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

import nbformat
from jupyter_client.kernelspec import KernelSpec
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError

from .assignment import Check, Exercise
from .observe import MIME
from .sandbox import Sandbox

MAX_STREAM = 4000  # characters of printed output kept per cell (the rest is dropped as it arrives)
MAX_OUTPUTS = 50
MAX_PAYLOAD = 2_000_000
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
    flags: list = field(default_factory=list)
    problem: str = ""  # why the observations were refused
    seconds: float = 0.0


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


class _KernelManager(AsyncKernelManager):
    """Writes the connection file readable by the sandbox's uid (and nobody else)."""

    sandbox_uid: int | None = None

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

    async def start(self) -> None:
        self.sandbox.prepare()
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
        self.sandbox.sweep()
        self.sandbox.remove()


def _limit_message_size(kc) -> None:
    """A kernel that sends one enormous message is disconnected instead of filling the grader's memory."""
    try:
        import zmq

        for name in ("iopub_channel", "shell_channel", "stdin_channel", "control_channel"):
            chan = getattr(kc, name, None)
            sock = getattr(chan, "socket", None)
            if sock is not None:
                sock.setsockopt(zmq.MAXMSGSIZE, 64 * 1024 * 1024)
    except Exception:
        pass


def preamble(modules: list[str]) -> str:
    lines = ["import importlib as _gc_importlib", "import graphcourse.grading.observe as _gc_observe",
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
             "del _gc_importlib, _gc_m, _gc_observe"]
    return "\n".join(lines)


BASELINE = "import graphcourse.grading.observe as _gc_observe\n_gc_observe._baseline()\ndel _gc_observe"


def header(check: str, seed: int) -> str:
    return (f"from graphcourse.grading.observe import _begin as _gc_begin\n_gc_begin({check!r}, {int(seed)})\n"
            "del _gc_begin")


def footer(key: str) -> str:
    return f"from graphcourse.grading.observe import _end as _gc_end\n_gc_end({key!r})\ndel _gc_end"


def verify(outputs: list, key: str, check: str) -> tuple[dict | None, dict, list[str], str]:
    """(observations, hints, flags, problem) from a footer's outputs: only a payload signed with key counts."""
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
                              "run as written)" if not extra else "observations came back unsigned or wrongly signed")
    try:
        payload = json.loads(valid)
    except (ValueError, RecursionError):
        return None, {}, [], "the observations could not be read"
    if not isinstance(payload, dict) or payload.get("check") != check or not isinstance(payload.get("obs"), dict):
        return None, {}, [], "the observations belong to another check"
    flags = [str(f)[:200] for f in payload.get("flags") or [] if isinstance(f, str)]
    if extra:
        flags.append(f"{extra} extra observation output(s) appeared beside the grader's (forged?)")
    hints = payload.get("hints") if isinstance(payload.get("hints"), dict) else {}
    return payload["obs"], hints, flags, ""


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
            steps.append(("preamble", preamble(modules)))
        steps += [("set-up", s) for s in ex.setup] + [("context", s) for s in ex.context] + [("baseline", BASELINE)]
        for what, source in steps:
            result = await kernel.run(source, limits.given)
            if result.kind != "ok":
                return f"the course's {what} cell did not run ({result.kind} {result.ename}: {result.evalue[:200]})"
        if left() <= 0:
            return "budget"
        result = await kernel.run(answer, min(limits.for_answer(ex.id), left()))
        if run.answer is None or run.answer.kind == "ok":
            run.answer = result
        return ""

    clean = reused = False
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
            head = await kernel.run(header(check.id, seed), min(limits.grader_cell, left()))
            if head.kind != "ok":
                run.checks[check.id] = CheckRun(check.id, head.kind if head.kind in ("timeout", "dead") else "raised",
                                                head.ename, head.evalue,
                                                problem="the grader's header cell did not run: the kernel was changed")
                continue
            body = await kernel.run(check.source, min(limits.for_check(check.id), left()))
            result = CheckRun(check.id, "ran" if body.kind == "ok" else body.kind, body.ename, body.evalue,
                              seconds=body.seconds)
            if body.kind in ("timeout", "dead"):
                run.checks[check.id] = result
                continue
            key = secrets.token_hex(32)
            foot = await kernel.run(footer(key), min(limits.grader_cell, left()))
            if foot.kind in ("timeout", "dead"):
                result.kind = foot.kind
                result.problem = "the kernel stopped answering after this check (something the answer armed?)"
            elif foot.kind != "ok":
                result.problem = f"the grader's footer cell did not run ({foot.kind} {foot.ename}): the kernel was changed"
            else:
                result.obs, result.hints, result.flags, result.problem = verify(foot.outputs, key, check.id)
            run.checks[check.id] = result
        clean = (reusable and not run.problem and run.restarts == 0 and run.answer is not None
                 and run.answer.kind in ("ok", "raised")
                 and all(c.kind in ("ran", "raised") and not c.flags and not c.problem for c in run.checks.values()))
    finally:
        if own or not clean:
            await session.close()
        run.seconds = time.monotonic() - started
    return run
