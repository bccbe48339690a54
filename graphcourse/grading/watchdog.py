"""Clean up after a grader that was killed outright (SIGKILL): `python -m graphcourse.grading.watchdog DIR UID...`.

The grader starts this process with a pipe on its stdin and never writes to it. When the grader ends, however it
ends, the pipe closes: the watchdog then kills any process still running with one of the run's kernel uids (the
sandboxes die with the grader already; this is the second line) and removes the run's scratch folder, then exits.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
from pathlib import Path

from .sandbox import GRADER_UID_BASE, unmount_under


def _kill_uids(uids: set[int]) -> None:
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if d.stat().st_uid in uids:
                os.kill(int(d.name), signal.SIGKILL)
        except OSError:
            pass


def main(argv: list[str]) -> int:
    scratch = Path(argv[0])
    uids = {int(u) for u in argv[1:] if GRADER_UID_BASE < int(u) < GRADER_UID_BASE + 1000}
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C reaches the whole process group: outlive the grader
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        while sys.stdin.buffer.read(65536):
            pass
    except OSError:
        pass
    _kill_uids(uids)
    if scratch.name.startswith("graphcourse-grade-"):
        unmount_under(scratch)
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
