"""Slides from the lessons themselves: set each cell's `slideshow.slide_type` by a rule; RISE presents them.

    python -m graphcourse.authoring.slides                      # mark every lesson's cells (idempotent)
    python -m graphcourse.authoring.slides --check              # exit 1 when a lesson's marks are out of date

The slideshow is the lessons' own cells, not a second copy. An instructor presents a lesson with
RISE (``jupyterlab-rise``, installed with the course) from ``make lab`` or the class server: the
slideshow button in a lesson's toolbar, or ``/rise/notebooks/NN_name.ipynb``. Its cells run live,
offline (RISE bundles reveal.js), with the course's settings (``graphcourse/lab_settings``: a slide
taller than the screen scrolls, long code lines wrap); docs/instructor/README.md, "Slides", says how,
and ``tests/test_slides_browser.py`` walks every slide of every lesson in Chromium. The rule, in order:

1. a cell tagged ``slides:slide``, ``slides:subslide``, ``slides:fragment``, ``slides:skip``,
   ``slides:notes`` or ``slides:-`` gets that type (an author's mark beats the rule);
2. the navigation lines and the Colab cells: ``skip``;
3. a markdown cell opening with a ``#`` or ``##`` heading: a new ``slide``; ``###``: a ``subslide``;
4. everything else: ``-`` (it continues the slide above).

So each section of a lesson is a slide and each step within it a sub-slide (reveal.js shows
sub-slides downwards), with its code and outputs (as stored, executed on the GPU) on it.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat

from graphcourse.authoring.nav import COLAB_LINK_ID, COLAB_SETUP_ID, NAV_CELL, lessons

TYPES = ("slide", "subslide", "fragment", "skip", "notes", "-")
MARK = re.compile(r"^slides:(" + "|".join(re.escape(t) for t in TYPES) + r")$")


def slide_type(cell) -> str:
    """The slide type the rule gives a cell (see the module's docstring)."""
    for tag in cell.metadata.get("tags", []):
        m = MARK.match(tag)
        if m:
            return m.group(1)
    if cell.get("id") in (COLAB_LINK_ID, COLAB_SETUP_ID) or "colab-setup" in cell.metadata.get("tags", []):
        return "skip"
    if cell.cell_type == "markdown":
        text = cell.source.lstrip()
        if NAV_CELL.match(text):
            return "skip"
        if re.match(r"^#{1,2}\s", text):
            return "slide"
        if re.match(r"^###\s", text):
            return "subslide"
    return "-"


def mark(nb) -> bool:
    """Set every cell's slideshow.slide_type by the rule; True when something changed."""
    changed = False
    for cell in nb.cells:
        want = slide_type(cell)
        if cell.metadata.get("slideshow", {}).get("slide_type") != want:
            cell.metadata.setdefault("slideshow", {})["slide_type"] = want
            changed = True
    return changed


def update(paths: list[Path] | None = None, check: bool = False) -> list[str]:
    """Mark (or with check=True only find) the lessons whose slide marks are out of date."""
    stale = []
    for path in paths if paths is not None else lessons():
        nb = nbformat.read(path, as_version=4)
        if mark(nb):
            stale.append(path.name)
            if not check:
                nbformat.write(nb, path)
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m graphcourse.authoring.slides", description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="lessons (default: every notebooks/NN_*.ipynb)")
    parser.add_argument("--check", action="store_true", help="only report lessons whose marks are out of date")
    args = parser.parse_args(argv)
    paths = args.notebooks or lessons()
    missing = [p for p in paths if not p.is_file()]
    if missing:
        print(f"error: no such notebook: {', '.join(map(str, missing))}", file=sys.stderr)
        return 2
    stale = update(paths, check=args.check)
    if args.check and stale:
        print(f"slide marks out of date in {', '.join(stale)}: run python -m graphcourse.authoring.slides", file=sys.stderr)
        return 1
    print(f"slide marks {'checked' if args.check else 'written'}: {len(paths)} lessons"
          + (f", updated {', '.join(stale)}" if stale and not args.check else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
