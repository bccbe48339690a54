"""Slides are the lessons' own cells: the marking rule, its idempotence, the build, and the stored marks."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import nbformat
import pytest

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


def test_slides_build_for_every_lesson(course_process, tmp_path):
    """nbconvert's reveal.js export of every lesson: one <section> per slide and sub-slide, skipped cells gone."""
    paths = lessons()
    written = slides.build(paths, tmp_path / "slides")
    assert [p.name for p in written] == [f"{p.stem}.slides.html" for p in paths]
    for path, html_path in zip(paths, written):
        html = html_path.read_text()
        nb = nbformat.read(path, as_version=4)
        slides.mark(nb)
        kinds = [c.metadata["slideshow"]["slide_type"] for c in nb.cells]
        assert "reveal.js" in html and 'class="reveal"' in html
        # nbconvert nests: <section> per slide holding a <section> per sub-slide
        n_sections = len(re.findall(r"<section\b", html))
        assert n_sections == 2 * kinds.count("slide") + kinds.count("subslide"), path.name
        assert "Open in Colab" not in html and "[Contents]" not in html and "Contents</a>" not in html
        title = next(c.source for c in nb.cells if c.cell_type == "markdown" and c.source.startswith("# "))
        words = re.sub(r"[`*#]", "", title.splitlines()[0]).split("·")[-1].strip().split(":")[0]
        assert words.split()[0] in html


def test_the_lessons_carry_their_slide_marks():
    """The stored lessons are marked by the rule: run python -m graphcourse.authoring.slides (make nav) after editing one."""
    assert slides.update(check=True) == [], "run python -m graphcourse.authoring.slides"
