"""Self-check for learners: which of an exercise's visible checks match the model answer, never the expected values.

In the exercise notebook, after running an answer::

    from graphcourse.authoring.selfcheck import check
    check("ex03")            # one exercise (its id, or a prefix such as "ex03"); check() for this notebook's

From a terminal (nbval runs the whole notebook; this plugin names every check by exercise and check)::

    make check NB=my-work/06_exercises.ipynb
    # = pytest -p graphcourse.authoring.selfcheck --nbval-lax --nbval-current-env my-work/06_exercises.ipynb

How it knows without showing the answers: ``python -m graphcourse.authoring.selfcheck --record`` runs the model answers in
solutions/ on the visible checks' inputs (seed 0, the same inputs a learner's notebook draws) and writes, for every
visible check, a salted SHA-256 of each observation into ``exercises/selfcheck.json``. A self-check runs the
course's own (pristine) check cells in the learner's kernel, hashes what it observes the same way and compares.
Floats are compared to 6 significant digits. It is a self-check, not a grade: the grader also runs hidden checks
on inputs the learner has not seen (fixed for the assignment), confined, and compares plain observations with the model's.
The hashes hide the values from plain sight only; a learner who brute-forces a hash of a small answer learns the
answer to one visible input, which earns nothing at grading.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import hashlib
import io
import json
import re
import sys
from pathlib import Path

from ..core.exercise_format import solution_paths
from ..core.paths import EXERCISES_DIR, SOLUTIONS_DIR

DATA_NAME = "selfcheck.json"
SALT = "graphcourse-selfcheck-v1"
CUDA_NOTE = "not checked here: needs a CUDA GPU (the grader runs it where one is)"
CUDA2_NOTE = "not checked here: needs two GPUs (the grader runs it where there are two)"
SKIP_NOTES = {"cuda": "needs a CUDA GPU: not checked here", "cuda2": "needs two GPUs: not checked here"}


# --- what the checks are ------------------------------------------------------------------------

def _meta(cell) -> dict:
    g = cell.get("metadata", {}).get("graphcourse")
    return g if isinstance(g, dict) else {}


def check_cells(nb: nbformat.NotebookNode) -> list[dict]:
    """Every visible check cell of a notebook the builder stamped: {id, exercise, name, points, needs, source}."""
    out, seen = [], {}
    for cell in nb.cells:
        meta = _meta(cell)
        if cell.get("cell_type") != "code" or meta.get("role") != "check" or not meta.get("exercise"):
            continue
        ex = meta["exercise"]
        seen[ex] = seen.get(ex, 0) + 1
        spec = meta.get("check") if isinstance(meta.get("check"), dict) else {}
        if spec.get("hidden"):
            continue
        name = spec.get("name") or f"check-{seen[ex]}"
        out.append({"id": f"{ex}/{name}", "exercise": ex, "name": name, "points": spec.get("points", 1),
                    "needs": list(spec.get("needs", [])), "source": cell.source, "cell_id": cell.get("id")})
    return out


def _course_notebooks(folder: Path) -> list[Path]:
    return sorted(p for p in Path(folder).glob("*.ipynb") if not p.name.startswith("."))


def pristine_checks(folder: Path = EXERCISES_DIR) -> dict[str, dict]:
    """check id -> check, from the course's own exercises/ (what the learner's copy started as)."""
    import nbformat  # here, not at the top: a grading kernel imports this module, and nbformat costs ~0.8 s
    out = {}
    for path in _course_notebooks(folder):
        for c in check_cells(nbformat.read(path, as_version=4)):
            out[c["id"]] = c
    return out


def answer_names(folder: Path = EXERCISES_DIR) -> dict[str, list[str]]:
    """exercise id -> the names its answer cell defines (top-level def, class, assignment), from the course's own
    exercises/: what a learner writes, named in "not answered yet" / "run your answer cell first"."""
    import nbformat  # here, not at the top: a grading kernel imports this module, and nbformat costs ~0.8 s
    out: dict[str, list[str]] = {}
    for path in _course_notebooks(folder):
        for cell in nbformat.read(path, as_version=4).cells:
            meta = _meta(cell)
            if cell.get("cell_type") != "code" or meta.get("role") != "answer" or not meta.get("exercise"):
                continue
            names = out.setdefault(meta["exercise"], [])
            try:
                tree = ast.parse(cell.source)
            except SyntaxError:
                continue
            for node in tree.body:
                found = ([node.name] if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else
                         [t.id for t in node.targets if isinstance(t, ast.Name)] if isinstance(node, ast.Assign) else
                         [node.target.id] if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                         else [])
                names.extend(n for n in found if not n.startswith("_") and n not in names)
    return out


# --- hashing ---------------------------------------------------------------------------------------

def _canonical(value):
    if isinstance(value, float):
        return float(f"{value:.6g}")
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items()}
    return value


def digest(check_id: str, key: str, record: dict) -> str:
    """The salted hash of one observation (its value or the exception it raised), tolerance-free."""
    body = {k: v for k, v in record.items() if k != "tol"}
    text = json.dumps(_canonical(body), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(f"{SALT}\0{check_id}\0{key}\0{text}".encode()).hexdigest()


# --- running checks -------------------------------------------------------------------------------

def _observe_module():
    from ..grading import observe as module

    return module


def run_check(c: dict, namespace: dict, quiet: bool = True) -> tuple[dict, dict, str | None]:
    """Run one check cell's source in namespace: (observations, hints, error text or None)."""
    module = _observe_module()
    module.inputs._seed(module.SELF_CHECK_SEED, c["id"], hidden=False)
    module.observe.label(c["id"])
    module.observe.recorded().pop(c["id"], None)
    error = None
    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink) if quiet else contextlib.nullcontext():
            exec(compile(c["source"], f"<check {c['id']}>", "exec"), namespace)
    except Exception as exc:  # the learner's code broke the check: say what (never running its code), keep going
        error = _exception_text(exc)
    finally:
        module.observe.label("notebook")
    obs = dict(module.observe.recorded().get(c["id"], {}))
    hints = {k: v for k, v in module.observe.hints().items() if k in obs}
    return obs, hints, error


