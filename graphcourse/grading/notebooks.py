"""Reading learners' notebooks as untrusted bytes, and finding each learner's notebooks in a class folder.

Nothing here trusts a learner file: it is opened without following links, read once (at most ``MAX_BYTES``), and
parsed into plain cells; any notebook that is not a valid notebook (binary, UTF-16, a UTF-8 byte-order mark is
fine, JSON nested too deeply, wrong types where lists or strings belong) raises :class:`InvalidNotebook` with a
reason a learner can act on. The grader never opens a learner file for writing.
"""

from __future__ import annotations

import ast
import errno
import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from .scan import MAX_CHARS

MAX_BYTES = 20 * 1024 * 1024
TOOL_FOLDERS = {".ipynb_checkpoints", ".git", ".venv", "__pycache__", ".jupyter", ".local", ".cache", ".ipython",
                ".Trash", ".virtual_documents", "node_modules"}


class InvalidNotebook(ValueError):
    """A learner file that is not a notebook the grader can read; str() is the reason, for the learner."""


@dataclass
class Cell:
    type: str  # code, markdown, raw
    source: str
    tags: list[str]
    graphcourse: dict  # metadata.graphcourse when it is a dict, else {}
    id: str | None
    index: int  # position in the notebook (0-based)
    names: frozenset[str] | None = None  # what defined_names finds in a code cell, worked out once (see parse)


@dataclass
class LearnerNotebook:
    path: Path
    sha256: str
    cells: list[Cell]
    metadata: dict
    mtime: float
    notes: list[str] = field(default_factory=list)

    @property
    def source_name(self) -> str | None:
        g = self.metadata.get("graphcourse")
        s = g.get("source") if isinstance(g, dict) else None
        return s if isinstance(s, str) else None


def read_bytes(path: Path) -> tuple[bytes, float]:
    """The file's bytes and mtime, opened without following a link; OSError/InvalidNotebook with a reason."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InvalidNotebook(f"{path.name} is a symbolic link: the grader reads only real files") from None
        raise InvalidNotebook(f"{path.name} could not be opened ({exc.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InvalidNotebook(f"{path.name} is not a regular file")
        if st.st_size > MAX_BYTES:
            raise InvalidNotebook(f"{path.name} is {st.st_size // (1024 * 1024)} MB, more than the "
                                  f"{MAX_BYTES // (1024 * 1024)} MB a notebook may be: clear its outputs and save again")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > MAX_BYTES:
                raise InvalidNotebook(f"{path.name} grew past {MAX_BYTES // (1024 * 1024)} MB while being read")
        return b"".join(chunks), st.st_mtime
    finally:
        os.close(fd)


def _text(source, where: str) -> str:
    if isinstance(source, str):
        return source
    if isinstance(source, list) and all(isinstance(s, str) for s in source):
        return "".join(source)
    raise InvalidNotebook(f"{where}: its source is {type(source).__name__ if not isinstance(source, list) else 'a list with something other than text'}, "
                          "not text. Open the notebook in Jupyter, fix or delete that cell, and save it again")


def parse(data: bytes, name: str = "notebook") -> tuple[list[Cell], dict, list[str]]:
    """Cells, notebook metadata and notes from a notebook's bytes; InvalidNotebook with a reason otherwise."""
    notes: list[str] = []
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
        notes.append(f"{name} starts with a UTF-8 byte-order mark; it was read without it")
    head = data[:64]
    if data.startswith((b"\xff\xfe", b"\xfe\xff")) or (len(head) >= 8 and (head[0::2].count(0) == len(head[0::2]) or
                                                                            head[1::2].count(0) == len(head[1::2]))):
        raise InvalidNotebook(f"{name} is saved as UTF-16, not UTF-8: open it in Jupyter and save it again "
                              "(File, Save Notebook), or re-save it as UTF-8 in your editor")
    if b"\x00" in data:
        raise InvalidNotebook(f"{name} is binary, not a notebook's text (JSON): hand in the .ipynb file Jupyter saved")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidNotebook(f"{name} is not UTF-8 text (byte {exc.start}): save it again from Jupyter") from None
    try:
        nb = json.loads(text)
    except RecursionError:
        raise InvalidNotebook(f"{name} nests its JSON too deeply to be a notebook") from None
    except json.JSONDecodeError as exc:
        raise InvalidNotebook(f"{name} is not valid notebook JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
                              "it may be cut short: save it again from Jupyter") from None
    if not isinstance(nb, dict):
        raise InvalidNotebook(f"{name} holds a JSON {type(nb).__name__}, not a notebook (an object with cells)")
    raw_cells = nb.get("cells")
    if not isinstance(raw_cells, list):
        raise InvalidNotebook(f"{name} has no list of cells" + ("" if "cells" not in nb else
                              f" (its 'cells' is a {type(raw_cells).__name__})") + ": is it a notebook Jupyter saved?")
    metadata = nb.get("metadata") if isinstance(nb.get("metadata"), dict) else {}
    cells = []
    for i, c in enumerate(raw_cells):
        where = f"{name}, cell {i + 1}"
        if not isinstance(c, dict):
            raise InvalidNotebook(f"{where} is a {type(c).__name__}, not a cell")
        ctype = c.get("cell_type")
        if ctype not in ("code", "markdown", "raw"):
            raise InvalidNotebook(f"{where} has cell_type {str(ctype)[:40]!r}: expected code, markdown or raw")
        source = _text(c.get("source", ""), where)
        meta = c.get("metadata") if isinstance(c.get("metadata"), dict) else {}
        tags = meta.get("tags", [])
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            notes.append(f"cell {i + 1}'s tags are not a list of text: ignored")
            tags = []
        gc = meta.get("graphcourse") if isinstance(meta.get("graphcourse"), dict) else {}
        cid = c.get("id") if isinstance(c.get("id"), str) else None
        cells.append(Cell(ctype, source, list(tags), gc, cid, i))
    budget = PARSE_BUDGET  # the smallest cells first: a learner's answers are parsed whatever else the notebook holds
    for c in sorted((c for c in cells if c.type == "code"), key=lambda c: len(c.source)):
        if len(c.source) <= min(budget, MAX_PARSED):
            budget -= len(c.source)
            c.names = _parsed_names(c.source)
        else:
            c.names = frozenset(_defined_by_lines(c.source))
    return cells, metadata, notes


