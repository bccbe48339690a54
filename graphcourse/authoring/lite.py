"""Build the toy lessons and exercises as a JupyterLite site: Python in the browser (Pyodide), nothing installed.

`python -m graphcourse.authoring.lite` (or `make lite`) builds build/lite/ from registry packages only,
and `python -m graphcourse.authoring.lite --serve` serves it on http://127.0.0.1:8000/. Where each piece
comes from:

- JupyterLite itself and its Pyodide kernel: the PyPI packages jupyterlite-core and
  jupyterlite-pyodide-kernel (the kernel's own wheels, piplite and pyodide-kernel, ship inside it).
- The Pyodide runtime (pyodide.mjs, pyodide.asm.wasm, the standard library, pyodide-lock.json):
  the npm package ``pyodide``, at the version the kernel was made for (PYODIDE_VERSION).
- The pure-Python packages the kernel loads at start (micropip, packaging, IPython, jedi and
  what they need): their wheels from PyPI, at the exact versions pyodide-lock.json names.
- toygraph, and the parts of graphcourse that need nothing but the standard library and
  toygraph: pure-Python wheels built here from this repository.

The lock file is cut down to those packages, so every import the browser can satisfy is served
from this site and nothing is fetched from elsewhere at build or run time. Not available from
the registries: the Pyodide builds (wasm32 wheels) of numpy, matplotlib, pillow and kiwisolver:
PyPI and npm carry none for this Pyodide (only contourpy publishes one), so figures that need
matplotlib cannot be drawn in the browser. The browser copies of the lessons show such a cell's
code and the figure it drew when the lesson was stored, and say so.

Which notebooks go in: each lesson whose code cells import only what the browser has (figure
cells apart), and from the graded exercises each exercise whose cells do; the others need torch
or a GPU and stay in JupyterLab.
"""

from __future__ import annotations

import argparse
import ast
import base64
import functools
import hashlib
import http.server
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from ..core.cli import exit_status
from ..core.paths import ROOT
from ..errors import GraphCourseError
from . import release
from .site import alt_for_cell, unfold_widgets

DEFAULT_OUT = ROOT / "build" / "lite"
DEFAULT_WORK = ROOT / "build" / "lite-src"
CACHE = ROOT / "build" / "lite-cache"

KERNEL_PLUGIN = "@jupyterlite/pyodide-kernel-extension:kernel"
KERNEL_NEEDS = ("micropip", "packaging", "ipython", "jedi", "comm")
"""What the Pyodide kernel loads when it starts (its worker: micropip, then ipykernel, comm, jedi, ipython)."""
EXTRA_WHEELS = {"comm": "comm"}
"""Packages the kernel needs that pyodide-lock.json does not list: PyPI name by lock name."""
FIGURE_MODULES = ("matplotlib", "graphcourse.lessons.plots", "graphcourse.lessons.widgets", "graphcourse.lessons.decode")
"""Modules that draw figures: the browser has no matplotlib, so cells importing them are shown as stored."""
CALLS_NEED = {"plot_paths": "matplotlib", "graph_partition_flag": "torch"}
"""Functions of modules shipped to the browser that import, when called, a module the browser lacks
(graphcourse.lessons.decode_paths.plot_paths draws with matplotlib, graphcourse.gpulib.compiled.graph_partition_flag reads torch's
config): the lines that call one are shown as recorded, the rest of their cell runs."""
NBVAL_COMMENT = re.compile(r"^\s*#\s*NBVAL_\w+\s*$")


class LiteError(GraphCourseError):
    """The JupyterLite build could not be made; the message says what is missing and how to get it."""


def pyodide_version() -> str:
    """The Pyodide version the installed jupyterlite-pyodide-kernel was made for."""
    try:
        from jupyterlite_pyodide_kernel.constants import PYODIDE_VERSION
    except ImportError:
        raise LiteError("jupyterlite-pyodide-kernel is not installed: `pip install -e '.[lite]'` installs it and "
                        "jupyterlite-core (make lite does it).") from None
    return PYODIDE_VERSION


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _run(cmd: list[str], what: str, cwd: Path | None = None) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-6:])
        raise LiteError(f"{what} failed: `{' '.join(cmd)}` exited {done.returncode}:\n{tail}")


# --------------------------------------------------------------------------- what runs in the browser


BROWSER_LACKS = frozenset({"subprocess", "multiprocessing", "ctypes", "socket", "signal", "resource", "pty",
                           "termios", "fcntl", "readline", "curses", "tkinter", "venv", "ensurepip"})
