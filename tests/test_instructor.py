"""The instructor kit: generated from the lessons, up to date, complete, and a plan that fits three hours."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat

from graphcourse.authoring import instructor

ROOT = Path(__file__).resolve().parents[1]


def test_the_generated_pages_are_up_to_date():
    assert instructor.update(check=True) == [], "run make instructor (python -m graphcourse.authoring.instructor)"


def test_every_question_and_every_thing_to_try_has_its_answer():
    timings = instructor.load_timings()
    for path in instructor.lessons():
        les = instructor.read_lesson(path, timings)
        nb = nbformat.read(path, as_version=4)
        folded = instructor._section(nb, "Check yourself").count("<details>")
        assert len(les.questions) == folded, f"{path.name}: {folded} folded answers, {len(les.questions)} parsed"
        assert all(q and a for q, a in les.questions)
        text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
        if "Things to try" in text:
            assert les.tries, f"{path.name}: its Things to try items were not found"
        for item in les.tries:
            answer = instructor.try_answer(les, item)
            assert answer != instructor.NO_ANSWER, f"{path.name}: no computed answer for {item!r}"
            assert re.search(r"\d", answer), f"{path.name}: the answer to {item!r} computes no figure"
        if path.name[:2] != "00":
            assert les.objectives and les.mistakes, f"{path.name}: goals and misconceptions"
    page = (ROOT / "docs" / "instructor" / "lessons.md").read_text()
    assert instructor.NO_ANSWER not in page


def test_things_to_try_answers_follow_the_model():
    """The answers are computed, not typed: they change when the toy's prices change."""
    les = instructor.read_lesson(ROOT / "notebooks" / "02_launch_tax.ipynb", {})
    item = next(i for i in les.tries if "kernels per step" in i)
    from graphcourse.lessons import widgets

    before = instructor.try_answer(les, item)
    original = widgets.launch_tax.__defaults__
    try:
        widgets.launch_tax.__defaults__ = (original[0], original[1], original[2] * 3, original[3])
        after = instructor.try_answer(les, item)
    finally:
        widgets.launch_tax.__defaults__ = original
    assert before != after


def test_the_plan_fits_three_hours_and_covers_every_exercise():
    timings = instructor.load_timings()
    les = [instructor.read_lesson(p, timings) for p in instructor.lessons()]
    exs = instructor.read_exercises()
    items, moved = instructor.plan_items(les, exs)
    assert sum(i.minutes for i in items) <= instructor.BUDGET
    placed = {i.key for i in items + moved}
    assert {e.id for e in exs} <= placed and {x.number for x in les} <= placed
    assert sum(i.kind == "break" for i in items) == 1
    assert all(i.minutes >= 1 for i in items)


def test_timings_were_measured_for_every_lesson():
    timings = instructor.load_timings()
    assert "_measured" in timings, "run make instructor-timings"
    missing = [p.name for p in instructor.lessons() if p.name not in timings]
    assert not missing, f"not timed: {missing} (make instructor-timings)"


def test_the_generated_kit_carries_no_note_meant_for_its_authors():
    """Notes such as 'give it a place in classroom/workshop.toml' tell an author the plan's data lags the course;
    the kit an instructor reads must hold none (add the lesson or exercise to classroom/workshop.toml instead)."""
    kit = ROOT / "docs" / "instructor"
    pages = sorted(kit.glob("*.md"))
    assert pages, "the kit has no pages: run make instructor"
    for page in pages:
        text = page.read_text()
        for note in instructor.AUTHOR_NOTES:
            assert note not in text, f"{page.name} says {note!r}"
    timings = instructor.load_timings()
    les = [instructor.read_lesson(p, timings) for p in instructor.lessons()]
    items, moved = instructor.plan_items(les, instructor.read_exercises())
    assert not [i.note for i in items + moved if any(n in (i.note or "") for n in instructor.AUTHOR_NOTES)]
    assert {ex.id for ex in instructor.read_exercises()} <= set(instructor.EXERCISE_AFTER), \
        "an exercise without a place in classroom/workshop.toml's [exercise_after]"