def cell_names(cell: Cell) -> set[str]:
    """The top-level names a code cell defines (see defined_names), as parse worked them out."""
    return set(cell.names) if cell.names is not None else defined_names(cell.source)


def read_learner(path: Path) -> LearnerNotebook:
    data, mtime = read_bytes(path)
    cells, metadata, notes = parse(data, path.name)
    return LearnerNotebook(path, hashlib.sha256(data).hexdigest(), cells, metadata, mtime, notes)


# --- answers -------------------------------------------------------------------------------------------

MAX_PARSED = MAX_CHARS
"""Longer cells are not parsed in the grader's own process (a 20 MB cell takes gigabytes and a minute to parse):
their top-level names are read line by line (_defined_by_lines). No answer that long is graded unread anyway (the
static review holds it for an instructor)."""
PARSE_BUDGET = 1_000_000
"""Characters of code parsed per notebook (about 4 s at worst on a 2-core machine, for code built to be slow to parse);
the cells past it are read line by line. A course notebook with every answer written holds well under 100,000."""
_TOP_LEVEL_NAME = re.compile(r"^(?:(?:async[ \t]+)?def|class)[ \t]+([A-Za-z_]\w*)|^([A-Za-z_]\w*)[ \t]*(?::[^=\n]*)?"
                             r"(?:[-+*/%&|^@]|//|\*\*|<<|>>)?=(?!=)", re.MULTILINE)


def defined_names(source: str) -> set[str]:
    """The top-level names a cell defines (def, class, assignment targets, imports); empty when it is not Python.

    A learner's cells are worked out once, when the notebook is read (parse, cell_names)."""
    if len(source) > MAX_PARSED:
        return _defined_by_lines(source)
    return set(_parsed_names(source))


def _defined_by_lines(source: str) -> set[str]:
    """defined_names of a cell too long to parse: `def f`, `class C` and `name =` at the start of a line."""
    return {m.group(1) or m.group(2) for m in _TOP_LEVEL_NAME.finditer(source)}


def _parsed_names(source: str) -> frozenset[str]:
    source = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return frozenset()
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    return frozenset(names)