"""Standard-library modules that import but cannot work in the browser (no processes, sockets or terminals)."""


@functools.cache
def _stdlib() -> frozenset[str]:
    return frozenset(sys.stdlib_module_names) - BROWSER_LACKS


def _python(source: str) -> str:
    """A cell's source as plain Python: IPython magic and shell lines become `pass` at their indentation."""
    out = []
    for line in source.splitlines():
        stripped = line.lstrip()
        out.append(line[: len(line) - len(stripped)] + "pass" if stripped.startswith(("%", "!")) else line)
    return "\n".join(out)


def _imports(source: str) -> set[str]:
    """Modules a cell imports (IPython magics and shell lines ignored; a cell that does not parse imports nothing)."""
    try:
        tree = ast.parse(_python(source))
    except SyntaxError:
        return set()
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def _module_level(tree: ast.Module) -> list[ast.AST]:
    """The nodes run when a module is imported: not the bodies of its functions (their imports are lazy)."""
    nodes, todo = [], list(tree.body)
    while todo:
        node = todo.pop()
        nodes.append(node)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))
    return nodes


@functools.cache
def browser_modules() -> frozenset[str]:
    """graphcourse modules that import only the standard library, toygraph and each other (shipped to the browser)."""
    folder = ROOT / "graphcourse"
    deps = {}
    for path in folder.rglob("*.py"):
        rel = path.relative_to(ROOT).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        mods = set()
        for node in _module_level(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                mods.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".")[: len(name.split(".")) - node.level + (rel.name == "__init__")]
                    source = ".".join(base + ([node.module] if node.module else []))
                elif node.module:
                    source = node.module
                else:
                    continue
                mods.add(source)
                for alias in node.names:  # `from graphcourse.lessons import plots` imports a module too
                    sub = ROOT.joinpath(*source.split("."), alias.name)
                    if sub.with_suffix(".py").is_file() or (sub / "__init__.py").is_file():
                        mods.add(f"{source}.{alias.name}")
        deps[name] = mods
    ok = {n for n in deps}
    changed = True
    while changed:  # drop a module while any import of it is neither stdlib, toygraph nor a module still kept
        changed = False
        for name in sorted(ok):
            for mod in deps[name]:
                top = mod.split(".")[0]
                if top in _stdlib() or top == "toygraph" or mod in ok or (top == "graphcourse" and mod == "graphcourse"):
                    continue
                if top == "graphcourse" and any(m == mod or m.startswith(mod + ".") for m in ok):
                    continue
                ok.discard(name)
                changed = True
                break
    return frozenset(ok)


def runs_in_browser(module: str) -> bool:
    """True when `module` can be imported in the lite build (standard library, toygraph, a shipped graphcourse module)."""
    top = module.split(".")[0]
    return top in _stdlib() or top == "toygraph" or module in browser_modules()


def _is_figure_module(module: str) -> bool:
    return any(module == m or module.startswith(m + ".") for m in FIGURE_MODULES)


def cell_kind(source: str) -> str:
    """'runs' (every import is in the browser), 'figure' (it also draws with matplotlib) or 'needs-gpu'."""
    missing = {m for m in _imports(source) if not runs_in_browser(m)}
    if not missing:
        return "runs"
    if all(_is_figure_module(m) for m in missing):
        return "figure"
    return "needs-gpu"


# --------------------------------------------------------------------------- the notebooks for the browser

BANNER = (
    "**Running in your browser.** This copy of the lesson runs on Python compiled to WebAssembly "
    "(JupyterLite with the Pyodide kernel): `toygraph` runs live, nothing is installed and no GPU is used. "
    "Run the cells from the top (Shift+Enter). {figures}The full course, with real CUDA graphs, runs in "
    "JupyterLab (`make lab`)."
)
RECORDED_NOTE = (
    "**As recorded.** These lines of the lesson need {needs}, which this in-browser Python does not have, so "
    "here is what they showed when the lesson was stored (on the GPU named in the full course)."
)
MAX_RECORDED_SHARE = 1 / 3
"""A lesson goes to the browser when at most this share of its code cells is shown as recorded."""
FIGURE_NOTE = (
    "**Figure as recorded.** These lines of the lesson draw with matplotlib, which this in-browser Python does not "
    "have (its WebAssembly build is not published on PyPI or npm), so here is the figure they drew when the lesson "
    "was stored. The numbers it plots are printed by the cells around it."
)


