#!/usr/bin/env python3
"""Move graphcourse's flat modules into their rooms and rewrite every reference to them.

    python tools/relayout.py            # move the modules (git mv) and rewrite references; prints what changed
    python tools/relayout.py --dry-run  # print what it would change, change nothing

Run it from anywhere inside a checkout of the course (any branch: it finds what is there). It is
idempotent: a second run finds nothing to move or rewrite and prints "nothing to change".

Rooms (see README.md, "Where things live"): graphcourse/lessons/ (what lessons' cells call),
graphcourse/gpulib/ (the GPU library and the GPU benchmarks), graphcourse/authoring/ (what builds
exercises, navigation, slides, the instructor kit, the site, JupyterLite), graphcourse/grading/ (the
grader). graphcourse/__init__.py and graphcourse/errors.py stay at the top: every room shares them.

What it does, with MOVES below as the one table:

1. ``git mv graphcourse/OLD.py graphcourse/ROOM/NEW.py`` for each old module that still exists (a plain
   rename when the file is not tracked yet); a moved module's ``Path(__file__)...parents[1]`` (the
   checkout's root) becomes ``parents[2]``.
2. Rewrites references in tracked text files (.py, .ipynb cell sources, .md, .toml, .cfg, .yml, .txt,
   .sh, .json, Makefile, .ci/run):
   - Python imports, absolute (``from graphcourse.gpu import x``, ``import graphcourse.gpu as g``,
     ``from graphcourse import gpu, plots``) and relative inside graphcourse (``from .errors import``,
     ``from ..build_exercises import``, ``from . import reports``), re-relativised from the module's new place;
   - dotted names anywhere (``python -m graphcourse.bench``, ``mock.patch("graphcourse.gpu.capture")``,
     ``:mod:`graphcourse.reference```, lists of module names) and file paths (``graphcourse/gpu.py``).
   Notebooks: only cell sources and module names in metadata change; outputs and ids stay byte-identical.
   Not touched: .git, .venv, node_modules, build outputs, this script and its test, data/*.json (recorded benchmark
   files: re-record them with the new commands), and a literal ``"command": "..."`` anywhere (a recorded
   run's provenance, e.g. the copy in toygraph/prices.py: what ran is history).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

PKG = "graphcourse"

MOVES: dict[str, str] = {
    # lessons/: what the lessons' cells call to explain, compare, draw and read recorded figures
    "graphcourse.child": "graphcourse.lessons.child",
    "graphcourse.compare": "graphcourse.lessons.compare",
    "graphcourse.decode": "graphcourse.lessons.decode",
    "graphcourse.decode_paths": "graphcourse.lessons.decode_paths",
    "graphcourse.mistakes": "graphcourse.lessons.mistakes",
    "graphcourse.palette": "graphcourse.lessons.palette",
    "graphcourse.plots": "graphcourse.lessons.plots",
    "graphcourse.reference": "graphcourse.lessons.reference",
    "graphcourse.teaching": "graphcourse.lessons.teaching",
    "graphcourse.widgets": "graphcourse.lessons.widgets",
    # gpulib/: real CUDA graphs with torch, and the benchmarks that record the course's GPU figures
    "graphcourse.gpu": "graphcourse.gpulib.graphs",
    "graphcourse.compiled": "graphcourse.gpulib.compiled",
    "graphcourse.device_loop": "graphcourse.gpulib.device_loop",
    "graphcourse.real_trace": "graphcourse.gpulib.real_trace",
    "graphcourse.bench": "graphcourse.gpulib.bench",
    "graphcourse.bench_decode_paths": "graphcourse.gpulib.bench_decode_paths",
    # authoring/: what turns the sources into what learners and instructors use
    "graphcourse.build_exercises": "graphcourse.authoring.build_exercises",
    "graphcourse.selfcheck": "graphcourse.authoring.selfcheck",
    "graphcourse.nav": "graphcourse.authoring.nav",
    "graphcourse.slides": "graphcourse.authoring.slides",
    "graphcourse.instructor": "graphcourse.authoring.instructor",
    "graphcourse.site": "graphcourse.authoring.site",
    "graphcourse.lite": "graphcourse.authoring.lite",
    "graphcourse.toy_prices": "graphcourse.authoring.toy_prices",
    "graphcourse.execute": "graphcourse.authoring.execute",
    "graphcourse.mycopy": "graphcourse.authoring.mycopy",
    # grading/: the grader; `python -m graphcourse.grading` runs it (graphcourse/grading/__main__.py)
    "graphcourse.collect": "graphcourse.grading.collect",
    "graphcourse.grade": "graphcourse.grading",
}
"""Old module -> new module. A new module that is a package (graphcourse.grading) is run with -m
through its __main__.py, where the old module's file goes."""

