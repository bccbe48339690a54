"""The rooms of graphcourse depend one way: no module imports from a room above its own.

Order, bottom to top: ``errors`` and ``core`` (paths, the exercise format, recorded data, the
child-process runner), then ``gpulib``, ``lessons``, ``grading``, ``authoring``. ``toygraph``
needs the standard library alone. Every import is read with ``ast`` (function-level ones too),
so a lazy ``from ..lessons import x`` inside a function counts like one at the top.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RANK = {"errors": 0, "core": 0, "gpulib": 1, "lessons": 2, "grading": 3, "authoring": 4}


def _room(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "graphcourse":
        return None
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(path: Path, root: Path = ROOT) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in `path`, relative ones resolved."""
    package = ".".join(path.relative_to(root).with_suffix("").parts[:-1])
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.append((node.lineno, mod))
            if not node.module:  # from . import x, from .. import lessons
                out += [(node.lineno, f"{mod}.{a.name}") for a in node.names]
    return out


def upward_imports(root: Path = ROOT) -> list[str]:
    found = []
    for path in sorted((root / "graphcourse").rglob("*.py")):
        own = _room(".".join(path.relative_to(root).with_suffix("").parts))
        if own not in RANK:
            continue
        for line, mod in _imports(path, root):
            target = _room(mod)
            if target in RANK and RANK[target] > RANK[own]:
                found.append(f"{path.relative_to(root)}:{line} ({own}) imports {mod} ({target}, a room above)")
    return found


def test_no_room_imports_from_a_room_above_it() -> None:
    assert upward_imports() == []


def test_every_room_has_a_rank() -> None:
    rooms = {p.name for p in (ROOT / "graphcourse").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    rooms |= {p.stem for p in (ROOT / "graphcourse").glob("*.py") if p.stem != "__init__"}
    assert rooms <= set(RANK), f"a new room needs its place in RANK: {sorted(rooms - set(RANK))}"


def test_the_check_catches_an_upward_import(tmp_path: Path) -> None:
    pkg = tmp_path / "graphcourse"
    for room in ("core", "lessons"):
        (pkg / room).mkdir(parents=True)
        (pkg / room / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "core" / "bad.py").write_text("def f():\n    from ..lessons import widgets\n")
    (pkg / "lessons" / "fine.py").write_text("from ..core import paths\n")
    assert upward_imports(tmp_path) == ["graphcourse/core/bad.py:2 (core) imports graphcourse.lessons (lessons, a room above)"]


def test_toygraph_needs_the_standard_library_alone() -> None:
    allowed = set(sys.stdlib_module_names) | {"toygraph", "__future__"}
    bad = [f"{p.name}:{line} imports {mod}" for p in sorted((ROOT / "toygraph").glob("*.py"))
           for line, mod in _imports(p) if mod and mod.split(".")[0] not in allowed]
    assert bad == []


@pytest.mark.parametrize("module", ["graphcourse.core.paths", "graphcourse.core.exercise_format",
                                    "graphcourse.core.child", "graphcourse.core.recorded"])
def test_the_bottom_layer_imports_without_torch(module: str) -> None:
    import subprocess

    code = f"import sys, {module}; assert 'torch' not in sys.modules and 'nbformat' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