def _exception_text(exc: BaseException) -> str:
    """"Name: message" of an exception, read without calling anything its class defines (the class may be the
    answer's own): the nearest built-in or toygraph class's name, and the message only where observe reads it safely."""
    module = _observe_module()
    said = module.exception_message(exc)
    return module._exception_name(exc) + (f": {said}" if said else "")


def missing_need(c: dict) -> str | None:
    """The first of a check's needs this machine lacks ("cuda", "cuda2"), or None."""
    needs = c.get("needs", [])
    if "cuda" in needs and not _cuda():
        return "cuda"
    if "cuda2" in needs and _cuda_devices() < 2:
        return "cuda2"
    return None


def verdict(c: dict, expected: dict | None, obs: dict, hints: dict, error: str | None,
            said: dict | None = None) -> tuple[str, list[str]]:
    """("passed" | "differs" | "error" | "not checked", reasons) for one check.

    said: key -> the message of the exception the learner's code raised there (observe.said), shown beside
    "raised X"; the hashed record is the exception's name alone."""
    said = said or {}
    need = missing_need(c)
    if need:
        return "not checked", [CUDA_NOTE if need == "cuda" else CUDA2_NOTE]
    if expected is None:
        return "not checked", ["no recorded model observations for this check (run `python -m graphcourse.authoring.selfcheck "
                               "--record` in the course)"]
    if error is not None:
        return "error", [f"the check could not finish: {error}"]
    reasons = []
    for key, want in expected.items():
        if key not in obs:
            reasons.append(f"{key}: nothing was observed (did an earlier step fail?)")
        elif digest(c["id"], key, obs[key]) != want:
            got = obs[key]
            what = (f"raised {got['raised']}" + (f": {said[key]}" if isinstance(said.get(key), str) else "")
                    if "raised" in got else
                    f"returned a {got['value']['unplain']}, not plain data" if isinstance(got.get("value"), dict)
                    and "unplain" in got["value"] else "differs from the model answer")
            if "raised" in got and got["raised"] == "NotImplementedError":
                what = "not answered yet (NotImplementedError)"
            reasons.append(f"{key}: {what}" + (f". {hints[key]}" if hints.get(key) else ""))
    extra = [k for k in obs if k not in expected]
    if extra:
        reasons.append(f"observed {len(extra)} thing(s) the model answer does not (e.g. {extra[0]!r})")
    return ("passed" if not reasons else "differs"), reasons


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def _cuda_devices() -> int:
    if not _cuda():
        return 0
    import torch

    return int(torch.cuda.device_count())


