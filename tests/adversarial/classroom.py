"""Build the adversarial class: hostile learners (tests/adversarial/learners/*.py), broken notebooks, honest classmates.

Each hostile learner is the exercises/ copy of the solutions notebook with
* the model answer in the exercises its header calls honest (its "honest part"), and
* its attack code (after the shared prelude.py) in the answer cells its header names,
* the untouched stub everywhere else.
A header looks like::

    # attack: what a student tries, in one line
    # honest: ex01_bucket_picker | all | none | all-but:ex02_keep_outputs
    # where: others | ex02_keep_outputs | append:ex01_bucket_picker   (others: the exercises in ATTACKED)
    # later: full        (optional: the honest exercises after the attack must still earn full marks)
    # prelude: no        (optional: leave out the shared helpers of prelude.py, whose imports a scan flags)
    # notebooks: all     (optional: hand in every exercise notebook, not only those its answers are in)

A hostile learner hands in the notebooks that hold the exercises its `where` names (the first notebook for
`others`), or every one with `notebooks: all`; `honest: all` means every exercise of what it hands in. The
other notebooks are "not handed in" (nothing earned, no kernel). Honest classmates hand in every notebook.

``@@RUN_ID@@`` in the code becomes the run's marker: every process an attack starts carries it in its
command line or environment, so the test can tell whether one outlived the grader, and end it.
``@@EXERCISE@@`` becomes the id of the exercise whose answer cell holds the code.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from graphcourse.authoring import build_exercises as be

HERE = Path(__file__).resolve().parent
LEARNERS = HERE / "learners"
BOOKS = be.solution_paths(be.SOLUTIONS_DIR)  # every exercise notebook: 06_exercises, 07_compile_and_control_flow, ...
SOLUTION = BOOKS[0]
ATTACKED = ("ex02_keep_outputs", "ex09_graphed_aliasing")  # where `where: others` puts an attack (two keep it quick)


@dataclass
class Learner:
    name: str
    kind: str  # "honest", "hostile" or "invalid"
    attack: str
    honest: set[str] = field(default_factory=set)  # exercises answered with the model answer
    later: set[str] = field(default_factory=set)  # honest exercises after the attack that must keep full marks
    path: Path | None = None


def exercises(book: Path | None = None) -> list[be.Exercise]:
    """The exercises of one solutions notebook, or (book=None) of all of them, in order."""
    return [ex for b in ([book] if book else BOOKS) for ex in be.layout_of(nbformat.read(b, as_version=4), b.name).exercises]


def book_of(exercise: str) -> Path:
    """The solutions notebook holding an exercise."""
    return next(b for b in BOOKS if exercise in {ex.id for ex in exercises(b)})


def model_answers() -> dict[str, str]:
    out = {}
    for b in BOOKS:
        nb = nbformat.read(b, as_version=4)
        out.update({ex.id: nb.cells[ex.answer].source for ex in exercises(b)})
    return out


def learner_copy(answers: dict[str, str], others: str = "stub", book: Path = SOLUTION) -> nbformat.NotebookNode:
    """The exercises/ copy of `book` with these answers written in; the other answer cells keep the stub
    (others="stub") or are deleted (others="delete": those exercises are "missing" and cost the grader no kernel)."""
    nb = nbformat.reads(be.expected_exercises(be.SOLUTIONS_DIR)[book.name], as_version=4)
    keep = []
    for cell in nb.cells:
        meta = cell.metadata.get("graphcourse", {})
        if meta.get("role") == "answer" and meta.get("exercise") in answers:
            cell.source = answers[meta["exercise"]]
        elif meta.get("role") == "answer" and others == "delete":
            continue
        keep.append(cell)
    nb.cells = keep
    return nb


def parse_header(text: str) -> dict[str, str]:
    head = {}
    for line in text.splitlines():
        if not line.startswith("# ") or ":" not in line:
            break
        key, _, value = line[2:].partition(":")
        head[key.strip()] = value.strip()
    return head


def learner_books(answers: dict[str, str], others: str = "stub",
                  books: list[Path] | None = None) -> dict[str, nbformat.NotebookNode]:
    """File name -> learner copy, for each notebook in `books` (default: every one)."""
    return {b.name: learner_copy({k: v for k, v in answers.items() if book_of(k) == b}, others, b)
            for b in (books or BOOKS)}


def hostile(path: Path, run_id: str) -> tuple[Learner, dict[str, nbformat.NotebookNode]]:
    text = path.read_text(encoding="utf-8")
    head = parse_header(text)
    where = head["where"]
    target = where.split(":", 1)[1] if where.startswith("append:") else where
    if head.get("notebooks") == "all":
        books = list(BOOKS)
    else:
        books = [SOLUTION] if target == "others" else [book_of(target)]
    ids = [ex.id for b in books for ex in exercises(b)]
    honest_spec = head["honest"]
    if honest_spec == "all":
        honest = set(ids)
    elif honest_spec == "none":
        honest = set()
    elif honest_spec.startswith("all-but:"):
        honest = set(ids) - {honest_spec.split(":", 1)[1]}
    else:
        honest = set(honest_spec.split())
    assert honest <= set(ids), (path.name, honest - set(ids))
    prelude = (HERE / "prelude.py").read_text(encoding="utf-8") if head.get("prelude") != "no" else ""
    model = model_answers()
    answers = {ex: model[ex] for ex in honest}

    def code(ex: str) -> str:
        return (prelude + "\n\n" + text).replace("@@RUN_ID@@", run_id).replace("@@EXERCISE@@", ex)

    if where == "others":
        targets = [ex for ex in ids if ex not in honest and ex in ATTACKED]
        for ex in targets:
            answers[ex] = code(ex)
    elif where.startswith("append:"):
        ex = where.split(":", 1)[1]
        targets = [ex]
        answers[ex] = answers.get(ex, "") + "\n\n" + code(ex)
    else:
        targets = [where]
        answers[where] = code(where)
    first = min(ids.index(t) for t in targets)
    later = {ex for ex in ids[first + 1:] if ex in honest} if head.get("later") == "full" else set()
    # points the honest part may earn: an exercise whose answer cell also holds attack code is not honest
    honest_part = honest if where.startswith("append:") else honest - set(targets)
    learner = Learner(path.stem, "hostile", head["attack"], honest_part, later)
    return learner, learner_books(answers, others="delete", books=books)


def invalid_notebooks() -> dict[str, tuple[str, bytes]]:
    """name -> (what is wrong, the bytes of the file): notebooks a grader must report, never choke on."""
    good = be.expected_exercises(be.SOLUTIONS_DIR)[SOLUTION.name]
    nb = json.loads(good)
    wrong_tags = json.loads(good)
    for c in wrong_tags["cells"]:
        c.setdefault("metadata", {})["tags"] = 7
    wrong_meta = json.loads(good)
    for c in wrong_meta["cells"]:
        c["metadata"]["graphcourse"] = ["not", "a", "dict"]
    source_int = json.loads(good)
    for c in source_int["cells"]:
        c["source"] = 12345
    cells_dict = dict(nb, cells={"0": nb["cells"][0]})
    deep = "[" * 100_000 + "]" * 100_000
    return {
        "invalid_tags_int": ("an integer where a tag list belongs", json.dumps(wrong_tags).encode()),
        "invalid_meta_list": ("metadata.graphcourse is a list", json.dumps(wrong_meta).encode()),
        "invalid_source_int": ("every cell's source is an integer", json.dumps(source_int).encode()),
        "invalid_cells_dict": ("cells is a dict, not a list", json.dumps(cells_dict).encode()),
        "invalid_utf16": ("the notebook saved as UTF-16", good.encode("utf-16")),
        "invalid_binary": ("binary garbage", bytes(range(256)) * 64),
        "invalid_deep": ("JSON nested 100000 deep", deep.encode()),
        "invalid_empty": ("an empty file", b""),
        "invalid_truncated": ("a truncated notebook", good.encode()[: len(good) // 2]),
        "invalid_not_object": ("JSON that is a list, not an object", b"[1, 2, 3]"),
    }


HONEST_NAMES = {  # honest classmates, some with names a terminal or a spreadsheet would misread
    "honest_alice": "plain",
    "=HYPERLINK(\"http:__evil\",\"click\")": "a spreadsheet formula",
    "\x1b[31mred\x1b[0m\x1b]0;title\x07": "terminal escape sequences",
}
ODD_NAMES = {  # classmates who deleted every answer cell (nothing to run), named to trip a report
    "-2+3": "a leading minus",
    "<img src=x onerror=alert(1)>&amp;": "HTML (a folder name cannot hold a slash)",
    "@SUM(A1)": "a leading @",
    "tab\tand\rreturn": "a tab and a carriage return",
}


def build(root: Path, run_id: str, only: list[str] | None = None) -> dict[str, Learner]:
    """Write the class into root (one folder per learner); return what each learner is."""
    learners: dict[str, Learner] = {}
    ids = {ex.id for ex in exercises()}

    def save(learner: Learner, nb: nbformat.NotebookNode | bytes | dict) -> None:
        folder = root / learner.name
        folder.mkdir(parents=True)
        # a notebook (a NotebookNode is a dict too) or its bytes: the first notebook; else {file name: notebook}
        books = {SOLUTION.name: nb} if isinstance(nb, (bytes, nbformat.NotebookNode)) else nb
        for name, one in books.items():
            learner.path = folder / name
            if isinstance(one, bytes):
                learner.path.write_bytes(one)
            else:
                nbformat.write(one, learner.path)
        learner.path = folder / next(iter(books))
        learners[learner.name] = learner

    for name, what in HONEST_NAMES.items():
        if only is not None and "honest" not in only:
            continue  # an honest classmate hands in every exercise notebook, every answer the model's
        save(Learner(name, "honest", f"an honest classmate, named with {what}", set(ids)), learner_books(model_answers()))
    for name, what in ODD_NAMES.items():
        if only is None:
            nb = learner_copy({}, others="delete")
            save(Learner(name, "odd", f"no answers, named with {what}"), nb)
    for path in sorted(LEARNERS.glob("*.py")):
        if only is not None and path.stem not in only:
            continue
        learner, nb = hostile(path, run_id)
        save(learner, nb)
    for name, (what, data) in invalid_notebooks().items():
        if only is not None and name not in only:
            continue
        save(Learner(name, "invalid", what), data)
    return learners
