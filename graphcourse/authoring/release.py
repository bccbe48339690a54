"""Build the learner course (the release) from the authored sources, without anything a learner must not read.

    python -m graphcourse.authoring.release --out build/release     # `make release`

The authored repository holds the model answers and hidden checks (``solutions/``), the tests and
their wrong answers (``tests/``), the instructor kit (``docs/instructor/``) and the class server
(``classroom/``). The release is what a learner gets instead: the lessons, the exercise notebooks
and their salted self-check data, ``toygraph`` and ``graphcourse``, the recorded GPU figures, the
learner's docs, and the set-up (``Makefile``, ``bootstrap.py``, ``pyproject.toml``), so that
``make lab`` works inside it. ``make lab`` in the authored repository builds it into
``build/release`` and serves that folder; the published course is a release, not the repository.

Two promises, both tested (``tests/test_release.py``):

* **No answer gets out.** ``solutions/``, ``tests/`` (with its wrong answers), ``docs/instructor/``
  and ``classroom/`` are never copied; and every file of the release is searched for each model
  answer and hidden check (their lines the learner's own exercise notebook does not show): a file
  holding most of one (:data:`LEAK_SHARE`) stops the build, which says where.
* **An update loses nothing.** ``release.json`` records each file the release wrote and its hash.
  Building again into the same folder never touches ``my-work/``, ``.venv/`` or any file the
  release did not write; a file the learner changed (a lesson JupyterLab autosaved with their runs)
  is moved to ``my-work/kept-from-update/`` before the new version replaces it, and said so.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable, Iterable

import nbformat

from . import nav, slides
from ..core.cli import exit_status
from ..core.exercise_format import find_regions, layout_of, solution_paths
from ..core.paths import ROOT, SOLUTIONS_DIR
from ..errors import GraphCourseError

MANIFEST = "release.json"
DEFAULT_OUT = ROOT / "build" / "release"
FILES = ["README.md", "Makefile", "bootstrap.py", "pyproject.toml", "environment.yml", "nbval-sanitize.cfg", ".gitignore", "requirements.lock"]
FOLDERS = ["notebooks", "exercises", "toygraph", "graphcourse", "data", "docs"]
NEVER = {"__pycache__", ".ipynb_checkpoints", ".pytest_cache", "instructor"}
"""Names skipped wherever they appear: caches, and docs/instructor/ (the kit holds the answers)."""
KEEP = {"my-work", ".venv", "build", "wheelhouse", MANIFEST}
"""What a rebuild never removes or overwrites in the release folder (the learner's, or the set-up's)."""
TEXT_SUFFIXES = {".py", ".ipynb", ".md", ".json", ".txt", ".cfg", ".toml", ".yml", ".yaml", ".html", ""}
MIN_LEAK_CHARS = 24
"""Shorter answer lines (``return out``, ``g.replay()``) are too common to count."""
LEAK_SHARE, LEAK_MIN_LINES = 0.6, 3
"""A file holding at least 60% of an answer's (or hidden check's) significant lines, and 3 or more, leaks it."""


class ReleaseError(GraphCourseError, RuntimeError):
    """The release cannot be built as asked (a leaked answer, a missing source)."""


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


_MD_LINK = re.compile(r"\[([^\]\n]+)\]\(([^)\s#]+)(#[^)\s]*)?\)")


AUTHORED_ONLY = re.compile(r"^<!-- authored only: .*?-->\n.*?^<!-- end authored only -->\n?", re.S | re.M)
"""A Markdown passage between these two comment lines speaks of the authored course (grading a class, where the
code lives, maintaining it): the release leaves it out, so a learner's README describes the course they have."""


LESSON = re.compile(r"notebooks/[0-9][0-9]_[^/]*\.ipynb")
"""A lesson's path in the course: the release dresses it (navigation, Colab cells, slide marks)."""


def _title(path: Path, stamp: tuple[int, int]) -> str:
    """A lesson's title, read once per version of its file (the release dresses every lesson with all the titles)."""
    key = (str(path), stamp)
    if key not in _titles_seen:
        _titles_seen[key] = nav.title(path)
    return _titles_seen[key]


_titles_seen: dict[tuple[str, tuple[int, int]], str] = {}


def dressed_lesson(root: Path, rel: str, files: set[str]) -> nbformat.NotebookNode:
    """The lesson `rel` as the release holds it: the authored notebook with its navigation lines (from the lessons
    among `files`, in order), its Colab cells (from root's pyproject.toml) and its slide marks."""
    names = sorted(Path(f).name for f in files if LESSON.fullmatch(f))
    titles = {}
    for name in names:
        path = root / "notebooks" / name
        st = path.stat()
        titles[name] = _title(path, (st.st_mtime_ns, st.st_size))
    exercises = any(f.startswith("exercises/") and f.endswith(".ipynb") for f in files)
    repo, branch = nav.repository(root / "pyproject.toml")
    nb = nbformat.read(root / rel, as_version=4)
    nav.dress(nb, rel, names, titles, exercises, repo, branch)
    slides.mark(nb)
    _kernel_python(nb)
    return nb