FROM_IMPORTS = {"graphcourse.grade": "graphcourse.grading.cli"}
"""Where ``from OLD import name`` finds its names when that differs from MOVES (the grader's main)."""

PACKAGES = {"graphcourse.grading"}
"""New names in MOVES that are packages (their file is NEW/__main__.py)."""

SELF = {"tools/relayout.py", "tests/test_relayout.py"}
"""This script and its test: they name the old modules on purpose."""

TEXT_SUFFIXES = {".py", ".ipynb", ".md", ".toml", ".cfg", ".ini", ".yml", ".yaml", ".txt", ".rst", ".sh",
                 ".json", ".in", ".html", ".css", ".js"}
TEXT_NAMES = {"Makefile", "run", "Dockerfile", ".gitignore"}
SKIP_PARTS = {".git", ".venv", "venv", "node_modules", "build", "dist", "__pycache__", ".ipynb_checkpoints",
              "_build", "site-packages"}


def new_file(module: str) -> str:
    """The file path of a module's new name (graphcourse.gpulib.graphs -> graphcourse/gpulib/graphs.py)."""
    path = module.replace(".", "/")
    return path + "/__main__.py" if module in PACKAGES else path + ".py"


def old_file(module: str) -> str:
    return module.replace(".", "/") + ".py"


# --- dotted names and paths -----------------------------------------------------------------------------------
_OLD_LEAVES = sorted((m.split(".", 1)[1] for m in MOVES), key=len, reverse=True)
DOTTED = re.compile(r"(?<![\w.])graphcourse\.(" + "|".join(_OLD_LEAVES) + r")(?![\w])")
PATHS = re.compile(r"(?<![\w.-])graphcourse/(" + "|".join(_OLD_LEAVES) + r")(\.py)?(?![\w/-])")


OLD_ATTRS = {"graphcourse.grade.main": "graphcourse.grading.cli.main",
             "graphcourse.grade.observe": "graphcourse.grading.observe.observe",
             "graphcourse.grade.inputs": "graphcourse.grading.observe.inputs"}
"""Names the old grade.py re-exported, by where they are defined (``mock.patch("graphcourse.grade.main")``)."""
ATTRS = re.compile(r"(?<![\w.])(" + "|".join(re.escape(a) for a in OLD_ATTRS) + r")(?!\w)")


def rewrite_dotted(text: str) -> str:
    text = ATTRS.sub(lambda m: OLD_ATTRS[m.group(1)], text)
    return DOTTED.sub(lambda m: MOVES["graphcourse." + m.group(1)], text)


def rewrite_paths(text: str) -> str:
    def one(m: re.Match) -> str:
        new = MOVES["graphcourse." + m.group(1)]
        return new_file(new) if m.group(2) else new.replace(".", "/")
    return PATHS.sub(one, text)


# --- Python imports --------------------------------------------------------------------------------------------
_NAME = r"(?:[\w*]+(?:[ \t]+as[ \t]+\w+)?)"
FROM_STMT = re.compile(r"(?P<indent>^[ \t]*)?(?<![\w.])from[ \t]+(?P<mod>\.+[\w.]*|graphcourse(?:\.[\w.]+)?)[ \t]+import[ \t]+"
                       r"(?P<names>\([^)]*\)|" + _NAME + r"(?:[ \t]*,[ \t]*" + _NAME + r")*)", re.M)


