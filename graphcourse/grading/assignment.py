"""The graded structure of a solutions notebook: exercises, their model answers, stubs and checks (trusted input)."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from ..core.exercise_format import (ExerciseSourceError, check_meta, check_points_rule, layout_of,
                                   require_observation, solution_paths, stub_source)
from ..errors import GraphCourseError
from .notebooks import defined_names



@dataclass(frozen=True)
class Check:
    id: str  # EXERCISE/NAME
    name: str
    source: str
    points: int
    hidden: bool
    needs: tuple[str, ...]
    tolerance: float
    number: int  # 1-based among the exercise's checks


@dataclass
class Exercise:
    id: str
    points: int
    setup: list[str]  # the notebook's set-up cells (sources)
    context: list[str]
    model: str
    stub: str
    names: set[str]
    checks: list[Check]
    hint: str = ""
    modules: list[str] = field(default_factory=list)  # top-level modules the trusted cells import (preloaded)

    @property
    def max(self) -> int:
        return sum(c.points for c in self.checks)


@dataclass
class Assignment:
    name: str  # the solutions notebook's file name
    exercises: list[Exercise]
    given: set[str]  # normalised sources of every cell that is not an answer (never taken as an answer)

    @property
    def points(self) -> dict[str, int]:
        return {ex.id: ex.max for ex in self.exercises}


def _modules(sources: list[str]) -> list[str]:
    mods: list[str] = []
    for src in sources:
        try:
            tree = ast.parse("\n".join(l for l in src.splitlines() if not l.lstrip().startswith(("%", "!"))))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                mods += [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                mods.append(node.module)
    return list(dict.fromkeys(mods))


def _hint(markdown: str) -> str:
    m = re.search(r"<details>\s*<summary>\s*Hint\s*</summary>(.*?)</details>", markdown, re.S | re.I)
    return re.sub(r"\s+", " ", m[1]).strip() if m else ""


def load_assignment(path: Path) -> Assignment:
    nb = nbformat.read(path, as_version=4)
    name = path.name
    layout = layout_of(nb, name)
    setup = [nb.cells[i].source for i in layout.setup]
    exercises = []
    answers = {ex.answer for ex in layout.exercises}
    for ex in layout.exercises:
        checks, seen = [], set()
        for k, i in enumerate(ex.checks, 1):
            where = f"{name}, cell {i + 1} ({ex.id} check {k})"
            meta = check_meta(nb.cells[i].metadata, where)
            require_observation(nb.cells[i].source, meta["points"], where)
            cname = meta["name"] or f"check-{k}"
            if cname in seen:
                raise ExerciseSourceError(f"{where}: two checks of {ex.id} are named {cname!r}")
            seen.add(cname)
            checks.append(Check(f"{ex.id}/{cname}", cname, nb.cells[i].source, meta["points"], meta["hidden"],
                                meta["needs"], float(meta["tolerance"]), k))
        model = nb.cells[ex.answer].source
        stub = stub_source(model, ex.id, f"{name}, cell {ex.answer + 1}")
        total = sum(c.points for c in checks)
        check_points_rule(nb, name, ex, total)
        context = [nb.cells[i].source for i in ex.context]
        exercises.append(Exercise(ex.id, total, setup, context, model, stub, defined_names(model), checks,
                                  _hint(nb.cells[ex.heading].source), _modules(setup + context + [c.source for c in checks])))
    given = {"\n".join(l.rstrip() for l in c.source.strip().splitlines())
             for i, c in enumerate(nb.cells) if c.cell_type == "code" and i not in answers}
    return Assignment(name, exercises, given)


def load_assignments(solutions_dir: Path) -> list[Assignment]:
    paths = solution_paths(solutions_dir)
    if not paths:
        raise GraphCourseError(f"no solutions notebooks (*.ipynb) in {solutions_dir}: nothing to grade against.")
    out: list[Assignment] = []
    seen: dict[str, str] = {}
    for p in paths:
        try:
            a = load_assignment(p)
        except (ExerciseSourceError, nbformat.ValidationError, ValueError) as exc:
            raise GraphCourseError(f"the solutions notebook {p.name} cannot be graded against: {exc}") from None
        for ex in a.exercises:  # a learner's answer is found by its exercise id: one id, one notebook
            if ex.id in seen:
                raise GraphCourseError(f"exercise id {ex.id} is used in both {seen[ex.id]} and {p.name}: ids must be "
                                       "unique across solutions/ (rename one, before any learner has a copy)")
            seen[ex.id] = p.name
        out.append(a)
    return out