def _kernel_python(nb: nbformat.NotebookNode) -> None:
    """Store the Python version of the environment that builds the release, as ipykernel reports it.

    JupyterLab writes the kernel's language_info into a notebook as its kernel starts. A lesson stored with another
    Python (the one that executed it) would open marked unsaved, and autosave would rewrite it as if the learner had
    changed it. The release is built by the course's own environment (make lab, the class server), whose kernel
    learners run, so the lesson opens unchanged."""
    info = nb.metadata.get("language_info")
    if isinstance(info, dict) and info.get("name") == "python":
        info["version"] = sys.version.split()[0]  # ipykernel's IPythonKernel.language_info["version"]


def released_bytes(root: Path, rel: str, files: set[str]) -> bytes:
    """What the release holds for `rel`: the file itself; a lesson dressed (:func:`dressed_lesson`); in Markdown,
    passages marked authored only left out (see AUTHORED_ONLY), and a link to a file only the authored course has
    (the instructor kit, tests/) keeps its text and loses its target, so no learner meets a dead link."""
    if LESSON.fullmatch(rel):
        return nbformat.writes(dressed_lesson(root, rel, files)).encode("utf-8") + b"\n"
    data = (root / rel).read_bytes()
    if not rel.endswith(".md"):
        return data
    here = Path(rel).parent

    def unlink(m: re.Match) -> str:
        target = m[2]
        if "://" in target or target.startswith(("mailto:", "/")):
            return m[0]
        resolved = os.path.normpath(here / target).replace(os.sep, "/")
        exists_here = resolved in files or any(f.startswith(resolved.rstrip("/") + "/") for f in files)
        return m[0] if exists_here or not (root / resolved).exists() else m[1]

    text = AUTHORED_ONLY.sub("", data.decode("utf-8"))
    return _MD_LINK.sub(unlink, text).encode("utf-8")


def course_files(root: Path = ROOT) -> list[str]:
    """The paths (relative, POSIX) the release holds, read from the authored tree."""
    out = [name for name in FILES if (root / name).is_file()]
    for folder in FOLDERS:
        base = root / folder
        if not base.is_dir():
            raise ReleaseError(f"{base} is missing: the release is built from a full checkout of the course.")
        for path in sorted(base.rglob("*")):
            rel = path.relative_to(root)
            if path.is_file() and not path.is_symlink() and not NEVER.intersection(rel.parts) \
                    and path.suffix not in {".pyc", ".pyo"}:
                out.append(rel.as_posix())
    return out


def _lines(text: str) -> set[str]:
    return {" ".join(line.split()) for line in text.splitlines() if len(line.strip()) >= MIN_LEAK_CHARS}


