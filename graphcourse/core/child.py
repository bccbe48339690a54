"""Run a snippet in a child Python and read back how it ended: the one helper lessons 03 and 06 share.

A failed CUDA-graph capture can leave the CUDA context unusable for the rest of the process,
so lessons never fail a capture in their own kernel: :func:`run_snippet` runs the code with
``sys.executable -c`` under a timeout and returns a :class:`ChildResult` with the exit code,
the output and the exception line of each error, file paths shortened to file names.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from typing import Any

__all__ = ["CAPTURE_ERROR_MARKERS", "ChildResult", "RESULT", "error_lines", "result_line", "run_snippet"]

CAPTURE_ERROR_MARKERS = (
    "operation not permitted when stream is capturing",
    "operation failed due to a previous error during capture",
)
"""What CUDA says about a sync during capture: the refused call, then the capture it invalidated (cudaErrorStreamCaptureInvalidated)."""

_TRACEBACK = "Traceback (most recent call last):"
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Warning|Interrupt|Exit)(?::\s.*)?$")
_PATH = re.compile(r"(?<![\w.])(?:[A-Za-z]:)?(?:[\\/][\w.+@~-]+){2,}[\\/]([\w.+@-]+)")


def _strip_paths(line: str) -> str:
    """The line with every absolute file path shortened to its file name (no path of this machine in a lesson)."""
    return _PATH.sub(r"\1", line)


def error_lines(stderr: str) -> list[str]:
    """The exception line of each error in `stderr`, in order, each once, paths shortened.

    An exception line is an unindented ``Name: message`` line (``Name`` ending in Error,
    Exception, ...), or the first unindented line after a ``Traceback`` header; only its first
    line is kept (torch appends hints such as CUDA_LAUNCH_BLOCKING on the lines after it).
    Without any, the last non-empty line of stderr stands in.
    """
    lines = stderr.splitlines()
    found: list[str] = []

    def add(line: str) -> None:
        line = _strip_paths(line.strip())
        if line not in found:
            found.append(line)

    after_header = False
    for line in lines:
        if line.strip() == _TRACEBACK:
            after_header = True
            continue
        if not line.strip() or line[0].isspace():
            continue
        if _EXCEPTION_LINE.match(line.strip()) or after_header:
            add(line)
        after_header = False
    if not found:
        rest = [ln for ln in lines if ln.strip()]
        if rest:
            add(rest[-1])
    return found


@dataclass(frozen=True)
class ChildResult:
    """What a snippet did in its child process: exit code (None on timeout), its output and its error lines."""

    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool = False
    timeout_s: float = 0.0

    @property
    def ok(self) -> bool:
        """True when the child exited with status 0."""
        return self.returncode == 0

    @property
    def errors(self) -> list[str]:
        """Every exception line of the child's tracebacks, first raised first."""
        if self.timed_out:
            return [f"TimeoutError: the child ran past {self.timeout_s:g} s and was killed"]
        return error_lines(self.stderr) if self.returncode != 0 else []

    @property
    def error(self) -> str:
        """The last meaningful error line ('' when the child succeeded)."""
        errs = self.errors
        return errs[-1] if errs else ""

    @property
    def capture_refused(self) -> bool:
        """True when the child failed with one of CUDA's capture errors."""
        return not self.ok and any(m in e for e in self.errors for m in CAPTURE_ERROR_MARKERS)

    def summary(self) -> str:
        """Readable lines: the child's own printed lines, then its exit and each error of the chain."""
        out = [f"  child printed: {_strip_paths(ln)}" for ln in self.stdout.splitlines() if ln.strip()]
        if self.timed_out:
            out.append(f"  timed out after {self.timeout_s:g} s")
        elif self.returncode is not None and self.returncode < 0:
            out.append(f"  killed by signal {-self.returncode}")
        else:
            out.append(f"  exit code {self.returncode}")
        for k, err in enumerate(self.errors):
            out.append(("  error: " if k == 0 else "  then:  ") + err)
        return "\n".join(out)


def run_snippet(code: str, timeout_s: float = 120.0, env: dict[str, str] | None = None) -> ChildResult:
    """Run Python `code` in a fresh child interpreter (``sys.executable -c``) and return what happened, never raising.

    `env` adds (or overrides) environment variables for the child only.
    """
    env = dict(os.environ, PYTHONUNBUFFERED="1", **(env or {}))
    try:
        done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                              timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired as exc:
        def text(b: Any) -> str:
            return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")
        return ChildResult(None, text(exc.stdout), text(exc.stderr), True, timeout_s)
    return ChildResult(done.returncode, done.stdout, done.stderr, False, timeout_s)


RESULT = "RESULT "
"""Prefix of the one JSON line a child snippet prints: what it found, for the parent to read."""


def result_line(stdout: str) -> dict[str, Any] | None:
    """The JSON a child printed after ``RESULT `` (its last such line), or None if it printed none."""
    found = None
    for line in stdout.splitlines():
        if line.startswith(RESULT):
            found = json.loads(line[len(RESULT):])
    return found