def load_expected(folder: Path = EXERCISES_DIR) -> dict[str, dict]:
    path = Path(folder) / DATA_NAME
    if not path.exists():
        return {}
    return json.loads(path.read_text(encoding="utf-8")).get("checks", {})


def _user_namespace() -> dict:
    with contextlib.suppress(Exception):
        shell = get_ipython()  # type: ignore[name-defined]  # noqa: F821 (defined inside IPython only)
        if shell is not None:
            return shell.user_ns
    return sys.modules["__main__"].__dict__


class Results(dict):
    """{check id: (status, reasons)}; check() has printed it already, so Jupyter shows nothing more as the cell's value."""

    def _ipython_display_(self) -> None:
        return None


def _history(ns: dict) -> set[str]:
    cells = ns.get("In")
    return {str(s).strip() for s in cells if str(s).strip()} if isinstance(cells, list) else set()


def notebook_exercises(ns: dict, folder: Path = EXERCISES_DIR) -> tuple[set[str] | None, str]:
    """The exercise ids of the notebook this kernel runs, and how that was found (None: could not tell).

    First the notebook Jupyter names for this kernel (``__session__`` / ``JPY_SESSION_NAME``, the builder
    stamped its exercises into its metadata), else the course notebooks whose check cells ran in this kernel."""
    import nbformat  # here, not at the top: a grading kernel imports this module, and nbformat costs ~0.8 s
    import os

    for name in (ns.get("__session__"), os.environ.get("JPY_SESSION_NAME")):
        if isinstance(name, str) and name.endswith(".ipynb"):
            with contextlib.suppress(Exception):
                meta = nbformat.read(Path(name), as_version=4).metadata.get("graphcourse", {})
                ids = meta.get("exercises") if isinstance(meta, dict) else None
                if isinstance(ids, dict) and ids:
                    return set(ids), Path(name).name
    ran = _history(ns)
    found: set[str] = set()
    names = []
    if ran:
        for path in _course_notebooks(folder):
            cells = check_cells(nbformat.read(path, as_version=4))
            if any(c["source"].strip() in ran for c in cells):
                found |= {c["exercise"] for c in cells}
                names.append(path.name)
    return (found, ", ".join(names)) if found else (None, "")