def secrets(solutions_dir: Path = SOLUTIONS_DIR, exercises_dir: Path | None = None) -> dict[str, frozenset[str]]:
    """What a learner must not read, as 'ex01_x's model answer' -> its significant lines.

    Each model answer and each hidden check, as the set of its lines that the learner's own
    exercise notebook does not already show (a check, the set-up, the text) and that are long
    enough to tell (:data:`MIN_LEAK_CHARS`). Lessons teach the idioms the answers use, so one
    shared line is not a leak; most of an answer in one file is (:func:`leaks`).
    """
    exercises_dir = exercises_dir or solutions_dir.parent / "exercises"
    shown: set[str] = set()
    for path in sorted(exercises_dir.glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            shown |= _lines(cell.source)
    out: dict[str, frozenset[str]] = {}
    for path in solution_paths(solutions_dir):
        nb = nbformat.read(path, as_version=4)
        for ex in layout_of(nb, path.name).exercises:
            source = nb.cells[ex.answer].source.splitlines()
            answer: set[str] = set()
            for begin, end, _indent, _hint in find_regions(nb.cells[ex.answer].source, path.name):
                answer |= _lines("\n".join(source[begin + 1:end]))
            out[f"{ex.id}'s model answer"] = frozenset(answer - shown)
            for k, i in enumerate(ex.checks, 1):
                check = (nb.cells[i].metadata.get("graphcourse") or {}).get("check") or {}
                if check.get("hidden") is True:
                    out[f"{ex.id}'s hidden check {k}"] = frozenset(_lines(nb.cells[i].source) - shown)
    return {what: lines for what, lines in out.items() if lines}


def _texts(path: Path) -> Iterable[str]:
    if path.suffix == ".ipynb":
        try:
            nb = nbformat.read(path, as_version=4)
        except Exception:  # noqa: BLE001  (not a notebook after all: read it as text)
            yield path.read_text(errors="replace")
            return
        for cell in nb.cells:
            yield cell.source
            for out in cell.get("outputs", []):
                text = out.get("text", "")
                yield "".join(text) if isinstance(text, list) else str(text)
                for value in (out.get("data") or {}).values():
                    if isinstance(value, str):
                        yield value
        return
    try:
        yield path.read_text()
    except (UnicodeDecodeError, OSError):
        return


def leaks(folder: Path, secret: dict[str, frozenset[str]], *, share: float = LEAK_SHARE) -> list[str]:
    """'file: what' for each file under `folder` holding most of a secret (my-work/ and .venv/ left out).

    Most means at least `share` of its significant lines, and at least :data:`LEAK_MIN_LINES` of them
    (a shorter one cannot be told from an idiom a lesson teaches, and is not searched for).
    """
    found = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if not path.is_file() or rel.parts[0] in KEEP or path.suffix not in TEXT_SUFFIXES:
            continue
        here: set[str] = set()
        for text in _texts(path):
            here |= _lines(text)
        for what, lines in secret.items():
            hit = len(lines & here)
            if hit >= LEAK_MIN_LINES and hit >= share * len(lines):
                found.append(f"{rel.as_posix()}: {what} ({hit} of its {len(lines)} lines)")
    return found


def _source_commit(root: Path) -> str:
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip() if done.returncode == 0 else "unknown"


def _kept_path(out: Path, rel: str) -> Path:
    target = out / "my-work" / "kept-from-update" / rel
    n = 2
    while target.exists():
        target = target.with_name(f"{Path(rel).stem} ({n}){Path(rel).suffix}")
        n += 1
    return target


def build(out: Path = DEFAULT_OUT, root: Path = ROOT, *, log: Callable[[str], None] = print,
          solutions_dir: Path | None = None) -> dict:
    """Build (or update) the release in `out`; returns the manifest written. See the module docstring."""
    out = Path(out).resolve()
    root = Path(root).resolve()
    if out == root or root.is_relative_to(out):
        raise ReleaseError(f"the release cannot be built into {out}: it would hold the authored course. "
                           "Give a folder of its own, e.g. --out build/release.")
    files = course_files(root)
    old: dict[str, str] = {}
    if (out / MANIFEST).is_file():
        try:
            old = json.loads((out / MANIFEST).read_text())["files"]
        except (ValueError, KeyError, TypeError) as exc:
            raise ReleaseError(f"{out / MANIFEST} is not a release manifest ({exc}): move the folder aside and build again.")
    elif out.exists() and any(p.name not in KEEP for p in out.iterdir()):
        raise ReleaseError(f"{out} exists, holds files and is not a release (no {MANIFEST}): nothing was written. "
                           "Choose an empty folder, or move this one aside.")
    wanted = set(files)
    contents = {rel: released_bytes(root, rel, wanted) for rel in files}  # what this build writes, once
    kept = []
    for rel, digest in old.items():  # the learner's changes to files of the last release are kept, never overwritten
        here = out / rel
        if here.is_file() and _sha(here) != digest:
            if rel in contents and hashlib.sha256(contents[rel]).hexdigest() == digest:
                continue  # the release did not change this file: the learner's version stays where it is
            target = _kept_path(out, rel)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(here), target)
            kept.append(f"{rel} -> {target.relative_to(out).as_posix()}")
    manifest_files = {}
    for rel in files:
        src, dest = root / rel, out / rel
        content = contents[rel]
        digest = hashlib.sha256(content).hexdigest()
        manifest_files[rel] = digest
        if dest.is_file() and rel in old and _sha(dest) != old[rel]:
            continue  # kept above: the learner's own version of an unchanged file
        if dest.is_file() and rel not in old and _sha(dest) != digest:
            target = _kept_path(out, rel)  # a file the learner made where the release now puts one
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(dest), target)
            kept.append(f"{rel} -> {target.relative_to(out).as_posix()}")
        dest.parent.mkdir(parents=True, exist_ok=True)
        if not dest.is_file() or _sha(dest) != digest:
            dest.write_bytes(content)
            shutil.copystat(src, dest)
    for rel in set(old) - set(files):  # gone from the course, and unchanged by the learner (changed ones moved above)
        here = out / rel
        if here.is_file() and _sha(here) == old[rel]:
            here.unlink()
    found = leaks(out, secrets(solutions_dir or root / "solutions", root / "exercises"))
    if found:
        raise ReleaseError(f"the release in {out} holds what learners must not read; nothing is published from it:\n  "
                           + "\n  ".join(found[:20]))
    manifest = {"source_commit": _source_commit(root),
                "built_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "files": manifest_files}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    for line in kept:
        log(f"kept your changed copy: {line}")
    log(f"release: {len(files)} files in {out} (no solutions, tests or instructor kit)")
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m graphcourse.authoring.release", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the release folder (default: build/release)")
    parser.add_argument("--quiet", action="store_true", help="say only what was kept from the learner's changes")
    args = parser.parse_args(argv)
    log = (lambda m: m.startswith("kept") and print(m)) if args.quiet else print
    return exit_status(lambda: build(args.out, log=log), "make release", ReleaseError)


if __name__ == "__main__":
    sys.exit(main())
