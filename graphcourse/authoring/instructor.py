"""The instructor kit's generated pages, derived from the lessons and exercises themselves.

    python -m graphcourse.authoring.instructor            # rewrite docs/instructor/{workshop-plan,lessons}.md
    python -m graphcourse.authoring.instructor --check    # exit 1 when they are out of date (a test runs this)
    python -m graphcourse.authoring.instructor --measure  # first re-time every lesson on this CPU (nbclient)
    make instructor / make instructor-timings   # the same

What is derived, so that it follows the lessons when they change:
* each lesson's learning goals (its "Learning objectives"), the misconceptions it targets (its
  "Common mistakes"), its check-yourself questions with their folded answers, word and cell
  counts, and the GPU run time stored in its cells' execution metadata;
* the answers to every "Things to try", computed with the same functions the sliders call
  (graphcourse.lessons.widgets, toygraph), so they hold for the model as it is now. A new "Things to try"
  item without an answer here stops the generator with a message saying where to add one;
* the run time of each lesson on a CPU, measured with `--measure` into docs/instructor/timings.json;
* the three-hour workshop plan: time per lesson and per exercise block from those counts and
  times, by the pace model written at the top of the plan.
The other pages of docs/instructor/ (stuck points, set-up checklist, room without GPUs, cheat
sheet) are written by hand.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import platform
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat

from . import nav
from ..core.paths import ROOT

KIT = ROOT / "docs" / "instructor"
TIMINGS = KIT / "timings.json"
SOLUTIONS_DIR = ROOT / "solutions"
EXERCISES_DIR = ROOT / "exercises"

# The pace model (minutes), stated in the plan itself.
READ_WPM = 200          # a learner reads technical prose at about 200 words a minute
PER_CODE_CELL = 0.75    # run a cell and read its output
PER_TRY_ITEM = 3.0      # one "Things to try" item on the sliders
PER_QUESTION = 1.0      # one check-yourself question, answered in pairs, then unfolded
PER_SOLUTION_LINE = 1.0  # writing one line of an exercise's answer, thinking included
PER_EXERCISE = 4.0      # run the checks, read a failing message, fix, once
WORKSHOP = ROOT / "classroom" / "workshop.toml"  # the plan's own choices, as data (instructor material)


def _workshop() -> dict:
    import tomllib

    try:
        with open(WORKSHOP, "rb") as f:
            return tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise SystemExit(f"{WORKSHOP.relative_to(ROOT)}: cannot read the workshop plan's data ({exc})") from None


_PLAN = _workshop()
BUDGET = int(_PLAN["budget_minutes"])  # minutes in the workshop
BREAK = int(_PLAN["break_minutes"])
INTRO, WRAP_UP = int(_PLAN["intro_minutes"]), int(_PLAN["wrap_up_minutes"])
EXERCISE_AFTER: dict[str, str] = dict(_PLAN["exercise_after"])  # exercise id -> the lesson it follows
MOVE_OUT: list[tuple[str, str, str]] = [(m["kind"], m["id"], m["where"]) for m in _PLAN["move_out"]]
NO_PLACE_EXERCISE = "placed last: give it a place in classroom/workshop.toml's [exercise_after]"
NO_PLACE_MOVE_OUT = "(not in classroom/workshop.toml's move_out: give it a place there)"
AUTHOR_NOTES = (NO_PLACE_EXERCISE, NO_PLACE_MOVE_OUT, "NO ANSWER YET")
"""What the kit says to its authors when the course outgrew the plan: a generated kit must carry none of them."""


# --- reading the lessons ----------------------------------------------------------------

def lessons() -> list[Path]:
    return sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def _section(nb, heading: str) -> str:
    """The markdown text under a `## heading` (to the next `##`), across cells."""
    text = "\n\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    m = re.search(rf"^##\s+{re.escape(heading)}\s*$(.*?)(?=^##\s|\Z)", text, re.MULTILINE | re.DOTALL | re.IGNORECASE)
    return m.group(1).strip() if m else ""


def objectives(nb) -> list[str]:
    for c in nb.cells:
        if c.cell_type == "markdown" and "**Learning objectives.**" in c.source:
            after = c.source.split("**Learning objectives.**", 1)[1]
            bullets = re.findall(r"^\s*[-*]\s+(.+)$", after, re.MULTILINE)
            if bullets:
                return bullets
            return [after.strip().split("\n\n")[0]]
    return []


def bullets(text: str) -> list[str]:
    """The items of a markdown list, or the rows of a markdown table ("header: cell; ..."), in a section."""
    items = [b.strip() for b in re.findall(r"^\s*-\s+(.+?)(?=^\s*-\s|\Z)", text, re.MULTILINE | re.DOTALL)]
    if items:
        return items
    rows = [r.strip().strip("|").split(" | ") for r in text.splitlines() if r.strip().startswith("|")]
    rows = [[c.strip() for c in r] for r in rows if not all(set(c.strip()) <= set("-: ") for c in r)]
    if len(rows) < 2:
        return []
    head = rows[0]
    return ["; ".join(f"*{h}*: {c}" for h, c in zip(head, r)) for r in rows[1:]]


def questions(nb) -> list[tuple[str, str]]:
    """(question, answer) pairs of the check-yourself section, answers taken from their <details>."""
    text = _section(nb, "Check yourself")
    pairs = re.findall(r"^\d+\.\s+(.*?)\s*<details><summary>[^<]*</summary>\s*(.*?)\s*</details>",
                       text, re.MULTILINE | re.DOTALL)
    return [(q.strip(), a.strip()) for q, a in pairs]


def things_to_try(nb) -> list[str]:
    items = []
    for c in nb.cells:
        if c.cell_type == "markdown" and "Things to try" in c.source:
            after = c.source.split("Things to try", 1)[1]
            items += [i.strip() for i in re.findall(r"^\d+\.\s+(.+)$", after, re.MULTILINE)]
    return items


def gpu_seconds(nb) -> float | None:
    """The time the stored run of the lesson spent in its cells (execution metadata), or None."""
    total, seen = 0.0, False
    for c in nb.cells:
        e = c.metadata.get("execution", {}) if c.cell_type == "code" else {}
        if "iopub.execute_input" in e and "shell.execute_reply" in e:
            start = _dt.datetime.fromisoformat(e["iopub.execute_input"].replace("Z", "+00:00"))
            end = _dt.datetime.fromisoformat(e["shell.execute_reply"].replace("Z", "+00:00"))
            total, seen = total + (end - start).total_seconds(), True
    return total if seen else None


def title(nb) -> str:
    for c in nb.cells:
        if c.cell_type == "markdown" and c.source.startswith("# "):
            return c.source.splitlines()[0][2:].strip()
    return "?"


@dataclass
class Lesson:
    path: Path
    number: str
    title: str
    words: int
    code_cells: int
    objectives: list[str]
    mistakes: list[str]
    questions: list[tuple[str, str]]
    tries: list[str]
    gpu_s: float | None
    cpu_s: float | None

    @property
    def minutes(self) -> float:
        run = (self.cpu_s or 0) / 60
        return (self.words / READ_WPM + PER_CODE_CELL * self.code_cells + run
                + PER_TRY_ITEM * len(self.tries) + PER_QUESTION * len(self.questions))


def read_lesson(path: Path, timings: dict) -> Lesson:
    nb = nbformat.read(path, as_version=4)
    nav.strip(nb)  # the lesson as authored: the release's navigation and Colab cells do not count
    md = [c for c in nb.cells if c.cell_type == "markdown"]
    code = [c for c in nb.cells if c.cell_type == "code"]
    return Lesson(path, path.name[:2], title(nb), sum(len(c.source.split()) for c in md), len(code),
                  objectives(nb), bullets(_section(nb, "Common mistakes")), questions(nb), things_to_try(nb),
                  gpu_seconds(nb), timings.get(path.name, {}).get("cpu_s"))


@dataclass
class Exercise:
    id: str
    title: str
    points: int
    words: int
    solution_lines: int
    notebook: str = "06_exercises.ipynb"  # the exercises/ notebook that holds it

    @property
    def minutes(self) -> float:
        return self.words / READ_WPM + PER_SOLUTION_LINE * self.solution_lines + PER_EXERCISE


def read_exercises() -> list[Exercise]:
    """Every exercise of every exercises/ notebook (each read beside its solutions/ source), in notebook order."""
    out = []
    for path in sorted(EXERCISES_DIR.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        sol = nbformat.read(SOLUTIONS_DIR / path.name, as_version=4)
        lines: dict[str, int] = {}
        for c in sol.cells:
            ex = c.metadata.get("graphcourse", {}).get("exercise")
            for block in re.findall(r"### BEGIN SOLUTION[^\n]*\n(.*?)### END SOLUTION", c.source, re.DOTALL):
                lines[ex] = lines.get(ex, 0) + sum(1 for ln in block.splitlines() if ln.strip())
        current = None
        for c in nb.cells:
            m = re.match(r"^##\s+(ex\d\d_\w+):\s*(.*?)(?:\((\d+) points?\))?\s*$", c.source.splitlines()[0]) \
                if c.cell_type == "markdown" and c.source else None
            if m:
                current = Exercise(m.group(1), m.group(2).strip(), int(m.group(3) or 1), 0, lines.get(m.group(1), 0),
                                   path.name)
                out.append(current)
            if current is not None and c.cell_type == "markdown" and not c.source.startswith("## Grading"):
                current.words += len(re.sub(r"<details>.*?</details>", "", c.source, flags=re.DOTALL).split())
            if c.cell_type == "markdown" and c.source.startswith("## ") and not m:
                current = None
    return out


# --- answers to "Things to try", computed ------------------------------------------------

NO_ANSWER = "NO ANSWER YET: add one to graphcourse/lessons/answers.py (ANSWERS), then run make instructor."


def try_answer(lesson: Lesson, item: str) -> str:
    """The computed answer to a "Things to try" item, or NO_ANSWER (tests/test_instructor.py fails on it)."""
    from ..lessons.answers import try_answer as computed

    answer = computed(lesson.number, item)
    return NO_ANSWER if answer is None else answer


# --- the pages --------------------------------------------------------------------------

def _m(x: float) -> int:
    return max(1, int(math.ceil(x)))


def _oneline(text: str) -> str:
    return re.sub(r"\s*\n\s*", " ", text).strip()


def lessons_page(les: list[Lesson]) -> str:
    out = ["# The lessons, for the instructor: goals, misconceptions, answers",
           "",
           "Generated by `python -m graphcourse.authoring.instructor` (`make instructor`) from the lessons themselves: "
           "do not edit here. The answers to *Check yourself* are the lessons' own folded answers; the "
           "answers to *Things to try* are computed with the functions the sliders call, so they hold for "
           "the toy's model as it is. Where a class gets stuck, and what to say: [stuck.md](stuck.md).",
           ""]
    for les in les:
        out += [f"## {les.title}", "",
                f"[Open the lesson](../../notebooks/{les.path.name}) · {les.words:,} words, {les.code_cells} code "
                f"cells · about {_m(les.minutes)} min in class (see the [plan](workshop-plan.md))", ""]
        out += ["**Learning goals**", ""] + [f"- {o}" for o in les.objectives] + [""]
        if les.mistakes:
            out += ["**Misconceptions it targets** (its *Common mistakes*)", ""]
            out += [f"- {_oneline(m)}" for m in les.mistakes] + [""]
        if les.tries:
            out += ["**Things to try, with answers**", ""]
            for i, item in enumerate(les.tries, 1):
                out += [f"{i}. {item}", "", f"   *Answer.* {try_answer(les, item)}", ""]
        if les.questions:
            out += ["**Check yourself, with answers**", ""]
            for i, (q, a) in enumerate(les.questions, 1):
                out += [f"{i}. {_oneline(q)}", "", f"   *Answer.* {_oneline(a)}", ""]
    return "\n".join(out).rstrip() + "\n"


@dataclass
class Item:
    kind: str  # lesson, exercise, break, intro, wrap
    key: str
    name: str
    minutes: int
    note: str = ""
    link: str = ""


def plan_items(les: list[Lesson], exs: list[Exercise]) -> tuple[list[Item], list[Item]]:
    """(the plan in the room, what moved out of it), fitted into BUDGET minutes."""
    last = les[-1].number if les else "06"
    numbers = {x.number for x in les}

    def after(exercise_id: str) -> str:  # its lesson, or the last one while its lesson is not in the course
        lesson = EXERCISE_AFTER.get(exercise_id, last)
        return lesson if lesson in numbers else last
    items = [Item("intro", "intro", "Welcome: the theatre picture, the plan, who has a GPU", INTRO)]
    for les in les:
        items.append(Item("lesson", les.number, les.title, _m(les.minutes), link=f"../../notebooks/{les.path.name}"))
        block = [e for e in exs if after(e.id) == les.number]
        for e in block:
            note = "" if e.id in EXERCISE_AFTER else NO_PLACE_EXERCISE
            items.append(Item("exercise", e.id, f"{e.id}: {e.title} ({e.points} points)", _m(e.minutes),
                              note=note, link=f"../../exercises/{e.notebook}"))
    items.append(Item("wrap", "wrap", "Wrap-up: the cheat sheet, submitting, questions", WRAP_UP,
                      link="cheat-sheet.md"))
    moved: list[Item] = []

    def total(xs):
        return sum(i.minutes for i in xs) + BREAK * (1 if sum(i.minutes for i in xs) > 90 else 0)

    listed = {(kind, key) for kind, key, _ in MOVE_OUT}
    unlisted = [(i.kind, i.key, f"homework {NO_PLACE_MOVE_OUT}") for i in reversed(items)
                if i.kind == "exercise" and (i.kind, i.key) not in listed]
    unlisted += [(i.kind, i.key, f"after the workshop {NO_PLACE_MOVE_OUT}")
                 for i in reversed(items) if i.kind == "lesson" and (i.kind, i.key) not in listed]
    original = list(items)
    for kind, key, where in MOVE_OUT + unlisted:
        if total(items) <= BUDGET:
            break
        for i in items:
            if i.kind == kind and i.key == key:
                items.remove(i)
                i.note = where
                moved.append(i)
                break
    # choose what fits: offer the exercises that moved out back, the last moved (the most wanted)
    # first; one that still fits takes its own place in the order of the day. (A lesson that moved
    # out stays out: where it goes, before or after the workshop, is a decision, not a filler.)
    in_room = {x.key for x in items if x.kind == "lesson"}
    for i in reversed(list(moved)):  # an exercise comes back only with its lesson in the room
        if i.kind == "exercise" and after(i.key) in in_room and total(items + [i]) <= BUDGET:
            moved.remove(i)
            i.note = "" if i.kind != "exercise" or i.key in EXERCISE_AFTER else \
                NO_PLACE_EXERCISE
            items = [x for x in original if x in items or x is i]
    # one break, at the item boundary nearest half-time
    elapsed, best, at = 0, None, len(items)
    for idx, i in enumerate(items):
        elapsed += i.minutes
        gap = abs(elapsed - total(items) / 2)
        if best is None or gap < best:
            best, at = gap, idx + 1
    items.insert(at, Item("break", "break", "Break", BREAK))
    return items, moved


def plan_page(les: list[Lesson], exs: list[Exercise], timings: dict) -> str:
    items, moved = plan_items(les, exs)
    total = sum(i.minutes for i in items)
    measured = timings.get("_measured", {})
    out = ["# A three-hour workshop plan", "",
           "Generated by `python -m graphcourse.authoring.instructor` (`make instructor`) from the lessons, the exercises "
           "and `timings.json`: do not edit here.", "",
           "## How the times are made", "",
           "Every time below comes from walking the course's own files, not from a guess per lesson:", "",
           f"- **Reading**: the words of each lesson's markdown (navigation lines left out), at {READ_WPM} words a "
           f"minute.",
           f"- **Running**: {PER_CODE_CELL} min per code cell (run it, read its output), plus the time the lesson's "
           f"cells took to run on a CPU, measured by `make instructor-timings` (nbclient, top to bottom"
           + (f", on {measured.get('machine')}, {measured.get('date')}" if measured else "") + ").",
           f"- **Doing**: {PER_TRY_ITEM:g} min per *Things to try* item, {PER_QUESTION:g} min per *Check yourself* "
           f"question (answered in pairs, then unfolded).",
           f"- **Exercises**: the words of the exercise at {READ_WPM} words a minute, {PER_SOLUTION_LINE:g} min per "
           f"non-blank line of the model answer in `solutions/` (thinking included), and {PER_EXERCISE:g} min to "
           f"run the checks and fix once.",
           f"- The plan must fit {BUDGET} min with a {BREAK}-minute break. While it does not, parts move out of the "
           f"room in a fixed order (lesson 00 to the week before, lessons 07-08 to after the workshop, then "
           f"exercises to homework, lesson 01 to pre-reading); then the exercises that moved out are offered back, "
           f"the most wanted first, wherever one still fits. What stays out is listed under the table.", "",
           "Treat the times as a floor for a room of beginners: a class of thirty runs slower than one learner, "
           "and the [stuck points](stuck.md) eat minutes. When you run the workshop, note where you ran over.", "",
           "## The plan", "",
           "| start | min | what | notes |", "| --- | --- | --- | --- |"]
    clock = 0
    for i in items:
        name = f"[{i.name}]({i.link})" if i.link else i.name
        kind = {"lesson": "lesson", "exercise": "exercise", "break": "", "intro": "", "wrap": ""}[i.kind]
        out.append(f"| {clock // 60}:{clock % 60:02d} | {i.minutes} | {kind + ': ' if kind else ''}{name} | {i.note} |")
        clock += i.minutes
    out += [f"| {clock // 60}:{clock % 60:02d} | | end ({total} min of {BUDGET}) | |", ""]
    if moved:
        out += ["**Out of the room** (to keep the plan within three hours):", ""]
        out += [f"- {i.kind} {i.name} ({i.minutes} min): {i.note}" for i in moved] + [""]
    out += ["## The figures behind it", "",
            "| lesson | words | code cells | things to try | questions | CPU run (s) | stored GPU run (s) | minutes |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for les in les:
        cpu = f"{les.cpu_s:.0f}" if les.cpu_s is not None else "not measured"
        gpu = f"{les.gpu_s:.0f}" if les.gpu_s is not None else "-"
        out.append(f"| {les.number} {les.title.split(':')[0].split('·')[-1].strip()} | {les.words:,} | "
                   f"{les.code_cells} | {len(les.tries)} | {len(les.questions)} | {cpu} | {gpu} | "
                   f"{les.minutes:.1f} |")
    out += ["", "| exercise | points | words | answer lines | minutes |", "| --- | --- | --- | --- | --- |"]
    for e in exs:
        out.append(f"| {e.id} | {e.points} | {e.words} | {e.solution_lines} | {e.minutes:.1f} |")
    out += ["", "*Stored GPU run*: the time the lesson's cells took when it was last executed and stored on the "
            "course's GPU machine (each cell's execution metadata). A learner on a GPU runs the measurements live; "
            "without one, the GPU cells show recorded figures and run in about the CPU time.", ""]
    return "\n".join(out).rstrip() + "\n"


def load_timings() -> dict:
    return json.loads(TIMINGS.read_text()) if TIMINGS.exists() else {}


def measure(paths: list[Path]) -> dict:
    """Run each lesson top to bottom on this machine, in memory (nothing is written), and time it."""
    from nbclient import NotebookClient
    from tqdm import tqdm

    out = {}
    for path in tqdm(paths, desc="timing lessons", unit="lesson"):
        nb = nbformat.read(path, as_version=4)  # executed in memory; the lesson on disk is not written
        start = time.perf_counter()
        NotebookClient(nb, timeout=900, kernel_name="python3",
                       resources={"metadata": {"path": str(path.parent)}}).execute()
        seconds = time.perf_counter() - start
        out[path.name] = {"cpu_s": round(seconds, 1)}
        tqdm.write(f"{path.name}: {seconds:.1f} s")
    import os
    out["_measured"] = {"machine": f"{os.cpu_count()}-core {platform.machine()} CPU, no GPU, "
                                   f"Python {platform.python_version()}",
                        "date": _dt.date.today().isoformat(),
                        "how": "nbclient, each lesson top to bottom in a fresh kernel, kernel start included"}
    return out


def pages() -> dict[Path, str]:
    timings = load_timings()
    les = [read_lesson(p, timings) for p in lessons()]
    exs = read_exercises()
    return {KIT / "lessons.md": lessons_page(les), KIT / "workshop-plan.md": plan_page(les, exs, timings)}


def update(check: bool = False) -> list[str]:
    stale = []
    for path, text in pages().items():
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            stale.append(path.name)
            if not check:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m graphcourse.authoring.instructor", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the generated pages are out of date")
    parser.add_argument("--measure", action="store_true", help="first time every lesson on this CPU (minutes)")
    args = parser.parse_args(argv)
    try:
        if args.measure:
            data = measure(lessons())
            TIMINGS.parent.mkdir(parents=True, exist_ok=True)
            TIMINGS.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        stale = update(check=args.check)
    except LookupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.check and stale:
        print(f"instructor kit out of date: {', '.join(stale)}: run make instructor "
              f"(python -m graphcourse.authoring.instructor)", file=sys.stderr)
        return 1
    print(f"instructor kit {'checked' if args.check else 'written'}"
          + (f": updated {', '.join(stale)}" if stale and not args.check else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
