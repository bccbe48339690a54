"""Write the navigation line (previous · contents · next) at the top and bottom of every lesson.

`python -m graphcourse.nav` rewrites them from the lessons' file names and titles;
`python -m graphcourse.nav --check` exits 1 when one is out of date. A lesson's title is its
first heading without the number: `# 02 · The launch tax: why ...` gives "The launch tax".
Only the first and last cells change, and only when they are navigation cells.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
NAV_CELL = re.compile(r"^(\[←[^\]]*\]\([^)]*\) · )?\[Contents\]\(")


def lessons(folder: Path = ROOT / "notebooks") -> list[Path]:
    """The lessons in reading order: notebooks/NN_name.ipynb."""
    return sorted(folder.glob("[0-9][0-9]_*.ipynb"))


def title(path: Path) -> str:
    """The short title of a lesson, from its first `# NN · Title: subtitle` heading."""
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "markdown" and cell.source.startswith("# "):
            heading = cell.source.splitlines()[0][2:]
            return re.sub(r"^\d+\s*·\s*", "", heading).split(":")[0].strip()
    raise ValueError(f"{path.name} has no '# NN · Title' heading to take its title from.")


def nav_line(paths: list[Path], index: int, exercises: Path | None = None) -> str:
    """The navigation line of lesson `index`: previous lesson, the contents (README), the next lesson or the exercises."""
    parts = []
    if index > 0:
        prev = paths[index - 1]
        parts.append(f"[← {prev.name[:2]} {title(prev)}]({prev.name})")
    parts.append("[Contents](../README.md)")
    if index + 1 < len(paths):
        nxt = paths[index + 1]
        parts.append(f"[{nxt.name[:2]} {title(nxt)} →]({nxt.name})")
    elif exercises is not None:
        parts.append(f"[Graded exercises →](../exercises/{exercises.name})")
    return " · ".join(parts)


def update(check: bool = False) -> list[str]:
    """Rewrite (or with check=True only find) the navigation cells that are out of date; returns the lessons concerned."""
    paths = lessons()
    exercises = sorted((ROOT / "exercises").glob("*.ipynb"))
    stale = []
    for i, path in enumerate(paths):
        nb = nbformat.read(path, as_version=4)
        want = nav_line(paths, i, exercises[0] if exercises else None)
        changed = False
        for cell in (nb.cells[0], nb.cells[-1]):
            if cell.cell_type != "markdown" or not NAV_CELL.match(cell.source):
                raise ValueError(f"{path.name}: its first and last cells must be navigation lines "
                                 f"(a markdown cell holding '[Contents](../README.md)'); add them, then run this again.")
            if cell.source != want:
                cell.source, changed = want, True
        if changed:
            stale.append(path.name)
            if not check:
                nbformat.write(nb, path)
    return stale


def main(argv: list[str] | None = None) -> int:
    """Command line: rewrite navigation lines, or check them with --check."""
    parser = argparse.ArgumentParser(prog="python -m graphcourse.nav", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report lessons whose navigation line is out of date")
    args = parser.parse_args(argv)
    try:
        stale = update(check=args.check)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.check and stale:
        print(f"navigation out of date in {', '.join(stale)}: run python -m graphcourse.nav", file=sys.stderr)
        return 1
    print(f"navigation {'checked' if args.check else 'written'}: {len(lessons())} lessons"
          + (f", updated {', '.join(stale)}" if stale and not args.check else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