def _normal(source: str) -> str:
    return "\n".join(line.rstrip() for line in source.strip().splitlines())


@dataclass
class Answer:
    source: str | None  # None: no answer found
    cells: list[int]  # 1-based cell numbers graded
    notes: list[str]
    stub: bool = False


def find_answer(cells: list[Cell], exercise_id: str, names: set[str], stub: str, given: set[str],
                marked_ids: set[str]) -> Answer:
    """The answer the learner most plausibly meant for one exercise.

    Candidates: the cell the builder marked as this exercise's answer (metadata, tag or cell id), and any cell
    not marked by the builder that defines one of the answer's names. The untouched stub and the course's given
    cells are never chosen over a written answer. The last candidate defining every name wins; when none defines
    them all, the candidates defining some are graded together in notebook order. Notes say what was done."""
    def is_marked_answer(c: Cell) -> bool:
        return ((c.graphcourse.get("exercise") == exercise_id and c.graphcourse.get("role") == "answer")
                or f"{exercise_id}:answer" in c.tags or c.id == f"{exercise_id}-answer")

    def builder_marked(c: Cell) -> bool:
        return bool(c.graphcourse) or any(t == "setup" or re.fullmatch(r"ex\d{2}_[a-z0-9_]+:\w+", t) for t in c.tags) \
            or (c.id in marked_ids)

    stub_n = _normal(stub)
    marked = [c for c in cells if c.type == "code" and is_marked_answer(c)]
    others = [c for c in cells if c.type == "code" and not builder_marked(c) and _normal(c.source) not in given
              and names & cell_names(c)]
    candidates = sorted({c.index: c for c in marked + others}.values(), key=lambda c: c.index)
    written = [c for c in candidates if _normal(c.source) != stub_n and c.source.strip()]
    notes: list[str] = []
    if not written:
        if marked:
            return Answer(marked[-1].source, [marked[-1].index + 1], notes, stub=_normal(marked[-1].source) == stub_n)
        return Answer(None, [], notes)
    full = [c for c in written if names <= cell_names(c)]
    if full:
        chosen = full[-1]
        if len(full) > 1:
            notes.append(f"{len(full)} cells define {', '.join(sorted(names))} (cells "
                         f"{', '.join(str(c.index + 1) for c in full)}): graded the last one, cell {chosen.index + 1}")
        elif not is_marked_answer(chosen):
            notes.append(f"graded cell {chosen.index + 1}, which defines {', '.join(sorted(names))}, not the answer "
                         f"cell {exercise_id}-answer (keep your answers in the answer cells)")
        return Answer(chosen.source, [chosen.index + 1], notes)
    parts = [c for c in written if names & cell_names(c)] or written[-1:]
    if len(parts) > 1 or not is_marked_answer(parts[0]):
        notes.append(f"no single cell defines {', '.join(sorted(names))}: graded cells "
                     f"{', '.join(str(c.index + 1) for c in parts)} together, in that order")
    return Answer("\n\n".join(c.source for c in parts), [c.index + 1 for c in parts], notes)


# --- discovery -----------------------------------------------------------------------------------------

@dataclass
class Learner:
    name: str
    files: list[Path]
    notes: list[str] = field(default_factory=list)
    unreadable: dict[Path, str] = field(default_factory=dict)  # files another machine could not read, and why


def _entries(folder: Path) -> list[os.DirEntry]:
    try:
        with os.scandir(folder) as it:
            return sorted(it, key=lambda e: e.name)
    except OSError:
        return []


def _notebooks(folder: Path, skipped: list[tuple[str, str]]) -> list[Path]:
    out = []
    for e in _entries(folder):
        if not e.name.lower().endswith(".ipynb"):
            continue
        if e.is_symlink():
            skipped.append((str(Path(folder, e.name)), "a symbolic link: not followed"))
        elif e.name.startswith("."):
            skipped.append((str(Path(folder, e.name)), "a hidden file (its name starts with a dot)"))
        elif e.is_file(follow_symlinks=False):
            out.append(Path(folder, e.name))
    return out