def package_of(path: str) -> str:
    """The package a .py file at `path` (relative to the root) belongs to: graphcourse/lessons/x.py -> graphcourse.lessons."""
    return ".".join(Path(path).parent.parts)


def absolute(mod: str, package: str) -> str | None:
    if not mod.startswith("."):
        return mod
    level = len(mod) - len(mod.lstrip("."))
    parts = package.split(".") if package else []
    if level - 1 > len(parts):
        return None
    base = parts[: len(parts) - (level - 1)]
    rest = mod[level:]
    return ".".join(base + ([rest] if rest else []))


def relative(target: str, package: str) -> str:
    t, p = target.split("."), package.split(".")
    common = 0
    while common < min(len(t), len(p)) and t[common] == p[common]:
        common += 1
    return "." * (len(p) - common + 1) + ".".join(t[common:])


ROOMS = sorted({m.rsplit(".", 1)[0] for m in MOVES.values() if m not in PACKAGES} | PACKAGES)


def rewrite_imports(text: str, old_package: str, new_package: str, exists=None) -> str:
    """Rewrite ``from X import ...`` statements whose X, or whose imported submodules, moved.

    `exists(module)` says whether a module is there once the modules have moved. With it, a module already in
    a room that still imports its flat neighbours relatively (``from .errors import``: a change merged into the
    module after it moved) is mended as if it were still flat, when that is the only reading that resolves.
    """

    def one(m: re.Match) -> str:
        mod, names_src, indent = m.group("mod"), m.group("names"), m.group("indent") or ""
        rel = mod.startswith(".")
        if rel and not old_package.startswith(PKG):
            return None
        abs_mod = absolute(mod, old_package) if rel else mod
        if abs_mod is None:
            return None
        if rel and exists is not None and old_package in ROOMS and mod.strip("."):
            flat = absolute(mod, PKG)
            if not exists(abs_mod) and flat and (flat in MOVES or exists(flat)):
                abs_mod = flat
        elif rel and exists is not None and old_package in ROOMS and mod == ".":
            names = [s.split(" as ")[0].strip() for s in names_src.strip("()").replace("\n", " ").split(",")]
            if names and all(f"{PKG}.{n}" in MOVES and not exists(f"{old_package}.{n}") for n in names if n):
                abs_mod = PKG

        def spell(target: str) -> str:
            return relative(target, new_package) if rel else target

        if abs_mod in MOVES or abs_mod in FROM_IMPORTS:
            target = FROM_IMPORTS.get(abs_mod, MOVES[abs_mod])
            return [f"{indent}from {spell(target)} import {names_src}"]
        inner = names_src.strip("()")
        items = [s.strip() for s in inner.replace("\n", " ").split(",") if s.strip()]
        groups: dict[str, list[str]] = {}
        moved = False
        for item in items:
            name, _, alias = (p.strip() for p in item.partition(" as "))
            full = f"{abs_mod}.{name}"
            if full in MOVES:
                moved = True
                new = MOVES[full]
                parent, leaf = new.rsplit(".", 1)
                local = alias or name
                groups.setdefault(parent, []).append(leaf if leaf == local else f"{leaf} as {local}")
            else:
                groups.setdefault(abs_mod, []).append(item)
        if not moved:
            if rel and spell(abs_mod) != mod:  # the file itself moved: same target, new relative spelling
                return [f"{indent}from {spell(abs_mod)} import {names_src}"]
            return None
        return [f"{indent}from {spell(parent)} import {', '.join(names)}" for parent, names in groups.items()]

    def wrapped(m: re.Match) -> str:
        new = one(m)
        if new is None:
            return m.group(0)
        if "#" in m.group("names"):
            return "\n".join(new)
        return "\n".join(wrap(stmt) for stmt in new)

    return FROM_STMT.sub(wrapped, text)


