"""How the course's commands end: one line on stderr that says what to do, never a traceback."""

from __future__ import annotations

import sys
from typing import Callable

from ..errors import GraphCourseError


def exit_status(body: Callable[[], object], name: str, errors: type[Exception] = GraphCourseError) -> int:
    """Run a command's `body`: 0 when it ends, 1 with ``name: message`` on stderr when it raises one of `errors`
    (the course's errors say what went wrong and how to fix it, so the message is all a user needs)."""
    try:
        body()
    except errors as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 1
    return 0