def _learner_notebooks(folder: Path, skipped: list[tuple[str, str]]) -> list[Path]:
    """A learner's notebooks: in their folder, or else one level deeper (learner/hw/06_exercises.ipynb)."""
    found = _notebooks(folder, skipped)
    if found:
        return found
    deeper: list[Path] = []
    for e in _entries(folder):
        if e.is_dir(follow_symlinks=False) and e.name not in TOOL_FOLDERS and not e.is_symlink():
            deeper += _notebooks(Path(folder, e.name), skipped)
        elif e.is_symlink() and e.is_dir():
            skipped.append((str(Path(folder, e.name)), "a symbolic link to a folder: not followed"))
    return deeper


def discover(paths: list[Path], solution_names: set[str], copy_of,
             outputs: set[Path] = frozenset()) -> tuple[list[Learner], list[tuple[str, str]]]:
    """(learners, skipped) under the given paths: a notebook, a learner's folder, or a class folder.

    copy_of(path) -> solutions notebook name or None, used to tell one learner's copies from a flat class folder.
    outputs: the run's own output folders (feedback pages, Gradescope files), never a learner, even when written
    inside the class folder (``make grade-class`` writes them there)."""
    found: list[Learner] = []
    skipped: list[tuple[str, str]] = []
    together: dict[Path, int] = {}
    for path in paths:
        if path.is_file() and not path.is_symlink():
            together[path.parent.resolve()] = together.get(path.parent.resolve(), 0) + 1
    for path in paths:
        if path.is_symlink():
            skipped.append((str(path), "a symbolic link: not followed"))
            continue
        if path.is_file():
            folder = path.parent.resolve()
            if together.get(folder, 0) > 1:  # one learner's notebooks named one by one (06_..., 07_...)
                same = next((l for l in found if getattr(l, "_folder", None) == folder), None)
                if same is not None:
                    same.files.append(path)
                    continue
                learner = Learner(folder.name or path.stem, [path])
                learner._folder = folder
                found.append(learner)
                continue
            found.append(Learner(path.parent.name if path.name in solution_names and path.parent.name else path.stem, [path]))
            continue
        subs = []
        for e in _entries(path):
            if not e.is_dir(follow_symlinks=False):
                if e.is_symlink() and e.is_dir():
                    skipped.append((str(Path(path, e.name)), "a symbolic link to a folder: not followed"))
                continue
            if outputs and Path(path, e.name).resolve() in outputs and not any(Path(path, e.name).rglob("*.ipynb")):
                continue  # this run's feedback or Gradescope folder (one holding notebooks is graded as a learner)
            if e.name in TOOL_FOLDERS or e.name.startswith(".Trash"):
                skipped.append((str(Path(path, e.name)), "a tool's folder (Jupyter checkpoints, git, ...), not a learner"))
                continue
            books = _learner_notebooks(Path(path, e.name), skipped)
            if books:
                subs.append(Learner(e.name, books, [f"the learner's folder name starts with a dot"] if e.name.startswith(".") else []))
            else:
                skipped.append((str(Path(path, e.name)), "no notebook (*.ipynb) in it or one level deeper"))
        loose = _notebooks(path, skipped)
        if subs:
            found += subs
            found += [Learner(p.stem, [p]) for p in loose]
        elif loose:
            keys = [copy_of(p) or f"?{p.name}" for p in loose]
            if len(set(keys)) == len(keys) or all(_copy_name(p.name, k) for p, k in zip(loose, keys)):
                found.append(Learner(path.resolve().name, loose))
            else:
                found += [Learner(p.stem, [p]) for p in loose]
    # one name per learner: a second 'alice' becomes 'alice (2)', or 'alice (3)' where a folder is named 'alice (2)'
    # (two learners under one name would share, and overwrite, one record in every report)
    found_as = {learner.name for learner in found}
    given: set[str] = set()
    for learner in found:
        name, n = learner.name, 1
        while name in given or (n > 1 and name in found_as):
            n += 1
            name = f"{learner.name} ({n})"
        given.add(name)
        learner.name = name
    return found, skipped


def _copy_name(name: str, solution_name: str) -> bool:
    """Whether a file name is the solutions notebook's own name or a copy of it ('06_exercises (1).ipynb', '-Copy1')."""
    stem = Path(solution_name).stem
    return re.fullmatch(rf"{re.escape(stem)}(\s*\(\d+\)|-Copy\d*|[ _-]copy\d*)?\.ipynb", name, re.IGNORECASE) is not None