def _strip_nbval(cell: nbformat.NotebookNode) -> None:
    """Drop `# NBVAL_...` comments, and `%matplotlib` lines (the browser has no matplotlib)."""
    cell.source = "\n".join(line for line in cell.source.splitlines()
                            if not NBVAL_COMMENT.match(line) and not line.lstrip().startswith("%matplotlib"))


COLAB_SETUP = "colab-setup"
"""Id and tag of the lessons' Colab-only set-up cell (graphcourse.authoring.nav writes it); the browser copies leave it out."""


def colab_only(cell: nbformat.NotebookNode) -> bool:
    """True for the Colab-only set-up cell (by its id or tag, or a cell that does something only on Colab)."""
    if cell.get("id") == COLAB_SETUP or COLAB_SETUP in cell.get("metadata", {}).get("tags", []):
        return True
    return bool(re.search(r"^if\s+[\"']google\.colab[\"']\s+in\s+sys\.modules\s*:", cell.source, flags=re.M)) and all(
        line.startswith((" ", "\t", "#", "import sys", "if ")) or not line.strip() for line in cell.source.splitlines())


def _names(node: ast.AST) -> tuple[set[str], set[str]]:
    """Names a statement reads and names it binds."""
    loads, binds = set(), set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            (loads if isinstance(sub.ctx, ast.Load) else binds).add(sub.id)
        elif isinstance(sub, (ast.Import, ast.ImportFrom)):
            binds.update((a.asname or a.name).split(".")[0] for a in sub.names)
        elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            binds.add(sub.name)
    return loads, binds


def split_figure_cell(source: str, tainted: set[str]) -> tuple[str, str, set[str]]:
    """Split a cell into what runs in the browser and what cannot: the statements that import a module the browser
    lacks (matplotlib, torch), or use a name that came from one (`tainted`, updated), go to the recorded part.
    Returns (runs, recorded, tainted)."""
    lines = source.splitlines()
    code = _python(source).splitlines()
    tree = ast.parse("\n".join(code))
    tainted = set(tainted)
    runs, draws = [], []
    previous_end = 0
    for stmt in tree.body:
        first = stmt.lineno - 1
        while first > previous_end and code[first - 1].lstrip().startswith("#"):
            first -= 1  # a comment right above a statement goes with it
        chunk = "\n".join(lines[first:stmt.end_lineno])
        previous_end = stmt.end_lineno
        loads, binds = _names(stmt)
        if lines[stmt.lineno - 1].lstrip().startswith(("%", "!")):  # a magic: %matplotlib draws, others run
            (draws if "matplotlib" in lines[stmt.lineno - 1] else runs).append(chunk)
            continue
        missing_import = isinstance(stmt, (ast.Import, ast.ImportFrom)) and any(
            not runs_in_browser(m) for m in _imports(ast.unparse(stmt)))
        if missing_import or (loads & tainted and not isinstance(stmt, (ast.Import, ast.ImportFrom))):
            draws.append(chunk)
            tainted |= binds
        else:
            runs.append(chunk)
    return "\n".join(runs).strip("\n"), "\n".join(draws).strip("\n"), tainted


def _only_imports(code: str) -> bool:
    """True when these lines are only imports and magics."""
    try:
        tree = ast.parse(_python(code))
    except SyntaxError:
        return False
    return all(isinstance(n, (ast.Import, ast.ImportFrom, ast.Pass)) for n in tree.body)


def _figure_note(cell: nbformat.NotebookNode, index: int, draws: str, heading: str = "",
                 before: nbformat.NotebookNode | None = None, with_text: bool = False) -> nbformat.NotebookNode:
    """A markdown cell with the lines of a cell that cannot run in the browser and what they showed when the
    lesson was stored: its figures (as attachments, with alt text) and, with_text, its printed output."""
    try:
        called = {n.id for n in ast.walk(ast.parse(_python(draws))) if isinstance(n, ast.Name)}
    except SyntaxError:
        called = set()
    modules = sorted({m.split(".")[0] if not m.startswith("graphcourse") else m
                      for m in _imports(draws) if not runs_in_browser(m)}
                     | {CALLS_NEED[n] for n in called & set(CALLS_NEED)})
    needs = ", ".join(modules) or "matplotlib"
    images = [o for o in cell.get("outputs", []) if o.get("data", {}).get("image/png")]
    intro = FIGURE_NOTE if images and set(modules) <= set(FIGURE_MODULES) else RECORDED_NOTE.format(needs=needs)
    md = nbformat.v4.new_markdown_cell(intro + "\n\n```python\n" + draws + "\n```\n")
    if with_text:
        text = "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")
        text += "".join(f"{o.get('ename')}: {o.get('evalue')}\n" for o in cell.get("outputs", [])
                        if o.get("output_type") == "error")
        if text.strip():
            md.source += "\nIt printed:\n\n```text\n" + text.rstrip() + "\n```\n"
    attachments = {}
    for k, out in enumerate(cell.get("outputs", [])):
        png = out.get("data", {}).get("image/png")
        if png:
            name = f"figure-{index}-{k}.png"
            attachments[name] = {"image/png": png if isinstance(png, str) else base64.b64encode(png).decode()}
            alt = alt_for_cell(cell, heading, before).replace("[", "(").replace("]", ")").replace("\n", " ")
            md.source += f"\n![{alt}](attachment:{name})\n"
    if attachments:
        md.attachments = attachments
    return md


