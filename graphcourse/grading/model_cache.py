"""The model answers' run, kept between grader runs on one machine: grade a late hand-in without running them again.

Every grader run starts by running each exercise's model answer in the sandbox: its observations are what learners'
are compared with, and its timings set the time limits. For the same solutions, hidden inputs, course code, Python,
torch and machine, that run gives the same observations every time, so the grader keeps it: a file named by a
digest of all of those (:func:`key`), in ``~/.cache/graphcourse/model-runs/`` (``$XDG_CACHE_HOME`` is honoured;
``GRAPHCOURSE_MODEL_CACHE`` names another folder). A later run with the same digest reads it instead of running the
model answers again (about 15 s for the course's exercises on a 2-core machine; the run's report says
``model_answers: cached``). ``--fresh-model`` runs them anyway and replaces the kept run.

What the file holds decides marks, so it is kept only where no learner can write it:

* only a confined run (learners' kernels in bubblewrap, as unprivileged uids that see no home folder) reads or
  writes it; an unconfined run (``--allow-unconfined``, ``--own-work``) runs the model answers every time;
* its folder is the grader's own (mode 0700) and each file 0600; a file owned by someone else, or that others
  could write, is not read;
* a run whose model answer could not run, or failed its own checks, is not kept.

A change to anything in the digest (a solution's cell, the seed, a module of ``graphcourse/`` or ``toygraph/`` or a
table beside one, the torch version, the GPUs this machine has) names another file, so a stale run is never read.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import platform
import sys
from importlib import metadata
from pathlib import Path
from typing import Iterable

from .runner import CellRun, CheckRun, ExerciseRun

FORMAT = 1
"""Bumped when what a kept run holds changes shape (older files are then never read)."""


def folder() -> Path:
    """Where kept model runs live: GRAPHCOURSE_MODEL_CACHE, else $XDG_CACHE_HOME (~/.cache)/graphcourse/model-runs."""
    named = os.environ.get("GRAPHCOURSE_MODEL_CACHE")
    if named:
        return Path(named)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "graphcourse" / "model-runs"


CODE_SUFFIXES = (".py", ".toml", ".json")
"""What a kernel reads from graphcourse/ and toygraph/: their modules and the tables beside them (engine_facts.toml)."""


def _code_digest(course_root: Path) -> str:
    """One digest of the course code a kernel imports (graphcourse/ and toygraph/: CODE_SUFFIXES files)."""
    digest = hashlib.sha256()
    for package in ("graphcourse", "toygraph"):
        for path in sorted((course_root / package).rglob("*")):
            if "__pycache__" in path.parts or path.suffix not in CODE_SUFFIXES or not path.is_file():
                continue
            digest.update(path.relative_to(course_root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "absent"


def key(*, solutions_sha256: str, seed: int, exercises: Iterable[str], available: Iterable[str], devices: int,
        course_root: Path) -> str:
    """The digest that names a kept run: everything the model answers' observations and timings depend on."""
    parts = {"format": FORMAT, "solutions": solutions_sha256, "seed": seed, "exercises": list(exercises),
             "available": sorted(available), "devices": devices, "code": _code_digest(course_root),
             "python": sys.version, "torch": _version("torch"), "numpy": _version("numpy"),
             "machine": [platform.node(), platform.machine(), platform.platform(), os.cpu_count()]}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def _path(digest: str) -> Path:
    return folder() / f"{digest}.json"


def _exercise_run(data: dict) -> ExerciseRun:
    answer = data.get("answer")
    return ExerciseRun(exercise=data["exercise"], answer=CellRun(**answer) if answer is not None else None,
                       checks={k: CheckRun(**v) for k, v in data["checks"].items()},
                       problem=data.get("problem", ""), restarts=data.get("restarts", 0),
                       seconds=data.get("seconds", 0.0))


def load(digest: str) -> dict[str, ExerciseRun] | None:
    """The kept run named `digest`, or None (none kept, or a file this grader must not trust: see the docstring)."""
    path = _path(digest)
    try:
        st = path.lstat()
        if not path.is_file() or path.is_symlink() or st.st_uid != os.geteuid() or st.st_mode & 0o022:
            return None
        if path.parent.stat().st_uid != os.geteuid() or path.parent.stat().st_mode & 0o022:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("format") != FORMAT or data.get("key") != digest:
            return None
        return {ex_id: _exercise_run(run) for ex_id, run in data["runs"].items()}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def save(digest: str, runs: dict[str, ExerciseRun]) -> Path | None:
    """Keep `runs` under `digest` (atomically; folder 0700, file 0600); the path, or None where it cannot be kept."""
    path = _path(digest)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(path.parent, 0o700)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"format": FORMAT, "key": digest,
                       "runs": {ex_id: dataclasses.asdict(run) for ex_id, run in runs.items()}}, f)
        os.replace(tmp, path)
        return path
    except (OSError, TypeError, ValueError):
        return None
