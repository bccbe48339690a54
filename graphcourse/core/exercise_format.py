"""How a solutions notebook is laid out: the one reader of the exercise format.

The builder (``graphcourse.authoring.build_exercises``), the self-check and the grader all read a
solutions notebook through this module, so the format is written down once:

* **Set-up**: code cells before the first exercise.
* **An exercise** starts at a markdown cell whose first line is a heading naming its id
  (``## ex03_warmup_capture: warm up, then capture (2 points)``); ``(N points)`` is optional
  (default 1) and, when given, must be the sum of the exercise's checks' points
  (:func:`check_points_rule`). It ends at the next heading of the same or a higher level.
* **The answer cell**: the one code cell holding ``### BEGIN SOLUTION`` / ``### END SOLUTION``
  pairs; :func:`stub_source` turns each pair into a ``NotImplementedError`` stub.
* **Context cells** sit between the heading and the answer; **check cells** follow the answer,
  each with ``metadata.graphcourse.check`` (:func:`check_meta`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import GraphCourseError

NEEDS = {"cuda": "needs a CUDA GPU", "cuda2": "needs two GPUs"}
"""What a check may need from the grading machine, and how a report says it was missing."""

_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,40}")

BEGIN = "### BEGIN SOLUTION"
END = "### END SOLUTION"
_HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
_EXERCISE_ID = re.compile(r"\b(ex\d{2}_[a-z0-9_]+)\b")
_POINTS = re.compile(r"\((\d+)\s+points?\)")
_BEGIN_LINE = re.compile(r"^(?P<indent>[ \t]*)### BEGIN SOLUTION\b[ \t:.-]*(?P<hint>.*?)\s*$")
_END_LINE = re.compile(r"^[ \t]*### END SOLUTION\b")


class ExerciseSourceError(GraphCourseError, ValueError):
    """A solutions notebook breaks the cell conventions (unbalanced markers, two answer cells, ...)."""


@dataclass
class Exercise:
    """Where one exercise's cells sit in a solutions notebook."""

    id: str
    points: int
    heading: int
    answer: int | None = None
    context: list[int] = field(default_factory=list)
    checks: list[int] = field(default_factory=list)


@dataclass
class Layout:
    """The graded structure of a solutions notebook: set-up cells and exercises, by cell index."""

    setup: list[int]
    exercises: list[Exercise]

    def roles(self) -> dict[int, tuple[str, str | None, int]]:
        """Map cell index -> (role, exercise id or None, number of that role within its exercise)."""
        out: dict[int, tuple[str, str | None, int]] = {}
        for k, i in enumerate(self.setup, 1):
            out[i] = ("setup", None, k)
        for ex in self.exercises:
            for k, i in enumerate(ex.context, 1):
                out[i] = ("context", ex.id, k)
            if ex.answer is not None:
                out[ex.answer] = ("answer", ex.id, 1)
            for k, i in enumerate(ex.checks, 1):
                out[i] = ("check", ex.id, k)
        return out


def _where(name: str, index: int) -> str:
    return f"{name}, cell {index + 1}"


def find_regions(source: str, where: str) -> list[tuple[int, int, str, str]]:
    """The (begin line, end line, indent, hint) of every BEGIN/END SOLUTION pair, or a clear error when unbalanced."""
    regions, open_at = [], None
    for n, line in enumerate(source.splitlines()):
        begin, end = _BEGIN_LINE.match(line), _END_LINE.match(line)
        if begin:
            if open_at is not None:
                raise ExerciseSourceError(f"{where}: line {n + 1} opens {BEGIN!r} again, but the one on line {open_at[0] + 1} "
                                          f"was never closed. Add {END!r} after each answer.")
            open_at = (n, begin["indent"], begin["hint"])
        elif end:
            if open_at is None:
                raise ExerciseSourceError(f"{where}: line {n + 1} has {END!r} with no {BEGIN!r} before it. "
                                          f"Markers come in pairs around each answer.")
            regions.append((open_at[0], n, open_at[1], open_at[2]))
            open_at = None
    if open_at is not None:
        raise ExerciseSourceError(f"{where}: {BEGIN!r} on line {open_at[0] + 1} is never closed. Add {END!r} after the answer.")
    return regions


def layout_of(nb: Any, name: str = "notebook") -> Layout:
    """Read the set-up cells, exercises, answer and check cells of a solutions notebook (see the module docstring)."""
    setup: list[int] = []
    exercises: list[Exercise] = []
    current: Exercise | None = None
    level = 0
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            first = cell.source.lstrip().splitlines()[0] if cell.source.strip() else ""
            heading = _HEADING.match(first)
            if heading:
                ids = _EXERCISE_ID.findall(heading[2])
                if ids:
                    points = _POINTS.search(heading[2])
                    current, level = Exercise(ids[0], int(points[1]) if points else 1, i), len(heading[1])
                    exercises.append(current)
                elif current is not None and len(heading[1]) <= level:
                    current = None  # cells from here on are not graded
            continue
        if cell.cell_type != "code":
            continue
        regions = find_regions(cell.source, _where(name, i))
        if current is None:
            if regions:
                raise ExerciseSourceError(f"{_where(name, i)}: solution markers outside an exercise. Put a heading such as "
                                          f"'## ex07_my_exercise: what to do (1 point)' in a markdown cell above it.")
            if not exercises:
                setup.append(i)
        elif regions:
            if current.answer is not None:
                raise ExerciseSourceError(f"{_where(name, i)}: a second answer cell in {current.id} (the first is cell "
                                          f"{current.answer + 1}). Put every answer of an exercise in one cell.")
            current.answer = i
        elif current.answer is None:
            current.context.append(i)
        else:
            current.checks.append(i)
    seen: set[str] = set()
    for ex in exercises:
        if ex.id in seen:
            raise ExerciseSourceError(f"{name}: exercise id {ex.id} appears twice; ids must be unique.")
        seen.add(ex.id)
        if ex.answer is None:
            raise ExerciseSourceError(f"{_where(name, ex.heading)}: {ex.id} has no answer cell with {BEGIN!r} / {END!r}.")
        if not ex.checks:
            raise ExerciseSourceError(f"{_where(name, ex.answer)}: {ex.id} has no check cell after its answer.")
    return Layout(setup, exercises)


