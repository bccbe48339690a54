"""Slides are the lessons' own cells: the marking rule, its idempotence, the stored marks, and RISE's settings."""

from __future__ import annotations

import json
import shutil
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


def test_marking_lessons_is_idempotent_and_check_reports_stale(tmp_path):
    copies = []
    for path in lessons()[:2]:
        shutil.copy(path, tmp_path / path.name)
        copies.append(tmp_path / path.name)
    slides.update(copies)
    first = [p.read_bytes() for p in copies]
    assert slides.update(copies) == [] and slides.update(copies, check=True) == []
    assert [p.read_bytes() for p in copies] == first
    nb = nbformat.read(copies[0], as_version=4)
    nb.cells[1].metadata["slideshow"]["slide_type"] = "fragment"
    nbformat.write(nb, copies[0])
    assert slides.update(copies, check=True) == [copies[0].name]


def test_the_lessons_carry_their_slide_marks():
    """The stored lessons are marked by the rule: run python -m graphcourse.authoring.slides (make nav) after editing one."""
    assert slides.update(check=True) == [], "run python -m graphcourse.authoring.slides"


def test_rise_presents_with_the_courses_settings():
    """RISE's slideshow reads JupyterLab's settings, the course's overrides among them (graphcourse/lab_settings): slides
    scroll, code wraps, and the theme loads no web fonts; tests/test_slides_browser.py sees what these do in Chromium."""
    overrides = json.loads((ROOT / "graphcourse" / "lab_settings" / "overrides.json").read_text())
    assert overrides["jupyterlab-rise:plugin"]["scroll"] is True
    assert overrides["jupyterlab-rise:plugin"]["theme"] == "white"
    assert overrides["@jupyterlab/notebook-extension:tracker"]["codeCellConfig"]["lineWrap"] is True
