"""tools/relayout.py: the one table of where graphcourse's modules live, and the rewrite of references to them."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("relayout", ROOT / "tools" / "relayout.py")
relayout = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(relayout)


def test_every_module_is_in_its_room_and_none_is_left_flat():
    for old, new in relayout.MOVES.items():
        assert not (ROOT / relayout.old_file(old)).exists(), f"{old} is still flat: run python tools/relayout.py"
        assert (ROOT / relayout.new_file(new)).is_file(), new
    flat = sorted(p.name for p in (ROOT / "graphcourse").glob("*.py"))
    assert flat == ["__init__.py", "errors.py"]


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs a git checkout")
def test_nothing_in_the_repository_names_a_module_by_its_old_place():
    run = subprocess.run([sys.executable, str(ROOT / "tools" / "relayout.py"), "--dry-run"], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    assert "nothing to change" in run.stdout, "old module names found: run python tools/relayout.py\n" + run.stdout


def test_imports_are_rewritten_absolute_relative_and_by_package():
    src = ("from graphcourse.gpu import TinyGPT\n"
           "import graphcourse.reference as reference\n"
           "from graphcourse import gpu, plots as p, errors  # noqa\n"
           "from .errors import GraphCourseError\n"
           "from .bench import bench_chain\n"
           "from .grade import main\n")
    out = relayout.rewrite_text(src, "py", "graphcourse", "graphcourse.lessons", moving=True)
    assert out.splitlines() == [
        "from graphcourse.gpulib.graphs import TinyGPT",
        "import graphcourse.lessons.reference as reference",
        "from graphcourse.gpulib import graphs as gpu",
        "from graphcourse.lessons import plots as p",
        "from graphcourse import errors  # noqa",
        "from ..errors import GraphCourseError",
        "from ..gpulib.bench import bench_chain",
        "from ..grading.cli import main",
    ]
    assert relayout.rewrite_text(out, "py", "graphcourse.lessons", "graphcourse.lessons") == out  # idempotent


def test_a_module_already_in_a_room_with_flat_relative_imports_is_mended():
    src = "from .errors import GraphCourseError\nfrom .reference import load_reference\nfrom . import gpu\n"
    out = relayout.rewrite_imports(src, "graphcourse.gpulib", "graphcourse.gpulib",
                                   exists=lambda m: m in {"graphcourse.errors", "graphcourse.lessons.reference"})
    assert out == "from ..errors import GraphCourseError\nfrom ..lessons.reference import load_reference\n" \
                  "from . import graphs as gpu\n"


def test_commands_strings_and_paths_are_rewritten_but_a_recorded_command_is_not():
    text = ('python -m graphcourse.grade class --report r.json; python -m graphcourse.bench_decode_paths\n'
            'mock.patch("graphcourse.gpu.capture"); mock.patch("graphcourse.grade.main")\n'
            'see graphcourse/gpu.py and graphcourse/grade.py; graphcourse.grading stays\n'
            "    'command': 'python -m graphcourse.bench --out data/gpu_reference.json',\n")
    out = relayout.rewrite_text(text, "text")
    assert out.splitlines() == [
        "python -m graphcourse.grading class --report r.json; python -m graphcourse.gpulib.bench_decode_paths",
        'mock.patch("graphcourse.gpulib.graphs.capture"); mock.patch("graphcourse.grading.cli.main")',
        "see graphcourse/gpulib/graphs.py and graphcourse/grading/__main__.py; graphcourse.grading stays",
        "    'command': 'python -m graphcourse.bench --out data/gpu_reference.json',",
    ]


def test_a_long_import_is_wrapped_to_the_lessons_width():
    out = relayout.rewrite_text("from graphcourse.gpu import EagerStep, GPTConfig, TinyGPT, as_device_position, "
                                "decode_runner\n", "py")
    assert all(len(line) <= 100 for line in out.splitlines()) and out.count("\n") == 2
    assert out.replace("\n", " ").split() == ("from graphcourse.gpulib.graphs import (EagerStep, GPTConfig, TinyGPT, "
                                              "as_device_position, decode_runner)").split()


def test_a_notebook_changes_only_in_its_sources():
    nb = {"cells": [{"cell_type": "code", "execution_count": 1, "id": "a1", "metadata": {"tags": ["x"]},
                     "outputs": [{"name": "stdout", "output_type": "stream",
                                  "text": ["ran python -m graphcourse.bench\n"]}],
                     "source": ["from graphcourse.reference import load_reference\n", "load_reference()"]}],
          "metadata": {"graphcourse": {"generated_by": "graphcourse.build_exercises"}},
          "nbformat": 4, "nbformat_minor": 5}
    raw = json.dumps(nb, sort_keys=True, indent=1, ensure_ascii=False) + "\n"
    new, why = relayout.rewrite_notebook(raw)
    assert why is None
    got = json.loads(new)
    cell = got["cells"][0]
    assert cell["source"] == ["from graphcourse.lessons.reference import load_reference\n", "load_reference()"]
    assert cell["outputs"] == nb["cells"][0]["outputs"] and cell["id"] == "a1"  # what ran stays as it ran
    assert got["metadata"]["graphcourse"]["generated_by"] == "graphcourse.authoring.build_exercises"
    assert new == raw.replace("graphcourse.reference", "graphcourse.lessons.reference").replace(
        "graphcourse.build_exercises", "graphcourse.authoring.build_exercises")