def stub_source(source: str, exercise_id: str, where: str) -> str:
    """The answer cell's source with each BEGIN/END SOLUTION pair replaced by a NotImplementedError stub."""
    lines = source.splitlines()
    out: list[str] = []
    last = 0
    for begin, end, indent, hint in find_regions(source, where):
        message = hint or f"{exercise_id}: write your answer here, in place of this line"
        out += lines[last:begin]
        out += [f"{indent}# YOUR CODE HERE", f"{indent}raise NotImplementedError({message!r})"]
        last = end + 1
    out += lines[last:]
    return "\n".join(out)


def solution_paths(solutions_dir: Path) -> list[Path]:
    """The solutions notebooks, in reading order."""
    return sorted(p for p in Path(solutions_dir).glob("*.ipynb") if not p.name.startswith("."))


def require_observation(source: str, points: int, where: str) -> None:
    """A check worth points must record what it sees: refuse one whose own source never calls observe(...) or
    observe.call(...) (it could not tell one answer from another, and the grader would only find out when grading)."""
    if not points:
        return
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise ExerciseSourceError(f"{where}: the check does not parse ({exc.msg}, line {exc.lineno})") from None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if (isinstance(f, ast.Name) and f.id == "observe") or (
                    isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "observe"):
                return
    raise ExerciseSourceError(f"{where}: this check is worth {points} point(s) but never calls observe(...) or "
                              "observe.call(...), so it cannot tell answers apart. Record what it sees with observe "
                              "(see graphcourse/grading/observe.py), or give it 0 points.")


def check_meta(meta: dict, where: str) -> dict:
    """The author's `metadata.graphcourse.check` of a check cell, validated (defaults filled in)."""
    g = meta.get("graphcourse") if isinstance(meta.get("graphcourse"), dict) else {}
    raw = g.get("check", {})
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ExerciseSourceError(f"{where}: metadata graphcourse.check must be an object, e.g. {{\"points\": 1}}")
    unknown = set(raw) - {"name", "points", "hidden", "needs", "tolerance"}
    if unknown:
        raise ExerciseSourceError(f"{where}: unknown key(s) {sorted(unknown)} in graphcourse.check "
                                  "(known: name, points, hidden, needs, tolerance)")
    out = {"name": raw.get("name"), "points": raw.get("points", 1), "hidden": raw.get("hidden", False),
           "needs": raw.get("needs", []), "tolerance": raw.get("tolerance", 0)}
    if out["name"] is not None and (not isinstance(out["name"], str) or not _NAME.fullmatch(out["name"])):
        raise ExerciseSourceError(f"{where}: check name {out['name']!r} must be lowercase letters, digits, _ or -")
    if type(out["points"]) is not int or out["points"] < 0:
        raise ExerciseSourceError(f"{where}: check points must be a whole number >= 0, not {out['points']!r}")
    if type(out["hidden"]) is not bool:
        raise ExerciseSourceError(f"{where}: check hidden must be true or false")
    needs = out["needs"]
    if isinstance(needs, str):
        needs = [needs]
    if not isinstance(needs, list) or any(n not in NEEDS for n in needs):
        raise ExerciseSourceError(f"{where}: check needs must be a list of {sorted(NEEDS)}, not {out['needs']!r}")
    out["needs"] = tuple(needs)
    if type(out["tolerance"]) not in (int, float) or out["tolerance"] < 0:
        raise ExerciseSourceError(f"{where}: check tolerance must be a number >= 0")
    return out


def heading_points(heading_line: str) -> int | None:
    """The ``(N points)`` of an exercise heading line, or None when the heading gives none."""
    m = _POINTS.search(heading_line)
    return int(m[1]) if m else None


def check_points_rule(nb: Any, name: str, ex: Exercise, total: int) -> None:
    """Refuse an exercise whose heading's ``(N points)`` is not the sum of its checks' points."""
    if heading_points(nb.cells[ex.heading].source.lstrip().splitlines()[0]) is not None and total != ex.points:
        raise ExerciseSourceError(f"{_where(name, ex.heading)}: {ex.id}'s heading says {ex.points} point(s) but its "
                                  f"checks carry {total}: make the heading's (N points) the sum of its checks' points")


def as_my_copy(nb: Any, source_name: str) -> Any:
    """A learner's own copy of a handed-out exercise notebook (``my-work/``; authoring.mycopy writes it, grading.collect
    knows an untouched one): the builder's note gone, ``my_copy`` saying where it came from. Changes nb; returns it."""
    meta = nb["metadata"].setdefault("graphcourse", {})
    meta.pop("generated_by", None)
    meta.pop("note", None)
    meta["my_copy"] = {"made_from": f"exercises/{source_name}"}
    return nb