WIDTH = 100
"""The longest code line the course allows in a notebook: a rewritten import longer than this is wrapped."""


def wrap(stmt: str) -> str:
    """``from M import a, b, c`` over WIDTH characters, as ``from M import (a, b,`` and aligned lines."""
    if all(len(line) <= WIDTH for line in stmt.splitlines()):
        return stmt
    head, _, names = stmt.partition(" import ")
    items = [s.strip() for s in names.strip().strip("()").replace("\n", " ").split(",") if s.strip()]
    first = f"{head} import ("
    lines, line = [], first
    for i, item in enumerate(items):
        piece = item + ("," if i < len(items) - 1 else ")")
        if line not in (first, " " * len(first)) and len(line) + 1 + len(piece) > WIDTH:
            lines.append(line)
            line = " " * len(first)
        line += ("" if line in (first, " " * len(first)) else " ") + piece
    lines.append(line)
    return "\n".join(lines)


ROOT_DEPTH = [
    (re.compile(r"Path\(__file__\)\.resolve\(\)\.parents\[1\]"), "Path(__file__).resolve().parents[2]"),
    (re.compile(r"Path\(__file__\)\.resolve\(\)\.parent\.parent(?!\.parent)"), "Path(__file__).resolve().parents[2]"),
]


def rewrite_text(text: str, kind: str, old_package: str = "", new_package: str = "", moving: bool = False,
                 exists=None) -> str:
    text = rewrite_imports(text, old_package, new_package, exists)
    if kind == "py":
        if moving:
            for pattern, repl in ROOT_DEPTH:
                text = pattern.sub(repl, text)
    return _outside_recorded(text, lambda part: rewrite_paths(rewrite_dotted(part)))


RECORDED = re.compile(r"""(["'])command\1[ \t]*:[ \t]*(["'])(?:(?!\2)[^\\\n]|\\.)*\2""")
"""A recorded run's command, ``"command": "python -m ..."`` (a copy of a data file's provenance, such as the one
toygraph/prices.py keeps): what ran is history, left as written. Code that builds a command is rewritten."""


def _outside_recorded(text: str, fn) -> str:
    out, at = [], 0
    for m in RECORDED.finditer(text):
        out += [fn(text[at:m.start()]), m.group(0)]
        at = m.end()
    return "".join(out) + fn(text[at:])


# --- notebooks ------------------------------------------------------------------------------------------------
def _dump(nb: dict, sort_keys: bool) -> str:
    return json.dumps(nb, sort_keys=sort_keys, indent=1, ensure_ascii=False) + "\n"


def _rewrite_strings(value):
    """Metadata with the module names in its strings rewritten (a generated notebook's "generated_by")."""
    if isinstance(value, str):
        return rewrite_paths(rewrite_dotted(value))
    if isinstance(value, list):
        return [_rewrite_strings(v) for v in value]
    if isinstance(value, dict):
        return {k: _rewrite_strings(v) for k, v in value.items()}
    return value


def rewrite_notebook(raw: str) -> tuple[str, str | None]:
    """The notebook with its cells' sources rewritten (outputs, ids, metadata as they were); or a reason it is left."""
    nb = json.loads(raw)
    style = next((s for s in (True, False) if _dump(nb, s) == raw), None)
    if style is None:
        return raw, "not in nbformat's JSON layout (indent 1): left alone, edit it by hand"
    nb["metadata"] = _rewrite_strings(nb.get("metadata", {}))
    for cell in nb.get("cells", []):
        if "metadata" in cell:
            cell["metadata"] = _rewrite_strings(cell["metadata"])
        src = cell.get("source", "")
        joined = "".join(src) if isinstance(src, list) else src
        new = rewrite_text(joined, "py" if cell.get("cell_type") == "code" else "text")
        if new != joined:
            cell["source"] = new.splitlines(keepends=True) if isinstance(src, list) else new
    return _dump(nb, style), None


# --- the run --------------------------------------------------------------------------------------------------
def git(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(root), *args], check=check, capture_output=True, text=True)