def lesson_for_browser(path: Path, others: set[str]) -> nbformat.NotebookNode | None:
    """The browser copy of a lesson, or None when it needs torch or a GPU (a figure's results included)."""
    return browser_copy(path, others)[0]


def browser_copy(path: Path, others: set[str]) -> tuple[nbformat.NotebookNode | None, str]:
    """The browser copy of a lesson and '', or None and why it does not go to the browser.

    A code cell runs as it is when everything it imports is in the browser and it uses nothing that only a
    recorded cell computed. Otherwise its lines that need matplotlib or torch (or what they computed) are shown
    as recorded, with the outputs they stored, and the rest of the cell runs. A lesson goes in when at most
    MAX_RECORDED_SHARE of its code cells need that.
    """
    nb = nbformat.read(path, as_version=4)
    unfold_widgets(nb)  # a slider explorer's stored text and figure, as the site shows them
    cells = []
    figures = recorded = code_cells = 0
    tainted: set[str] = set(CALLS_NEED)  # what uses one of these is shown as recorded, like what matplotlib drew
    heading = ""
    pending = ""
    before = None
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            found = re.findall(r"^#+\s+(.+)$", cell.source, flags=re.M)
            heading = found[-1].strip() if found else heading
            cell.source = _browser_links(cell.source, others)
            cells.append(cell)
            continue
        if cell.cell_type != "code":
            cells.append(cell)
            continue
        if colab_only(cell):
            continue  # it does nothing outside Colab
        code_cells += 1
        _strip_nbval(cell)
        try:
            if cell_kind(cell.source) == "needs-gpu":  # torch and the like: the whole cell is shown as recorded
                binds: set[str] = set()
                for stmt in ast.parse(_python(cell.source)).body:
                    binds |= _names(stmt)[1]
                runs, draws, tainted = "", cell.source.strip("\n"), tainted | binds
            else:  # matplotlib only: the computing lines run, the drawing is shown as recorded
                runs, draws, tainted = split_figure_cell(cell.source, tainted)
        except SyntaxError:
            return None, "a cell that is not Python"
        draws = "\n".join(filter(None, [pending, draws]))
        pending = ""
        if not draws:
            cell.outputs, cell.execution_count = [], None
            cells.append(cell)
            before = cell
            continue
        has_image = any("image/png" in o.get("data", {}) for o in cell.get("outputs", []))
        if _only_imports(draws) and not has_image:  # imports for what a later cell records: shown there
            pending = draws
            if runs:
                cells.append(nbformat.v4.new_code_cell(runs))
            continue
        if runs:
            cells.append(nbformat.v4.new_code_cell(runs))
        prints_live = "print(" in runs or "expect_error" in runs or "show_warnings" in runs
        cells.append(_figure_note(cell, i, draws, heading, before, with_text=not prints_live))
        figures += has_image
        recorded += 1
        before = cell
    if code_cells and recorded > MAX_RECORDED_SHARE * code_cells:
        return None, f"{recorded} of its {code_cells} code cells need torch, matplotlib or a GPU"
    if recorded:
        note = (f"{recorded} cell{'s' if recorded != 1 else ''} that need{'s' if recorded == 1 else ''} matplotlib "
                "or torch {} shown as recorded. ".format("is" if recorded == 1 else "are"))
    else:
        note = ""
    cells.insert(1 if cells and cells[0].cell_type == "markdown" else 0,
                 nbformat.v4.new_markdown_cell(BANNER.format(figures=note)))
    nb.cells = cells
    nb.metadata.pop("widgets", None)
    nb.metadata["kernelspec"] = {"name": "python", "display_name": "Python (Pyodide)", "language": "python"}
    return nb, ""


