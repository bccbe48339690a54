"""Slides from the lessons themselves: each cell's `slideshow.slide_type`, set by a rule when the release is built.

The release (graphcourse.authoring.release) marks every lesson it writes with :func:`mark`; the authored lessons
hold no marks but an author's own ``slides:...`` tags. The slideshow is the lessons' own cells, not a second copy. An instructor presents a lesson with
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

import re

from .nav import COLAB_LINK_ID, COLAB_SETUP_ID, NAV_CELL

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
