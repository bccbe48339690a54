"""Results recorded on a GPU by ``python -m graphcourse.gpulib.bench``, for lessons running on a machine without CUDA.

Reading them needs no torch: a CPU-only lesson loads the JSON, labels it with where and when it
was measured (:func:`recorded_label`) and plots or prints it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import ReferenceDataError, ReferenceDataMissingError

REFERENCE_FILE = "gpu_reference.json"


def default_reference_path() -> Path:
    """data/gpu_reference.json at the repository root (found from this package, not from the working directory)."""
    return Path(__file__).resolve().parents[2] / "data" / REFERENCE_FILE


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


def load_reference(path: str | Path | None = None) -> dict[str, Any]:
    """The recorded benchmark as a dictionary; a clear error when the file is missing or is not the benchmark's JSON."""
    file = Path(path) if path is not None else default_reference_path()
    return load_recorded(file, f"python -m graphcourse.gpulib.bench --out {file}")


def section(name: str, data: dict[str, Any] | None = None) -> Any:
    """One section of the recorded results ('chain', 'decode', 'bucketed', 'item_sync', 'costs', 'method'), with a clear error if absent.

    From schema 2 on, every measured figure ``key`` comes with ``key_min`` and ``key_max``: the
    range over interleaved repeats, of which ``key`` is the median (``data['method']`` says how).
    """
    data = load_reference() if data is None else data
    if name not in data:
        known = ", ".join(k for k in data if k != "provenance")
        raise ReferenceDataError(
            f"the recorded results have no section {name!r} (they have: {known}); "
            f"they may come from an older benchmark: re-run `python -m graphcourse.gpulib.bench` on a GPU."
        )
    return data[name]


def recorded_label(data: dict[str, Any] | None = None) -> str:
    """One line naming where and when the figures were measured, e.g. 'recorded on NVIDIA H200, 2026-11-30, torch 2.11.0+cu130'."""
    p = (load_reference() if data is None else data)["provenance"]
    date = str(p.get("date_utc", "unknown date"))[:10]
    return f"recorded on {p.get('gpu_name', 'an unnamed GPU')}, {date}, torch {p.get('torch', '?')}"