def check(exercise: str | None = None, *, namespace: dict | None = None, folder: Path = EXERCISES_DIR) -> Results:
    """Run the visible checks of one exercise (or of this notebook's) here; print, per check, whether it matches.

    ``check()`` with no id checks the exercises of the notebook it runs in (not every notebook's).
    Returns {check id: (status, reasons)}, which Jupyter does not echo. Never shows an expected value."""
    checks = pristine_checks(folder)
    ns = namespace if namespace is not None else _user_namespace()
    if exercise is None:
        mine, where = notebook_exercises(ns, folder)
        if mine is None:
            print("could not tell which exercise notebook this is (run its check cells first, or name one: "
                  "check(\"ex13\")); checking every exercise")
        else:
            print(f"the exercises of {where}: {', '.join(sorted(mine))}")
        chosen = [c for c in checks.values() if mine is None or c["exercise"] in mine]
    else:
        chosen = [c for c in checks.values() if c["exercise"] == exercise
                  or c["exercise"].startswith(f"{exercise}_") or c["exercise"] == exercise.rstrip("_")]
    if not chosen:
        ids = sorted({c["exercise"] for c in checks.values()})
        print(f"no exercise {exercise!r} here: try one of {', '.join(ids)}")
        return Results()
    expected = load_expected(folder)
    names = answer_names(folder)
    results = Results()
    groups: dict[str, list] = {}
    for c in chosen:
        groups.setdefault(c["exercise"], []).append(c)
    for ex, group in groups.items():
        ran = []
        for c in group:
            obs, hints, error = run_check(c, ns)
            want = expected.get(c["id"], {}).get("expect")
            state = _unanswered(c, want, obs, error, names.get(ex, []))
            if isinstance(state, tuple):
                error = f"run your answer cell first (name {state[1]!r} is not defined)"
            status, reasons = verdict(c, want, obs, hints, error, _observe_module().observe.said(c["id"]))
            results[c["id"]] = (status, reasons)
            ran.append((c, status, reasons, hints, state))
        _print_exercise(ex, ran, names.get(ex, []))
    got = sum(checks[i]["points"] for i, (s, _) in results.items() if s == "passed")
    top = sum(checks[i]["points"] for i, (s, _) in results.items() if s != "not checked")
    print(f"visible checks matching the model answer: {got} of {top} points (the grader adds hidden checks)")
    return results


_NAME_ERROR = re.compile(r"NameError: name '([^']+)' is not defined")


def _unanswered(c: dict, expected: dict | None, obs: dict, error: str | None, answer: list[str]):
    """Whether a check saw no answer at all: ("unrun", name) where it stopped at an answer name the kernel does not
    know (the answer cell was not run), "stub" where everything that differs from the model raised
    NotImplementedError (the untouched stub), else None. Reads the plain records and the error text only."""
    if error is not None:
        m = _NAME_ERROR.match(error)
        if m and m[1] in answer:
            return ("unrun", m[1])
        return "stub" if error.split(":", 1)[0] == "NotImplementedError" else None
    if not expected or missing_need(c):
        return None
    raised = [k for k, v in obs.items() if isinstance(v, dict) and v.get("raised") == "NotImplementedError"]
    differs = [k for k in expected if k not in obs or digest(c["id"], k, obs[k]) != expected[k]]
    return "stub" if raised and set(differs) <= set(raised) else None


def _write_names(names: list[str]) -> str:
    if not names:
        return "write your answer in the answer cell"
    said = names[0] if len(names) == 1 else ", ".join(names[:-1]) + f" and {names[-1]}"
    return f"write {said} in the answer cell"


def _print_exercise(ex: str, ran: list, answer: list[str]) -> None:
    """One line for an exercise nothing of which is answered yet (or whose answer cell was not run), else its
    per-check report, each distinct hint once per check."""
    live = [r for r in ran if r[1] != "not checked"]
    if live and all(r[4] for r in live):
        unrun = next((r[4] for r in live if isinstance(r[4], tuple)), None)
        if unrun:
            print(f"{ex}: run your answer cell first (name {unrun[1]!r} is not defined), then check again")
        else:
            print(f"{ex}: not answered yet: {_write_names(answer)}, run it, then check again")
        return
    print(ex)
    for c, status, reasons, hints, state in ran:
        mark = {"passed": "PASS", "differs": "FAIL", "error": "FAIL", "not checked": "----"}[status]
        print(f"  {mark} {c['name']} ({c['points']} point{'s' * (c['points'] != 1)})")
        if state == "stub" and status != "not checked":
            used = [n for n in answer if re.search(rf"\b{re.escape(n)}\b", c["source"])]
            print(f"       not answered yet: {_write_names(used or answer)}, run it, then check again")
            continue
        shown: set[str] = set()
        for r in reasons[:4]:
            hint = next((h for k, h in hints.items() if isinstance(h, str) and h and r.startswith(f"{k}: ")
                         and r.endswith(f". {h}")), None)
            if hint:
                r = r[:-len(hint) - 2]
                print(f"       {r}")
                if hint not in shown:
                    shown.add(hint)
                    print(f"         hint: {hint}")
            else:
                print(f"       {r}")
        if len(reasons) > 4:
            print(f"       ... and {len(reasons) - 4} more")


