"""Write the learner copies in exercises/ from the single source in solutions/.

    python -m graphcourse.authoring.build_exercises            # write exercises/ from solutions/
    python -m graphcourse.authoring.build_exercises --check    # exit 1 when exercises/ is stale (tests, CI)
    python -m graphcourse.authoring.build_exercises --execute  # first run solutions/ in place (nbclient), then build

How a solutions notebook is laid out (the grader reads the same layout)
----------------------------------------------------------------------
* **Set-up**: code cells before the first exercise. The grader runs them before every
  exercise, so anything several exercises share (imports, example data) goes here.
* **An exercise** starts at a markdown cell whose first line is a heading naming its id::

      ## ex03_warmup_capture: warm up, then capture (2 points)

  The id is ``ex`` + two digits + ``_`` + a snake_case name, unique across solutions/ and
  never renamed once learners have copies (the grader matches answers by it).
  ``(N points)`` is optional; the default is 1. The exercise ends at the next heading of
  the same or a higher level (``##`` or ``#`` here); ``###`` headings inside it are fine.
* **The answer cell**: the one code cell of the exercise holding the answer between
  ``### BEGIN SOLUTION`` and ``### END SOLUTION`` lines (one or more pairs). In exercises/
  each pair becomes ``raise NotImplementedError("...")`` at the marker's indentation. Text
  after the begin marker is the message the stub raises, and the grader's report repeats
  it: one short sentence saying *what* to write there, not how (no answer code). Longer
  guidance goes at the end of the exercise's heading cell, folded, as a nudge, not the code::

      <details><summary>Hint</summary>

      A bucket holds a batch when it is at least as large ...

      </details>

  The cell holds only what the learner writes (the functions to fill in): imports, data
  and demo loops go in given cells (set-up, context, or a check cell after it), so that a
  learner who rewrites the whole cell loses nothing::

      def pick_bucket(batch_size, buckets):
          ### BEGIN SOLUTION: return the smallest bucket that holds batch_size, or None
          ...
          ### END SOLUTION

* **Check cells**: every code cell after the answer, up to the end of the exercise. A check cell
  decides nothing: it calls the learner's code and records plain-data observations with
  ``observe`` (``from graphcourse.grading.observe import observe, inputs``); the grader runs the
  same cell with the model answer and compares the two outside every kernel (see
  docs/grading.md and the check protocol). Its cell metadata ``graphcourse.check`` holds
  ``points`` (default 1; an exercise's points are the sum of its checks', and the heading's
  ``(N points)`` must equal it), ``hidden`` (true: solutions/ only, stripped from exercises/),
  ``needs`` (``["cuda"]``: graded only where a CUDA GPU is; ``["cuda2"]``: only where two are), ``name`` and ``tolerance``.
  Import what a check compares against inside the check cell itself.
* Code cells between the heading and the answer are the exercise's own set-up (role
  ``context``), run before the answer. Cells after a heading that names no exercise are
  not graded and the grader does not run them.
* Exercises must not use each other's answers: each is graded on its own, after the
  set-up cells, so that one wrong answer cannot zero the next.

To add an exercise: append a heading cell, an answer cell with markers and one or more
check cells to the solutions notebook, run ``python -m graphcourse.authoring.build_exercises
--execute`` (it stores the outputs nbval compares and rewrites exercises/), and run
``pytest tests/test_build_exercises.py tests/test_grade.py``.

What the builder writes: the exercises/ copy has no outputs and no execution counts;
every graded cell gets a stable id (``ex01_bucket_picker-answer``,
``ex01_bucket_picker-check-1``, ``setup-1``), a tag (``ex01_bucket_picker:answer``) and
``metadata.graphcourse = {"exercise", "role", "points"}``; check and set-up cells are
marked not editable and not deletable in Jupyter. ``--execute`` stamps the same ids and
metadata into solutions/. The builder writes only into its output folder and refuses to
overwrite a copy there that holds a learner's work (outputs, or an answer that is no
longer a stub) unless given ``--force``.
"""