def _browser_links(source: str, others: set[str]) -> str:
    """Links to notebooks not in the browser build become plain text (they need JupyterLab)."""
    def fix(match: re.Match) -> str:
        text, target = match.group(1), match.group(2)
        name = target.rsplit("/", 1)[-1]
        if target.startswith(("http://", "https://", "#")):
            return match.group(0)
        if name in others:
            return f"[{text}]({name})"
        return f"{text} (in JupyterLab)" if name.endswith(".ipynb") else text
    return re.sub(r"\[([^\]]+)\]\(([^)\s]+)\)", fix, source)


def _exercise_of(cell: nbformat.NotebookNode) -> str | None:
    for tag in cell.metadata.get("tags", []):
        if ":" in tag:
            return tag.split(":", 1)[0]
    return None


def _stand_in(line: str) -> str:
    """For an import the browser lacks, functions of the same names that say so when called."""
    try:
        node = ast.parse(line.strip()).body[0]
    except (SyntaxError, IndexError):
        return f"# not in the browser: {line.strip()}"
    if not isinstance(node, (ast.Import, ast.ImportFrom)):
        return f"# not in the browser: {line.strip()}"
    module = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
    out = [f"# {line.strip()}: not in the browser (JupyterLab has it)"]
    for alias in node.names:
        name = (alias.asname or alias.name).split(".")[0]
        first = f"{name}() comes from {module}, which needs the course installed: "
        second = "open this notebook in JupyterLab (make lab). Here, the check cells run your answer."
        out.append(f"def {name}(*args, **kwargs):\n    raise NotImplementedError(\n        {first!r}\n"
                   f"        {second!r})")
    return "\n".join(out)


def exercises_for_browser(path: Path) -> tuple[nbformat.NotebookNode | None, list[str], list[str]]:
    """The browser copy of a graded-exercise notebook: the exercises whose cells all run in the browser.

    Returns the notebook (None when no exercise runs there), the exercises kept and those left to JupyterLab.
    """
    nb = nbformat.read(path, as_version=4)
    nb.cells = [c for c in nb.cells if not (c.cell_type == "code" and colab_only(c))]
    sections: list[tuple[str | None, list]] = [(None, [])]
    for cell in nb.cells:  # an exercise starts at its '## exNN_name' heading and runs to the next one
        heading = re.match(r"^##\s+(ex\d+_\w+)", cell.source) if cell.cell_type == "markdown" else None
        if heading:
            sections.append((heading.group(1), []))
        sections[-1][1].append(cell)
    kept, left = [], []
    cells = []
    for name, section_cells in sections:
        code = [c for c in section_cells if c.cell_type == "code"]
        if name is not None and any(cell_kind(c.source) != "runs" for c in code):
            left.append(name)
            continue
        if name is None:
            for c in code:  # set-up cells: an import the browser lacks becomes a stand-in that says so
                if cell_kind(c.source) != "runs":
                    c.source = "\n".join(line if cell_kind(line) == "runs" or not _imports(line)
                                         else _stand_in(line) for line in c.source.splitlines())
        else:
            kept.append(name)
        for c in section_cells:
            if c.cell_type == "code":
                _strip_nbval(c)
                c.outputs, c.execution_count = [], None
        cells.extend(section_cells)
    if not kept:
        return None, kept, left
    note = ("**Running in your browser** (JupyterLite, Pyodide): the exercises here need only `toygraph`. "
            "Write each answer, then run its check cells: an `AssertionError` says what is wrong. ")
    if left:
        note += (f"{', '.join(left)} need{'s' if len(left) == 1 else ''} torch or a GPU: "
                 "do {} in JupyterLab (`make lab`).".format("it" if len(left) == 1 else "them"))
    note += " Graded copies are handed in from JupyterLab, not from this page."
    cells.insert(1 if cells and cells[0].cell_type == "markdown" else 0, nbformat.v4.new_markdown_cell(note))
    nb.cells = cells
    nb.metadata["kernelspec"] = {"name": "python", "display_name": "Python (Pyodide)", "language": "python"}
    return nb, kept, left


# --------------------------------------------------------------------------- Pyodide and the wheels


