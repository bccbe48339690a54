"""Where the course's folders live, computed once here instead of in every module.

The package sits at the top of the course folder (``graphcourse/`` beside ``notebooks/``), in
the authored repository and in a built release alike, so every path is relative to that folder.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The course folder: the repository, or a release built by ``make release``."""

NOTEBOOKS_DIR = ROOT / "notebooks"
SOLUTIONS_DIR = ROOT / "solutions"
EXERCISES_DIR = ROOT / "exercises"
MY_WORK_DIR = ROOT / "my-work"
DATA_DIR = ROOT / "data"
DOCS_DIR = ROOT / "docs"
BUILD_DIR = ROOT / "build"

REFERENCE_FILE = "gpu_reference.json"
"""The benchmark's recorded figures (``python -m graphcourse.gpulib.bench``), in :data:`DATA_DIR`."""

DECODE_PATHS_FILE = "decode_paths.json"
"""The decode-path benchmark's figures (``python -m graphcourse.gpulib.bench_decode_paths``), in :data:`DATA_DIR`."""


def reference_path() -> Path:
    """``data/gpu_reference.json`` of this course folder."""
    return DATA_DIR / REFERENCE_FILE


def decode_paths_path() -> Path:
    """``data/decode_paths.json`` of this course folder."""
    return DATA_DIR / DECODE_PATHS_FILE