# --- recording the model's observations -------------------------------------------------------------

def record(solutions_dir: Path = SOLUTIONS_DIR, out_dir: Path = EXERCISES_DIR) -> Path:
    """Run the model answers on the visible checks (in this process) and write the hashes of what they observe."""
    import nbformat  # here, not at the top: a grading kernel imports this module, and nbformat costs ~0.8 s
    data = {"salt": SALT, "note": "Written by `python -m graphcourse.authoring.selfcheck --record`: salted hashes of the "
                                  "model answer's observations on the visible checks. Do not edit.", "checks": {}}
    from ..core.exercise_format import layout_of

    for path in solution_paths(solutions_dir):
        nb = nbformat.read(path, as_version=4)
        checks = {c["cell_id"]: c for c in check_cells(nb)}
        graded = {i for ex in layout_of(nb, path.name).exercises for i in ex.checks}
        if not checks:
            raise RuntimeError(f"{path.name} has no stamped check cells: run `python -m graphcourse.authoring.build_exercises "
                               "--execute` first")
        ns: dict = {"__name__": "__main__"}
        for i, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            c = checks.get(cell.get("id"))
            if c is None and i in graded:
                continue  # a hidden check: the self-check never sees it
            if c is None:
                with contextlib.redirect_stdout(io.StringIO()):
                    exec(compile(cell.source, f"<{path.name} cell {i + 1}>", "exec"), ns)
                continue
            obs, _, error = run_check(c, ns)
            if error:
                raise RuntimeError(f"the model answer fails check {c['id']}: {error}")
            expect = {k: digest(c["id"], k, v) for k, v in obs.items()}
            data["checks"][c["id"]] = {"points": c["points"], "needs": c["needs"],
                                       "expect": None if {"cuda", "cuda2"} & set(c["needs"]) and not obs
                                       else expect}
    target = Path(out_dir) / DATA_NAME
    target.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return target


# --- the pytest plugin (make check) ----------------------------------------------------------------------

_PLUGIN_STATE: dict = {"results": {}}


def _wrap(check_id: str, source: str) -> str:
    return (f"import graphcourse.authoring.selfcheck as __selfcheck\n__selfcheck._begin({check_id!r})\n"
            f"try:\n    exec(compile({source!r}, {f'<check {check_id}>'!r}, 'exec'), globals())\n"
            f"finally:\n    __selfcheck._end({check_id!r})\n__selfcheck._verify({check_id!r})\n")


_CURRENT: dict = {}


def _begin(check_id: str) -> None:
    module = _observe_module()
    module.inputs._seed(module.SELF_CHECK_SEED, check_id, hidden=False)
    module.observe.label(check_id)
    module.observe.recorded().pop(check_id, None)


def _end(check_id: str) -> None:
    _observe_module().observe.label("notebook")


def _verify(check_id: str) -> None:
    """Inside the learner's kernel (make check): raise AssertionError with the reasons when the check differs."""
    module = _observe_module()
    c = pristine_checks().get(check_id, {"id": check_id, "needs": []})
    obs = dict(module.observe.recorded().get(check_id, {}))
    hints = {k: v for k, v in module.observe.hints().items() if k in obs}
    status, reasons = verdict(c, load_expected().get(check_id, {}).get("expect"), obs, hints, None,
                              module.observe.said(check_id))
    if status == "not checked":
        print(f"{check_id}: {'; '.join(reasons)}")
        return
    if status != "passed":
        raise AssertionError(f"{check_id} differs from the model answer:\n  " + "\n  ".join(reasons))
    print(f"{check_id}: matches the model answer")