from __future__ import annotations

import argparse
import copy
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat

from ..core.exercise_format import (  # noqa: F401 (the builder's names for the format, which the grader reads too)
    BEGIN, END, ExerciseSourceError, Exercise, Layout, _where, check_meta, check_points_rule, find_regions,
    layout_of, require_observation, solution_paths, stub_source,
)
from ..core.paths import EXERCISES_DIR, ROOT, SOLUTIONS_DIR
from ..errors import GraphCourseError

KERNEL_NAME = "python3"
GENERATOR = "graphcourse.authoring.build_exercises"

class LearnerWorkError(GraphCourseError, RuntimeError):
    """The builder was about to overwrite a notebook that holds a learner's work."""


def annotate(nb: nbformat.NotebookNode, name: str = "notebook") -> nbformat.NotebookNode:
    """A copy of nb whose graded cells carry the stable ids, tags and metadata the grader matches on."""
    nb = copy.deepcopy(nb)
    layout = layout_of(nb, name)
    points = {ex.id: ex.points for ex in layout.exercises}
    roles = layout.roles()
    for i, cell in enumerate(nb.cells):
        tags = [t for t in cell.metadata.get("tags", []) if not re.fullmatch(r"ex\d{2}_[a-z0-9_]+:\w+|setup", t)]
        old = cell.metadata.get("graphcourse") if isinstance(cell.metadata.get("graphcourse"), dict) else {}
        authored = {k: old[k] for k in ("check", "selfcheck") if k in old}  # the author's, and the self-check's hashes
        for key in ("graphcourse", "editable", "deletable"):
            cell.metadata.pop(key, None)
        if i in roles:
            role, ex, k = roles[i]
            cell.id = f"{ex}-answer" if role == "answer" else f"{ex}-{role}-{k}" if ex else f"setup-{k}"
            tags.append(f"{ex}:{role}" if ex else "setup")
            cell.metadata["graphcourse"] = {"role": role, **({"exercise": ex, "points": points[ex]} if ex else {})}
            if role == "check":  # the author's check metadata (points, hidden, needs) and the self-check's hashes
                cell.metadata["graphcourse"].update(authored)
        if tags:
            cell.metadata["tags"] = tags
        else:
            cell.metadata.pop("tags", None)
    ids = [c.get("id") for c in nb.cells]
    if len(set(ids)) != len(ids):  # a hand-made id collided with a stamped one: renumber the ungraded cells
        for i, cell in enumerate(nb.cells):
            if i not in roles:
                cell.id = f"cell-{i + 1}"
    return nb