def fetch_pyodide(version: str, dest: Path) -> Path:
    """Unpack the npm package pyodide@version into dest (the tarball is cached in build/lite-cache/)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    tarball = CACHE / f"pyodide-{version}.tgz"
    if not tarball.exists():
        if not shutil.which("npm"):
            raise LiteError("npm is not installed: the Pyodide runtime comes from the npm package `pyodide`. "
                            "Install it (Debian: apt-get install npm), then run make lite again.")
        _run(["npm", "pack", f"pyodide@{version}", "--pack-destination", str(CACHE), "--silent"],
             f"fetching the npm package pyodide@{version}")
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    with tarfile.open(tarball) as tar:
        for member in tar.getmembers():
            name = member.name.split("/", 1)[-1]
            if not member.isfile() or name.endswith((".map", ".d.ts", ".html")) or "/" in name:
                continue
            with tar.extractfile(member) as src, open(dest / name, "wb") as out:
                shutil.copyfileobj(src, out)
    if not (dest / "pyodide-lock.json").exists() or not (dest / "pyodide.mjs").exists():
        raise LiteError(f"the npm package pyodide@{version} has no pyodide-lock.json or pyodide.mjs")
    return dest


def _closure(lock: dict, names: tuple[str, ...]) -> list[str]:
    packages = {_canonical(k): k for k in lock["packages"]}
    seen: list[str] = []
    todo = [_canonical(n) for n in names]
    while todo:
        name = todo.pop()
        if name in seen or name not in packages:
            continue
        seen.append(name)
        todo += [_canonical(d) for d in lock["packages"][packages[name]].get("depends", [])]
    return [packages[n] for n in seen]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def pip_download(requirement: str, dest: Path, python: str) -> Path:
    """One pure-Python wheel from PyPI (cached), for the browser's Python version."""
    cache = CACHE / "wheels"
    cache.mkdir(parents=True, exist_ok=True)
    name, _, version = requirement.partition("==")
    pattern = re.sub(r"[-_.]+", "[-_.]", name) + (f"-{re.escape(version)}-" if version else "-")
    found = [p for p in cache.glob("*.whl") if re.match(pattern, p.name, flags=re.I)]
    if not found:
        _run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
              "--python-version", python, "--implementation", "py", "--abi", "none", "--platform", "any",
              "-d", str(cache), requirement], f"downloading {requirement} from PyPI")
        found = [p for p in cache.glob("*.whl") if re.match(pattern, p.name, flags=re.I)]
    if not found:
        raise LiteError(f"pip downloaded no pure-Python wheel for {requirement}")
    dest.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy2(found[0], dest / found[0].name))


def course_data(packages: list[str]) -> dict[str, Path]:
    """The data files the browser's graphcourse wheel carries, as 'folder/file' -> file (see build_course_wheel)."""
    # the recorded GPU results the lessons read (gpu_reference.json, decode_paths.json for lessons 07 and 08),
    # installed as site-packages/data/, where graphcourse.lessons.reference and graphcourse.lessons.decode_paths look for them
    data = {f"data/{path.name}": path for path in sorted((ROOT / "data").glob("*.json"))}
    # the tables a browser module reads beside itself (engine_facts.toml, capture_sizes_sources.toml)
    data.update({path.relative_to(ROOT).as_posix(): path for path in sorted((ROOT / "graphcourse").rglob("*.toml"))
                 if path.parent.relative_to(ROOT).as_posix().replace("/", ".") in packages})
    return data


def build_course_wheel(name: str, packages: list[str], modules: dict[str, Path], dest: Path,
                       data: dict[str, Path] | None = None) -> Path:
    """A pure-Python wheel of some of the repository's modules, built with setuptools (no download).

    `data` maps 'folder/file' to a file installed beside the packages (site-packages/folder/file).
    """
    package_data = {}
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        for rel, path in (data or {}).items():
            folder, _, file = rel.partition("/")
            (project / folder / file).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, project / folder / file)
            package_data.setdefault(folder, []).append(file)
            packages = [*packages, folder] if folder not in packages else packages
        for module, path in modules.items():
            target = project / Path(*module.split(".")).with_suffix(".py")
            if path.name == "__init__.py":
                target = project / Path(*module.split(".")) / "__init__.py"
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
        (project / "pyproject.toml").write_text(
            '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n\n'
            f'[project]\nname = "{name}"\nversion = "0.1.0"\nrequires-python = ">=3.11"\n'
            f'description = "{name} for the course in the browser (JupyterLite)"\n\n'
            f"[tool.setuptools]\npackages = {json.dumps(packages)}\n"
            + (f"[tool.setuptools.package-data]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in package_data.items())
               if package_data else ""))
        _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dest),
              str(project)], f"building the {name} wheel")
    wheels = sorted(dest.glob(f"{name}-0.1.0-*.whl"))
    if not wheels:
        raise LiteError(f"pip wheel left no {name} wheel in {dest}")
    return wheels[0]