def _rename(item, nodeid: str) -> None:
    """Give a pytest item a new node id (what -v and the summary print), across pytest versions."""
    try:
        from _pytest.nodes import coerce_node_id  # pytest 9

        item._id = coerce_node_id(nodeid)
    except ImportError:
        item._nodeid = nodeid


_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
_PLUMBING = ("__selfcheck", "/graphcourse/authoring/selfcheck.py", "/graphcourse/grading/observe.py", "File <check ")
_HEADER = re.compile(r"^(\S+)\s+Traceback \(most recent call last\)$")


def plain_traceback(traceback: str) -> tuple[str, str]:
    """(the frames of the learner's cells, the error) from a kernel's traceback: no ANSI colour codes, none of the
    self-check's own frames (its wrapper's exec(compile(...)), _verify, observe), only the frames of notebook cells
    ("Cell In[n], line k"), or the last frame where none is a cell's."""
    lines = [ln.rstrip() for ln in _ANSI.sub("", traceback or "").splitlines()]
    ename = ""
    start = 0
    for i, ln in enumerate(lines):
        m = _HEADER.match(ln)
        if m:
            ename, start = m[1], i + 1  # the last exception of a chain is the one that ended the cell
    body = lines[start:]
    cut = next((i for i in range(len(body) - 1, -1, -1) if ename and (body[i] == ename or body[i].startswith(ename + ":"))),
               len(body))
    error = "\n".join(body[cut:]).strip()
    frames, block = [], []
    for ln in body[:cut] + [""]:
        if ln.strip():
            block.append(ln)
        elif block:
            frames.append("\n".join(block))
            block = []
    frames = [f for f in frames if not any(mark in f for mark in _PLUMBING)]
    cells = [f for f in frames if f.startswith("Cell In[")]
    return "\n\n".join(cells or frames[-1:]), error or (ename or "an error")


def _readable_failure(item, excinfo) -> str:
    """A failing cell's report for a terminal: what failed (the check by name, or your cell and its error line),
    without nbval's plumbing or colour codes."""
    exc = excinfo.value
    if type(exc).__name__ != "NbCellError":  # not the cell's doing (a kernel that died, a timeout...): nbval's words
        return _ANSI.sub("", str(type(item).repr_failure(item, excinfo)))
    frames, error = plain_traceback(getattr(exc, "inner_traceback", "") or "")
    check = getattr(item, "_selfcheck_check", None)
    if check is not None and error.startswith("AssertionError: ") and " differs from the model answer" in error:
        return error[len("AssertionError: "):]  # the check's verdict: its reasons and hints, nothing else
    label = getattr(item, "_selfcheck_label", f"cell {getattr(item, 'cell_num', '?')}")
    if "Timeout of" in str(exc):
        return f"{label}: {exc} (an endless loop?)"
    if check is not None:
        head = f"{label}: the check stopped with an error from your code"
    else:
        head = f"{label} raised an error"
        source = getattr(getattr(item, "_selfcheck_source", None), "strip", lambda: "")()
        if source and not frames:
            frames = "\n".join(f"{n:4d} | {ln}" for n, ln in enumerate(source.splitlines(), 1))
    return "\n\n".join(part for part in (head + ":", frames, error) if part)


def _readable(item, label: str, check: dict | None) -> None:
    """Give an nbval item the readable failure report and a heading that names it (not "Cell 5")."""
    import types

    item._selfcheck_check = check
    item._selfcheck_label = label
    item._selfcheck_source = getattr(item, "cell", {}).get("source", "")
    item.repr_failure = types.MethodType(_readable_failure, item)
    where = item.nodeid.split("::")[0]
    item.reportinfo = lambda: (item.path, 0, f"{where}::{label}")
    item.__dict__.pop("location", None)  # computed from reportinfo on first use


