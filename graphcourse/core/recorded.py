"""Reading a benchmark's recorded JSON (written on a GPU, committed with the course): the one loader every reader uses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from ..errors import ReferenceDataError, ReferenceDataMissingError

__all__ = ["load_recorded", "recorded_or_why", "provenance_label"]


def load_recorded(file: Path, command: str) -> dict[str, Any]:
    """A recorded benchmark's JSON (written on a GPU by `command`); a clear error when missing or not the benchmark's."""
    if not file.is_file():
        raise ReferenceDataMissingError(
            f"no recorded GPU results at {file}: lessons on a machine without CUDA show figures from that file. "
            f"It is written on a GPU machine by `{command}` and committed with the course; "
            f"restore it with `git checkout -- data/{file.name}` or run the benchmark on a GPU."
        )
    try:
        data = json.loads(file.read_text())
    except json.JSONDecodeError as exc:
        raise ReferenceDataError(f"{file} is not valid JSON ({exc}): re-run `{command}` on a GPU.") from exc
    if not isinstance(data, dict) or "provenance" not in data:
        raise ReferenceDataError(
            f"{file} has no 'provenance' section, so it did not come from `{command}`: "
            f"recorded figures must say which GPU measured them."
        )
    return data


def recorded_or_why(file: Path, command: str, label: Callable[[dict[str, Any]], str]) -> tuple[dict[str, Any] | None, str]:
    """``(data, label(data))`` of a recorded benchmark's JSON, or ``(None, "not recorded yet: why")`` where it cannot
    be read: what a lesson shows on a machine without CUDA, or says it cannot show."""
    try:
        data = load_recorded(file, command)
    except (ReferenceDataError, ReferenceDataMissingError) as exc:
        return None, f"not recorded yet: {exc}"
    return data, label(data)


def provenance_label(data: dict[str, Any], versions: str) -> str:
    """The line that says where recorded figures come from: GPU, date, torch, `versions` (what else the benchmark
    depends on, e.g. "Triton 3.5"), driver and the command that measured them."""
    p = data["provenance"]
    return (f"recorded on {p.get('gpu_name')}, {str(p.get('date_utc'))[:10]}, torch {p.get('torch')}, "
            f"{versions}, driver {p.get('driver')} (`{p.get('command')}`)")