def strip_outputs(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Remove outputs, execution counts and run-time cell metadata, in place."""
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
        for key in ("execution", "collapsed", "scrolled"):
            cell.metadata.pop(key, None)
    return nb


def validate_checks(nb: nbformat.NotebookNode, name: str) -> None:
    """Refuse check metadata the grader would refuse (bad points, unknown keys, a heading's points not the sum)."""
    layout = layout_of(nb, name)
    for ex in layout.exercises:
        total = 0
        for i in ex.checks:
            points = check_meta(nb.cells[i].metadata, _where(name, i))["points"]
            require_observation(nb.cells[i].source, points, _where(name, i))
            total += points
        check_points_rule(nb, name, ex, total)


def exercise_notebook(solution: nbformat.NotebookNode, name: str) -> nbformat.NotebookNode:
    """The learner copy of one solutions notebook: answers stubbed, hidden checks and outputs stripped, stable metadata."""
    validate_checks(solution, name)
    nb = strip_outputs(annotate(solution, name))
    layout = layout_of(nb, name)
    for ex in layout.exercises:
        cell = nb.cells[ex.answer]
        cell.source = stub_source(cell.source, ex.id, _where(name, ex.answer))
    for i in layout.roles():  # Jupyter honours these: a learner cannot edit or delete a check by accident
        if nb.cells[i].metadata["graphcourse"]["role"] != "answer":
            nb.cells[i].metadata.update(editable=False, deletable=False)
    hidden = {i for i, c in enumerate(nb.cells) if (c.metadata.get("graphcourse", {}).get("check") or {}).get("hidden") is True}
    nb.cells = [c for i, c in enumerate(nb.cells) if i not in hidden]  # hidden checks live in solutions/ only
    nb.metadata = {
        "kernelspec": {"name": KERNEL_NAME, "display_name": "Python 3 (ipykernel)", "language": "python"},
        "language_info": {"name": "python"},
        "graphcourse": {
            "generated_by": GENERATOR,
            "source": name,
            "exercises": {ex.id: ex.points for ex in layout.exercises},
            "note": "Generated from solutions/ by `python -m graphcourse.authoring.build_exercises`: do not edit here.",
        },
    }
    nb.nbformat, nb.nbformat_minor = 4, 5
    nbformat.validate(nb)
    return nb


def dumps(nb: nbformat.NotebookNode) -> str:
    """The notebook as the text the builder writes (stable key order, one trailing newline)."""
    return nbformat.writes(nb, version=4).rstrip("\n") + "\n"


def expected_exercises(solutions_dir: Path) -> dict[str, str]:
    """File name -> text of every exercises/ notebook the builder would write now."""
    out: dict[str, str] = {}
    seen: dict[str, str] = {}
    for path in solution_paths(solutions_dir):
        nb = exercise_notebook(nbformat.read(path, as_version=4), path.name)
        for ex in nb.metadata["graphcourse"]["exercises"]:
            if ex in seen:
                raise ExerciseSourceError(f"exercise id {ex} is used in both {seen[ex]} and {path.name}; ids must be unique across "
                                          "solutions/ (rename one, before any learner has a copy)")
            seen[ex] = path.name
        out[path.name] = dumps(nb)
    return out


def learner_work(path: Path) -> str | None:
    """Why the notebook at path looks like a learner's work (not a generated copy), or None."""
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as exc:  # unreadable: do not guess, keep it
        return f"it cannot be read as a notebook ({type(exc).__name__})"
    if nb.metadata.get("graphcourse", {}).get("generated_by") != GENERATOR:
        return "it was not written by the builder"
    for cell in nb.cells:
        if cell.cell_type == "code" and (cell.get("outputs") or cell.get("execution_count")):
            return "it has been run (it holds outputs)"
        meta = cell.metadata.get("graphcourse", {})
        if meta.get("role") == "answer" and "raise NotImplementedError(" not in cell.source:
            return f"the answer to {meta.get('exercise')} has been written"
    return None


def build(solutions_dir: Path = SOLUTIONS_DIR, out_dir: Path = EXERCISES_DIR, *, force: bool = False) -> list[Path]:
    """Write every learner copy into out_dir; return the files that changed."""
    solutions_dir, out_dir = Path(solutions_dir).resolve(), Path(out_dir).resolve()
    if solutions_dir == out_dir:
        raise LearnerWorkError(f"the output folder is the solutions folder ({out_dir}): the builder would overwrite the source.")
    wanted = expected_exercises(solutions_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    changed = []
    for name, text in wanted.items():
        target = out_dir / name
        if target.exists():
            if target.read_text(encoding="utf-8") == text:
                continue
            reason = None if force else learner_work(target)
            if reason:
                raise LearnerWorkError(f"not overwriting {target}: {reason}. Copy it somewhere else to keep it, "
                                       f"delete it, or pass --force to replace it.")
        target.write_text(text, encoding="utf-8")
        changed.append(target)
    return changed


def stale(solutions_dir: Path = SOLUTIONS_DIR, out_dir: Path = EXERCISES_DIR) -> list[str]:
    """Why out_dir differs from what the builder would write (empty when up to date)."""
    wanted = expected_exercises(solutions_dir)
    out_dir = Path(out_dir)
    problems = []
    for name, text in wanted.items():
        target = out_dir / name
        if not target.exists():
            problems.append(f"{target} is missing")
        elif target.read_text(encoding="utf-8") != text:
            problems.append(f"{target} differs from its source solutions/{name}")
    for extra in sorted(set(p.name for p in out_dir.glob("*.ipynb")) - set(wanted)):
        problems.append(f"{out_dir / extra} has no source in solutions/")
    return problems


def execute_solutions(solutions_dir: Path = SOLUTIONS_DIR, timeout_s: int = 600,
                      only: list[str] | None = None) -> list[Path]:
    """Stamp the cell metadata into each solutions notebook (or those named in `only`) and run it in place with
    nbclient (outputs stored)."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    changed = []
    paths = solution_paths(solutions_dir)
    if only:
        unknown = sorted(set(only) - {p.name for p in paths})
        if unknown:
            raise ExerciseSourceError(f"--only {', '.join(unknown)}: no such solutions notebook in {solutions_dir} "
                                      f"(there: {', '.join(p.name for p in paths)})")
        paths = [p for p in paths if p.name in only]
    for path in paths:
        before = path.read_text(encoding="utf-8")
        nb = strip_outputs(annotate(nbformat.read(path, as_version=4), path.name))
        nb.metadata.setdefault("kernelspec", {}).update({"name": KERNEL_NAME, "display_name": "Python 3 (ipykernel)", "language": "python"})
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
        client = NotebookClient(nb, timeout=timeout_s, kernel_name=KERNEL_NAME, record_timing=False,
                                resources={"metadata": {"path": str(path.parent)}})
        try:
            client.execute(env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except CellExecutionError as exc:
            raise ExerciseSourceError(f"{path.name} does not run cleanly, so it was left as it was: "
                                      f"{exc.ename}: {exc.evalue}") from None
        nb.metadata["language_info"] = {"name": "python", "pygments_lexer": "ipython3"}
        text = dumps(nb)
        if text != before:
            path.write_text(text, encoding="utf-8")
            changed.append(path)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m graphcourse.authoring.build_exercises", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when exercises/ differs from what would be written")
    parser.add_argument("--execute", action="store_true", help="first run solutions/ in place with nbclient (stores their outputs)")
    parser.add_argument("--only", action="append", default=[], metavar="NOTEBOOK",
                        help="with --execute: run only this solutions notebook (its file name; repeat for more)")
    parser.add_argument("--force", action="store_true", help="overwrite copies in the output folder even if they hold a learner's work")
    parser.add_argument("--solutions", type=Path, default=SOLUTIONS_DIR, help="the single source (default: solutions/)")
    parser.add_argument("--out", type=Path, default=EXERCISES_DIR, help="where the learner copies go (default: exercises/)")
    args = parser.parse_args(argv)
    try:
        if not solution_paths(args.solutions):
            print(f"build_exercises: no solutions notebooks (*.ipynb) in {args.solutions}", file=sys.stderr)
            return 1
        if args.check:
            problems = stale(args.solutions, args.out)
            for p in problems:
                print(f"stale: {p}", file=sys.stderr)
            if problems:
                print("exercises/ is out of date: run `python -m graphcourse.authoring.build_exercises`", file=sys.stderr)
                return 1
            print(f"{args.out} is up to date with {args.solutions}")
            return 0
        if args.execute:
            for p in execute_solutions(args.solutions, only=args.only or None):
                print(f"executed and updated {p}")
        changed = build(args.solutions, args.out, force=args.force)
        for p in changed:
            print(f"wrote {p}")
        if not changed:
            print(f"{args.out} already up to date")
        return 0
    except GraphCourseError as exc:
        print(f"build_exercises: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