def _lock_entry(wheel: Path, name: str, imports: list[str], depends: list[str]) -> dict:
    return {"name": name, "version": "0.1.0", "file_name": wheel.name, "install_dir": "site",
            "sha256": _sha256(wheel), "package_type": "package", "imports": imports, "depends": depends,
            "unvendored_tests": False, "shared_library": False}


def prepare_pyodide(static: Path) -> dict[str, list[str]]:
    """static/pyodide: the npm runtime, the kernel's wheels from PyPI and the course's wheels, with a lock naming
    only what is there. Returns what came from where."""
    version = pyodide_version()
    pyodide = fetch_pyodide(version, static / "pyodide")
    lock_path = pyodide / "pyodide-lock.json"
    lock = json.loads(lock_path.read_text())
    python = ".".join(lock["info"]["python"].split(".")[:2])
    origin: dict[str, list[str]] = {"npm": [f"pyodide@{version}"], "pypi": [], "built here": []}
    keep = {}
    for key in _closure(lock, tuple(n for n in KERNEL_NEEDS if n not in EXTRA_WHEELS)):
        entry = dict(lock["packages"][key])
        if not entry["file_name"].endswith("none-any.whl"):
            raise LiteError(f"the kernel needs {key}, whose Pyodide build {entry['file_name']} is not a pure-Python "
                            "wheel, so PyPI cannot supply it")
        wheel = pip_download(f"{entry['name']}=={entry['version']}", pyodide, python)
        entry["file_name"], entry["sha256"] = wheel.name, _sha256(wheel)
        keep[key] = entry
        origin["pypi"].append(wheel.name)
    for key, pypi_name in EXTRA_WHEELS.items():
        wheel = pip_download(pypi_name, pyodide, python)
        version_of = wheel.name.split("-")[1]
        keep[key] = _lock_entry(wheel, key, [key.replace("-", "_")], [])
        keep[key]["version"] = version_of
        origin["pypi"].append(wheel.name)
    toy = build_course_wheel("toygraph", ["toygraph"],
                             {f"toygraph.{p.stem}" if p.stem != "__init__" else "toygraph": p
                              for p in sorted((ROOT / "toygraph").glob("*.py"))}, pyodide)
    keep["toygraph"] = _lock_entry(toy, "toygraph", ["toygraph"], [])
    modules = {}
    for mod in sorted(browser_modules()):
        parts = mod.split(".")
        init = ROOT.joinpath(*parts, "__init__.py")
        modules[mod] = init if init.exists() else ROOT.joinpath(*parts).with_suffix(".py")
    packages = sorted({m if modules[m].name == "__init__.py" else m.rsplit(".", 1)[0] for m in modules})
    course = build_course_wheel("graphcourse", packages, modules, pyodide, course_data(packages))
    keep["graphcourse"] = _lock_entry(course, "graphcourse", ["graphcourse"], ["toygraph"])
    origin["built here"] += [toy.name, course.name]
    lock["packages"] = keep
    lock_path.write_text(json.dumps(lock, indent=1))
    return origin


# --------------------------------------------------------------------------- the build


@dataclass
class LiteReport:
    """What went into a lite build."""

    out: Path
    notebooks: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)
    origin: dict[str, list[str]] = field(default_factory=dict)
    seconds: float = 0.0