def is_text_target(path: str) -> bool:
    p = Path(path)
    if any(part in SKIP_PARTS for part in p.parts[:-1]) or path in SELF:
        return False
    if p.parts[0] == "data" and p.suffix == ".json":
        return False  # recorded benchmark files: what ran is history
    return p.suffix in TEXT_SUFFIXES or p.name in TEXT_NAMES or path == ".ci/run"


def diff_lines(old: str, new: str) -> list[str]:
    a, b = old.splitlines(), new.splitlines()
    import difflib
    out = []
    for line in difflib.unified_diff(a, b, lineterm="", n=0):
        if line.startswith(("---", "+++", "@@")):
            continue
        out.append("    " + line.strip()[:160])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python tools/relayout.py", description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true", help="print what would change, change nothing")
    ap.add_argument("--quiet", action="store_true", help="name the changed files, not each changed line")
    args = ap.parse_args(argv)
    top = git(Path.cwd(), "rev-parse", "--show-toplevel", check=False)
    if top.returncode:
        print("relayout: run this inside a git checkout of the course", file=sys.stderr)
        return 2
    root = Path(top.stdout.strip())
    if not (root / PKG / "__init__.py").exists():
        print(f"relayout: {root} has no {PKG}/__init__.py: not a checkout of the course", file=sys.stderr)
        return 2

    tracked = set(git(root, "ls-files", "-z").stdout.split("\0")) - {""}
    untracked = set(git(root, "ls-files", "-z", "--others", "--exclude-standard").stdout.split("\0")) - {""}
    moves: dict[str, str] = {}  # old file -> new file
    for old, new in MOVES.items():
        src, dst = old_file(old), new_file(new)
        if (root / src).exists():
            if (root / dst).exists():
                print(f"relayout: both {src} and {dst} exist: merge them by hand, then run again", file=sys.stderr)
                return 1
            moves[src] = dst

    def exists(module: str) -> bool:
        """True when `module` is a module or package of the tree once the moves are made."""
        if module in MOVES:
            return False
        if module in MOVES.values():
            return True
        base = root.joinpath(*module.split("."))
        return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()

    changed = 0
    candidates = sorted(p for p in tracked | untracked | set(moves)
                        if (root / p).is_file() and not (root / p).is_symlink() and is_text_target(p))
    for path in candidates:
        file = root / path
        try:
            with open(file, encoding="utf-8", newline="") as f:  # line endings as they are
                raw = f.read()
        except UnicodeDecodeError:
            continue
        if path.endswith(".ipynb"):
            new, why = rewrite_notebook(raw)
            if why:
                if DOTTED.search(raw):
                    print(f"! {path}: {why}")
                continue
        elif path.endswith(".py"):
            dest = moves.get(path, path)
            new = rewrite_text(raw, "py", package_of(path), package_of(dest), moving=path in moves, exists=exists)
        else:
            new = rewrite_text(raw, "text")
        if new != raw:
            changed += 1
            print(f"rewrote {path}")
            if not args.quiet:
                print("\n".join(diff_lines(raw, new)))
            if not args.dry_run:
                with open(file, "w", encoding="utf-8", newline="") as f:
                    f.write(new)

    for src, dst in moves.items():
        changed += 1
        print(f"moved {src} -> {dst}")
        if args.dry_run:
            continue
        (root / dst).parent.mkdir(parents=True, exist_ok=True)
        if src in tracked:
            git(root, "mv", src, dst)
        else:
            (root / src).rename(root / dst)

    if not changed:
        print("relayout: nothing to change (every module is in its room, every reference up to date)")
    elif args.dry_run:
        print(f"relayout: dry run, {changed} change(s) not made")
    for p in sorted(tracked):
        if (p.startswith("data/") and p.endswith(".json") and (root / p).is_file()
                and DOTTED.search((root / p).read_text(errors="replace"))):
            print(f"note: {p} names old modules (a recorded run: re-record it with the new commands, not rewritten)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
