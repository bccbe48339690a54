"""Slides are the lessons' own cells: the marking rule, its idempotence, the stored marks, and RISE's settings."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat

from graphcourse.authoring import slides
from graphcourse.authoring.nav import lessons

ROOT = Path(__file__).resolve().parents[1]


def _nb(cells):
    nb = nbformat.v4.new_notebook()
    for kind, source, tags in cells:
        cell = (nbformat.v4.new_markdown_cell if kind == "markdown" else nbformat.v4.new_code_cell)(source)
        if tags:
            cell.metadata["tags"] = tags
        nb.cells.append(cell)
    return nb


def test_the_rule_and_the_marks():
    nb = _nb([
        ("markdown", "[Contents](../README.md) · [01 Next →](01_x.ipynb)", None),
        ("markdown", "# 00 · Title: subtitle", None),
        ("markdown", "## The big idea\n\ntext", None),
        ("code", "x = 1", None),
        ("markdown", "### Step 1", None),
        ("markdown", "plain prose", None),
        ("code", "print('long table')", ["slides:skip"]),
        ("markdown", "an aside for the presenter", ["slides:notes"]),
        ("code", "# colab", ["colab-setup"]),
    ])
    assert slides.mark(nb) is True
    got = [c.metadata["slideshow"]["slide_type"] for c in nb.cells]
    assert got == ["skip", "slide", "slide", "-", "subslide", "-", "skip", "notes", "skip"]
    assert slides.mark(nb) is False, "marking twice changes nothing"


def test_the_released_lessons_carry_their_slide_marks_and_the_authored_ones_none():
    """The release marks every cell by the rule; the authored lessons hold no marks (an author's tags stay)."""
    from graphcourse.authoring import release

    course = set(release.course_files(ROOT))
    for path in lessons():
        assert not any("slideshow" in c.metadata for c in nbformat.read(path, as_version=4).cells), path.name
        nb = nbformat.reads(release.released_bytes(ROOT, f"notebooks/{path.name}", course).decode(), as_version=4)
        assert [c.metadata["slideshow"]["slide_type"] for c in nb.cells] == [slides.slide_type(c) for c in nb.cells]
        assert nb.cells[0].metadata["slideshow"]["slide_type"] == "skip", "the navigation line is no slide"
        assert nb.cells[3].metadata["slideshow"]["slide_type"] == "slide", "the title is the first slide"
        assert slides.mark(nb) is False


def test_rise_presents_with_the_courses_settings():
    """RISE's slideshow reads JupyterLab's settings, the course's overrides among them (graphcourse/lab_settings): slides
    scroll, code wraps, and the theme loads no web fonts; tests/test_slides_browser.py sees what these do in Chromium."""
    overrides = json.loads((ROOT / "graphcourse" / "lab_settings" / "overrides.json").read_text())
    assert overrides["jupyterlab-rise:plugin"]["scroll"] is True
    assert overrides["jupyterlab-rise:plugin"]["theme"] == "white"
    assert overrides["@jupyterlab/notebook-extension:tracker"]["codeCellConfig"]["lineWrap"] is True