def build(out: Path = DEFAULT_OUT, work: Path = DEFAULT_WORK) -> LiteReport:
    """Build the JupyterLite site into `out` (work files under `work`); LiteError says what is missing."""
    started = time.monotonic()
    report = LiteReport(out)
    if work.exists():
        shutil.rmtree(work)
    files = work / "files"
    files.mkdir(parents=True)
    # the lessons as the release holds them (navigation lines and Colab cells), read by the steps below
    dressed = work / "lessons"
    dressed.mkdir()
    course = set(release.course_files(ROOT))
    lessons = []
    for rel in sorted(f for f in course if release.LESSON.fullmatch(f)):
        lessons.append(dressed / Path(rel).name)
        lessons[-1].write_bytes(release.released_bytes(ROOT, rel, course))
    browser = {}
    for path in lessons:
        nb, why = browser_copy(path, set())
        if nb is None:
            report.left_out.append(f"{path.name} ({why})")
        else:
            browser[path.name] = path
    exercise_books = {}
    for path in sorted((ROOT / "exercises").glob("*.ipynb")):
        nb, kept, left = exercises_for_browser(path)
        report.left_out += [f"{path.name}: {name} (imports torch or another module the browser lacks)"
                            for name in left]
        if nb is not None:
            exercise_books[path.name] = nb
    names = set(browser) | set(exercise_books)
    for name, path in browser.items():
        nbformat.write(lesson_for_browser(path, names), files / name)
        report.notebooks.append(name)
    for name, nb in exercise_books.items():
        nbformat.write(nb, files / name)
        report.notebooks.append(name)
    if not report.notebooks:
        raise LiteError("no lesson or exercise runs with toygraph alone: nothing to put in the browser build.")
    report.origin = prepare_pyodide(work / "static")
    settings = {"jupyter-config-data": {"litePluginSettings": {KERNEL_PLUGIN: {"disablePyPIFallback": True}},
                                        "appName": "CUDA graphs course (in the browser)"}}
    (work / "jupyter-lite.json").write_text(json.dumps(settings, indent=1))
    if out.exists():
        shutil.rmtree(out)
    # run inside `work`: jupyter lite keeps its task database (.jupyterlite.doit.db) in the working directory,
    # and a database left from another build would skip the steps that write our settings
    _run([sys.executable, "-m", "jupyterlite_core", "build", "--lite-dir", str(work.resolve()),
          "--contents", str(files.resolve()), "--output-dir", str(out.resolve()), "--no-sourcemaps",
          "--no-unused-shared-packages"], "jupyter lite build", cwd=work)
    _check_offline(out)
    report.seconds = time.monotonic() - started
    return report


def _check_offline(out: Path) -> None:
    """The built site must name no remote Pyodide: its jupyter-lite.json points at ./static/pyodide/."""
    config = json.loads((out / "jupyter-lite.json").read_text())["jupyter-config-data"]
    kernel = config.get("litePluginSettings", {}).get(KERNEL_PLUGIN, {})
    if kernel.get("pyodideUrl") != "./static/pyodide/pyodide.mjs" or not kernel.get("disablePyPIFallback"):
        raise LiteError(f"{out / 'jupyter-lite.json'} does not point the kernel at the Pyodide of this site with "
                        f"PyPI fallback off: {json.dumps(kernel)[:300]}")
    if not (out / "static" / "pyodide" / "pyodide.mjs").exists():
        raise LiteError("the build has no static/pyodide/pyodide.mjs: the Pyodide runtime was not copied")


class _Handler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, ".wasm": "application/wasm",
                      ".mjs": "text/javascript", ".js": "text/javascript", ".json": "application/json",
                      ".whl": "application/zip"}

    def log_message(self, format: str, *args) -> None:  # noqa: A002  (the base class's name)
        pass


def serve(out: Path = DEFAULT_OUT, port: int = 8000) -> None:
    """Serve the built site on http://127.0.0.1:port/ until Ctrl-C."""
    if not (out / "index.html").exists():
        raise LiteError(f"nothing built at {out}: run `python -m graphcourse.authoring.lite` (make lite) first.")
    handler = functools.partial(_Handler, directory=str(out))
    with http.server.ThreadingHTTPServer(("127.0.0.1", port), handler) as server:
        print(f"The toy lessons in the browser: http://127.0.0.1:{port}/lab/index.html (Ctrl-C to stop)")
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            print("stopped")


def main(argv: list[str] | None = None) -> int:
    """Command line: build (default), --serve, or both."""
    parser = argparse.ArgumentParser(prog="python -m graphcourse.authoring.lite", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where the site goes (default build/lite)")
    parser.add_argument("--serve", action="store_true", help="serve the site after building it")
    parser.add_argument("--no-build", action="store_true", help="only serve what is built")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)

    def body() -> None:
        if not args.no_build:
            report = build(args.out)
            print(f"lite: {', '.join(report.notebooks)} in {report.seconds:.0f} s -> {args.out}")
            for where, what in report.origin.items():
                print(f"  from {where}: {', '.join(what)}")
            if report.left_out:
                print(f"  left to JupyterLab: {'; '.join(report.left_out)}")
        if args.serve or args.no_build:
            serve(args.out, args.port)

    return exit_status(body, "error", LiteError)


if __name__ == "__main__":
    sys.exit(main())