def pytest_collection_modifyitems(session, config, items) -> None:
    """Name nbval's cell items by exercise and check, and run the course's own check cells with a verdict."""
    import nbformat  # here, not at the top: a grading kernel imports this module, and nbformat costs ~0.8 s
    checks = pristine_checks()
    by_cell_id = {c["cell_id"]: c for c in checks.values() if c.get("cell_id")}
    for item in items:
        cell = getattr(item, "cell", None)
        if cell is None:
            continue
        meta = _meta(cell)
        ex, role = meta.get("exercise"), meta.get("role")
        spec = meta.get("check") if isinstance(meta.get("check"), dict) else {}
        path = item.nodeid.split("::")[0]
        c = None
        if role == "check" and ex:
            c = checks.get(f"{ex}/{spec.get('name')}") if spec.get("name") else None
            c = c or by_cell_id.get(cell.get("id"))
        _readable(item, "set-up" if role == "setup" else f"{ex}/your answer" if ex and role == "answer"
                  else f"{ex}/given cell" if ex else f"cell {getattr(item, 'cell_num', '?')}", None)
        if c is not None and not c["points"]:
            _rename(item, f"{path}::{ex}/given cell")
        elif c is not None:
            _readable(item, c["id"], c)
            need = missing_need(c)
            if need:
                import pytest

                item.add_marker(pytest.mark.skip(reason=SKIP_NOTES[need]))
            new = nbformat.from_dict(dict(cell))
            new.source = _wrap(c["id"], c["source"])
            item.cell = new
            _rename(item, f"{path}::{c['id']}")
            _PLUGIN_STATE["results"].setdefault(c["exercise"], {})[c["name"]] = None
            item.user_properties.append(("check", c["id"]))
        elif role == "answer" and ex:
            _rename(item, f"{path}::{ex}/your answer")
        elif role == "context" and ex:
            _rename(item, f"{path}::{ex}/given cell")
        elif role == "setup":
            _rename(item, f"{path}::set-up")


def pytest_runtest_logreport(report) -> None:
    for key, value in getattr(report, "user_properties", []):
        if key == "check" and (report.when == "call" or report.skipped):
            ex, name = value.split("/", 1)
            _PLUGIN_STATE["results"].setdefault(ex, {})[name] = report.outcome


def pytest_terminal_summary(terminalreporter) -> None:
    results = _PLUGIN_STATE["results"]
    if not results:
        return
    checks = pristine_checks()
    tr = terminalreporter
    tr.section("self-check: visible checks per exercise")
    total = top = 0
    for ex in sorted(results):
        parts = []
        for name, outcome in results[ex].items():
            c = checks.get(f"{ex}/{name}", {})
            points = c.get("points", 1)
            need = missing_need(c) if c else None
            if need:
                parts.append(f"{name} not checked here ({SKIP_NOTES[need].split(':')[0]})")
                continue
            mark = {"passed": "ok", "failed": "FAIL", None: "not run", "skipped": "skipped"}.get(outcome, outcome)
            parts.append(f"{name} {mark}")
            top += points
            total += points if outcome == "passed" else 0
        tr.write_line(f"{ex}: " + ", ".join(parts))
    tr.write_line(f"{total} of {top} visible points match the model answer (the grader adds hidden checks, "
                  "with inputs you have not seen)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m graphcourse.authoring.selfcheck", description=__doc__.splitlines()[0])
    parser.add_argument("--record", action="store_true",
                        help="run the model answers and write exercises/selfcheck.json (course maintainers)")
    parser.add_argument("--solutions", type=Path, default=SOLUTIONS_DIR)
    parser.add_argument("--out", type=Path, default=EXERCISES_DIR)
    args = parser.parse_args(argv)
    if not args.record:
        parser.print_help()
        return 0
    print(f"wrote {record(args.solutions, args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
