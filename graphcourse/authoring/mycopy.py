"""Your own copy of the graded exercises, in my-work/: made once, never overwritten.

    python -m graphcourse.authoring.mycopy          # make my-work/06_exercises.ipynb (or add new exercises to it)
    python -m graphcourse.authoring.mycopy --new    # a fresh, empty copy beside yours: my-work/06_exercises (2).ipynb
    make my-exercises                     # the same as the first line

`exercises/` is generated from `solutions/` (`make exercises`) and a course update rewrites
it, so answers typed there can be lost. `make lab` runs this before it opens JupyterLab, so
every learner finds their copy in `my-work/` (git ignores that folder: `git pull` never
touches it).

When your copy exists, it is never rewritten: only exercises the course added since you made
it are inserted, each as a whole (heading, given cells, answer cell, checks), before the
copy's closing "Grading" section; every cell already there, your answers above all, stays
exactly as it is. A copy that cannot be read is left alone, with a message.
"""

from __future__ import annotations

import argparse
import copy
import os
import re
import sys
import tempfile
from pathlib import Path

import nbformat

from ..core.exercise_format import as_my_copy
from ..core.paths import ROOT

SOURCE_DIR = ROOT / "exercises"
MY_DIR = ROOT / "my-work"
HEADING = re.compile(r"^#{1,2}\s+(ex\d\d_[a-z0-9_]+)\b", re.MULTILINE)


def exercise_of_heading(cell) -> str | None:
    """The exercise id a markdown heading cell opens (`## ex01_bucket_picker: ...`), else None."""
    if cell.cell_type != "markdown":
        return None
    m = HEADING.match(cell.source.lstrip())
    return m.group(1) if m else None


def segments(nb) -> tuple[list, dict[str, list], list[str], list]:
    """Split a notebook: (cells before the first exercise, {id: cells}, ids in order, cells after the last).

    An exercise runs from its heading to the next `#`/`##` heading; the closing section (a `#`/`##`
    heading naming no exercise, such as "## Grading your work") and what follows it is the tail.
    """
    head, parts, order, tail = [], {}, [], []
    current = None
    for cell in nb.cells:
        ex = exercise_of_heading(cell)
        is_heading = cell.cell_type == "markdown" and re.match(r"^#{1,2}\s", cell.source.lstrip() or "")
        if ex:
            current = ex
            order.append(ex)
            parts[ex] = [cell]
        elif is_heading and current is not None:
            current = "tail"
            tail.append(cell)
        elif current == "tail":
            tail.append(cell)
        elif current is None:
            head.append(cell)
        else:
            parts[current].append(cell)
    return head, parts, order, tail


def exercises_in(nb) -> list[str]:
    """The exercise ids a notebook holds, by its headings and by its cells' metadata."""
    ids = [exercise_of_heading(c) for c in nb.cells]
    ids += [c.metadata.get("graphcourse", {}).get("exercise") for c in nb.cells]
    return list(dict.fromkeys(i for i in ids if i))


def _write(nb, path: Path) -> None:
    """Write atomically: a crash mid-write never leaves a half-written copy of a learner's work."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="." + path.name, suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            nbformat.write(nb, f)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def fresh_copy(source: Path):
    return as_my_copy(nbformat.read(source, as_version=4), source.name)


def merge(source: Path, mine: Path) -> list[str]:
    """Insert the exercises of `source` missing from `mine`; return their ids (nothing else changes)."""
    src = nbformat.read(source, as_version=4)
    nb = nbformat.read(mine, as_version=4)
    have = set(exercises_in(nb))
    _, parts, order, _ = segments(src)
    new = [ex for ex in order if ex not in have]
    if not new:
        return []
    cells = [copy.deepcopy(c) for ex in new for c in parts[ex]]
    # insert before the copy's closing section, else at the end
    _, _, mine_order, _ = segments(nb)
    at = len(nb.cells)
    if mine_order:
        after_last = False
        for i, cell in enumerate(nb.cells):
            if exercise_of_heading(cell) == mine_order[-1]:
                after_last = True
            elif after_last and cell.cell_type == "markdown" and re.match(r"^#{1,2}\s", cell.source.lstrip()):
                at = i
                break
    nb.cells[at:at] = cells
    known = nb.metadata.setdefault("graphcourse", {}).setdefault("exercises", {})
    for ex, points in src.metadata.get("graphcourse", {}).get("exercises", {}).items():
        known.setdefault(ex, points)
    _write(nb, mine)
    return new


def next_free(path: Path) -> Path:
    """`06_exercises (2).ipynb`, `(3)`, ...: the first name beside `path` not taken (the grader knows these names)."""
    n = 2
    while True:
        candidate = path.with_name(f"{path.stem} ({n}){path.suffix}")
        if not candidate.exists():
            return candidate
        n += 1


def make_copies(source_dir: Path = SOURCE_DIR, my_dir: Path = MY_DIR, new: bool = False,
                log=print) -> list[tuple[str, Path]]:
    """Make or update the learner's copy of every exercises notebook. Returns (action, path) pairs."""
    sources = sorted(source_dir.glob("*.ipynb"))
    if not sources:
        raise FileNotFoundError(f"no exercises notebooks in {source_dir}: run make exercises first")
    done = []
    for source in sources:
        mine = my_dir / source.name
        if new and mine.exists():
            target = next_free(mine)
            _write(fresh_copy(source), target)
            done.append(("new", target))
            log(f"made a fresh copy {_rel(target)} beside yours ({_rel(mine)} is untouched)")
        elif not mine.exists():
            _write(fresh_copy(source), mine)
            done.append(("made", mine))
            log(f"made your copy {_rel(mine)}: answer the exercises there")
        else:
            try:
                added = merge(source, mine)
            except Exception as exc:  # unreadable copy: leave it alone, say so
                done.append(("unreadable", mine))
                log(f"warning: could not read your copy {_rel(mine)} ({type(exc).__name__}: {exc}); "
                    f"it was left as it is. For a fresh copy beside it: python -m graphcourse.authoring.mycopy --new")
                continue
            if added:
                done.append(("updated", mine))
                log(f"added {len(added)} new exercise(s) to your copy {_rel(mine)}: {', '.join(added)} "
                    f"(your answers are untouched)")
            else:
                done.append(("kept", mine))
                log(f"your copy {_rel(mine)} is up to date")
    return done


def _rel(path: Path) -> str:
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m graphcourse.authoring.mycopy", description=__doc__.splitlines()[0])
    parser.add_argument("--new", action="store_true", help="make a fresh copy beside yours, under a new name")
    parser.add_argument("--quiet", action="store_true", help="say something only when a copy is made or changed")
    parser.add_argument("--to", type=Path, default=MY_DIR, help="the folder of your copies (default: my-work/)")
    parser.add_argument("--source", type=Path, default=SOURCE_DIR, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    messages = []
    try:
        done = make_copies(args.source, args.to, args.new, log=messages.append)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for (action, _), message in zip(done, messages):
        if not args.quiet or action != "kept":
            print(message)
    return 0


if __name__ == "__main__":
    sys.exit(main())
