"""The course's grader as a Gradescope autograder: the zip to upload, and what it runs for each submission.

    python -m graphcourse.grading.gradescope_bundle --out build/autograder.zip   # build the zip (make autograder)
    python -m graphcourse.grading.gradescope_bundle --run                        # in Gradescope's container

Gradescope (https://gradescope-autograders.readthedocs.io/en/latest/specs/) unzips the bundle into
``/autograder/source``, runs ``setup.sh`` once as root when it builds the image, then ``run_autograder`` for each
submission: the learner's files are in ``/autograder/submission``, and ``/autograder/results/results.json`` must
hold the marks. ``run_autograder`` calls ``--run``, which finds the learner's exercise notebooks (any depth), grades
them with ``python -m graphcourse.grading ... --gradescope DIR`` (the grader's own Gradescope file, one test per
check) and copies that file into place. Whatever goes wrong, the learner gets a results.json whose ``output`` says
what and what to do, with score 0, never an empty result. ``AUTOGRADER_ROOT`` (default ``/autograder``) moves the
whole tree, so the bundle can be tried outside Gradescope (tests/test_autograder.py).

Confinement: Gradescope runs everything as root, beside ``solutions/``. Before any learner's code runs, ``--run``
asks the grader's own detection (``sandbox.detect``, the one the grader confines by) whether each kernel can be
confined; where it cannot (no bubblewrap, no user namespaces), the submission is NOT graded: the results.json gives
score 0, no tests, and says why and how to fix it. An instructor who accepts the risk builds the zip with
``--allow-unconfined`` (``make autograder UNCONFINED=1``), written into the bundle's ``autograder_config.json``;
then the submission is graded unconfined and its results say so.

The bundle holds the model answers and hidden checks (``solutions/``): the grader needs them, and Gradescope
never shows an autograder's files to students. It never holds tests, the instructor kit, git, builds or caches.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from ..core.exercise_format import solution_paths
from ..core.paths import BUILD_DIR, ROOT

DEFAULT_OUT = BUILD_DIR / "autograder.zip"
DEFAULT_ROOT = "/autograder"
CONFIG = "autograder_config.json"
"""The bundle's settings, at its root (source/ in the container): {"allow_unconfined": bool}, chosen when it was built."""

FILES = ["pyproject.toml", "requirements.lock", "bootstrap.py", "README.md"]
"""Single files the set-up needs: bootstrap.py installs the course (pip reads pyproject.toml, whose readme is README.md)."""
FOLDERS = {"graphcourse": (".py", ".json", ".cfg", ".toml"), "toygraph": (".py",), "solutions": (".ipynb",), "data": (".json",)}
"""What the grader needs, by suffix: the packages (each learner's kernel imports them), the model answers and hidden
checks, and the recorded figures the kernels may read. Not exercises/: the grader works from solutions/ alone."""
NEVER = {"tests", "docs", ".git", "build", ".venv", "my-work", "notebooks", "exercises", "classroom", "wheelhouse",
         "grading-out", "__pycache__", ".ipynb_checkpoints", ".pytest_cache", ".hypothesis"}
"""Path parts that never enter the bundle, whatever FILES and FOLDERS say (checked again on every entry)."""
SKIP_DIRS = {"__MACOSX", ".ipynb_checkpoints", "__pycache__", ".git", ".Trash", ".virtual_documents"}
"""Folders of a submission that hold no learner's work (a Mac's zip, Jupyter's checkpoints...)."""

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, when it builds the autograder's image: on Ubuntu, as root (Gradescope's container runs
# everything as root, so no sudo), from the unzipped bundle in /autograder/source. It installs the course with the
# versions it was tested with (requirements.lock; bootstrap.py does what `make lab` does), the CPU build of torch,
# and bubblewrap, with which the grader confines each learner's kernel (docs/grading.md). Where the container cannot
# make namespaces, run_autograder grades nothing and says so in each result, unless the zip was built with
# --allow-unconfined (make autograder UNCONFINED=1): then it grades NOT CONFINED and each result says that.
# Written by python -m graphcourse.grading.gradescope_bundle: change that module, not this copy.
set -euo pipefail
SOURCE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TORCH="${TORCH:-@TORCH@}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q || echo "setup.sh: apt-get update failed; trying the package lists the image has"
apt-get install -y -q bubblewrap util-linux \\
  || echo "setup.sh: bubblewrap could not be installed: submissions will not be graded (the zip refuses to grade unconfined unless built with --allow-unconfined)"
# The course needs Python 3.11 or newer: Ubuntu 24.04 has 3.12; on 22.04, python3.11 comes from its universe.
PY=""
for cand in python3.13 python3.12 python3.11 python3; do
  if command -v "$cand" >/dev/null && "$cand" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    PY="$(command -v "$cand")"; break
  fi
done
if [ -z "$PY" ]; then
  apt-get install -y -q python3.11 python3.11-venv
  PY="$(command -v python3.11)"
fi
VER="$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
"$PY" -c 'import ensurepip' 2>/dev/null || apt-get install -y -q "python$VER-venv"
"$PY" "$SOURCE/bootstrap.py" --venv "$SOURCE/.venv" --torch "$TORCH" setup-lab
"$SOURCE/.venv/bin/python" -c 'import torch, nbclient, ipykernel, graphcourse.grading; print("setup.sh: the course and torch", torch.__version__, "are installed")'
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for each submission, as root, in a fresh container of the image setup.sh built: it grades
# the learner's exercise notebooks in $ROOT/submission with the course's grader and writes
# $ROOT/results/results.json (python -m graphcourse.grading.gradescope_bundle --run). If even that cannot run,
# the learner still gets a results.json that says so. AUTOGRADER_ROOT (default /autograder) moves the tree, to try
# the bundle elsewhere; without setup.sh's .venv, the python3 on PATH (with the course's packages) is used.
set -u
ROOT="${AUTOGRADER_ROOT:-/autograder}"
export AUTOGRADER_ROOT="$ROOT"
SOURCE="$ROOT/source"
PY="$SOURCE/.venv/bin/python"
[ -x "$PY" ] || PY="$(command -v python3 || true)"
mkdir -p "$ROOT/results"
rm -f "$ROOT/results/results.json"
if [ -n "$PY" ]; then
  (cd "$SOURCE" && PYTHONPATH="$SOURCE" "$PY" -m graphcourse.grading.gradescope_bundle --run)
else
  echo "run_autograder: no Python found (did setup.sh run?)"
fi
if [ ! -s "$ROOT/results/results.json" ]; then
  cat > "$ROOT/results/results.json" <<'EOF'
{"score": 0, "tests": [], "visibility": "visible", "stdout_visibility": "hidden", "output": "The autograder could not start, so your notebooks were not graded. This is not a mark on your work: please tell your instructor, who can read the autograder's log and regrade your submission."}
EOF
fi
"""


# --- building the zip ----------------------------------------------------------------------------------

def _bootstrap_constant(name: str, root: Path = ROOT) -> str:
    """A string constant of bootstrap.py (read, not imported: it is the set-up script, not a module)."""
    tree = ast.parse((root / "bootstrap.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise KeyError(f"bootstrap.py has no {name}")


def cpu_torch(root: Path = ROOT) -> str:
    """The pip arguments of the course's pinned torch, CPU build (Gradescope's containers have no GPU)."""
    return f"{_bootstrap_constant('DEFAULT_TORCH', root)} --index-url {_bootstrap_constant('CPU_INDEX', root)}"


def bundle_files(root: Path = ROOT) -> list[str]:
    """The course's files the bundle holds, as paths relative to the course folder, sorted."""
    out = [name for name in FILES if (root / name).is_file()]
    for folder, suffixes in FOLDERS.items():
        for dirpath, dirnames, filenames in os.walk(root / folder):
            dirnames[:] = sorted(d for d in dirnames if d not in NEVER and not d.startswith("."))
            for name in sorted(filenames):
                path = Path(dirpath, name)
                if name.endswith(suffixes) and not name.startswith(".") and path.is_file() and not path.is_symlink():
                    out.append(path.relative_to(root).as_posix())
    for rel in out:
        if set(Path(rel).parts) & NEVER:
            raise RuntimeError(f"{rel} must not enter the autograder bundle")
    return sorted(out)


def _entry(name: str, mode: int) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))  # same files, same bytes
    info.external_attr = (0o100000 | mode) << 16  # a regular file with its mode, which unzip restores
    info.compress_type = zipfile.ZIP_DEFLATED
    return info


def config_bytes(allow_unconfined: bool = False) -> bytes:
    """The bundle's autograder_config.json."""
    return (json.dumps({"allow_unconfined": bool(allow_unconfined)}, indent=1, sort_keys=True) + "\n").encode()


def build(out: Path = DEFAULT_OUT, root: Path = ROOT, torch: str | None = None,
          allow_unconfined: bool = False) -> list[str]:
    """Write the autograder zip: setup.sh, run_autograder and its config at its root, then the course's files.
    Returns its names. allow_unconfined: grade where learners' kernels cannot be confined (default: refuse to)."""
    missing = [n for n in ("solutions", "graphcourse", "toygraph", "bootstrap.py", "pyproject.toml") if not (root / n).exists()]
    if missing or not solution_paths(root / "solutions"):
        raise FileNotFoundError(f"{root} is not the authored course (missing: {', '.join(missing) or 'solutions/*.ipynb'}): "
                                "build the autograder from the repository, which holds solutions/")
    files = bundle_files(root)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".part")
    # The zip holds solutions/: readable by its owner alone (on a class server, learners' kernels could read a
    # world-readable one in build/), created so from the start, not opened up between writing and chmod.
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as raw, zipfile.ZipFile(raw, "w") as z:
        z.writestr(_entry("setup.sh", 0o755), SETUP_SH.replace("@TORCH@", torch or cpu_torch(root)))
        z.writestr(_entry("run_autograder", 0o755), RUN_AUTOGRADER)
        z.writestr(_entry(CONFIG, 0o644), config_bytes(allow_unconfined))
        for rel in files:
            z.writestr(_entry(rel, 0o755 if rel == "bootstrap.py" else 0o644), (root / rel).read_bytes())
    os.replace(tmp, out)
    return ["setup.sh", "run_autograder", CONFIG] + files


# --- grading one submission, in the container ----------------------------------------------------------

def failure(message: str) -> dict:
    """A results.json that grades nothing and tells the learner why (score 0)."""
    return {"score": 0, "tests": [], "output": message, "visibility": "visible", "stdout_visibility": "hidden"}


def allows_unconfined(source: Path) -> bool:
    """Whether the bundle under source was built with --allow-unconfined (a missing or unreadable config: no)."""
    try:
        return json.loads((source / CONFIG).read_text(encoding="utf-8")).get("allow_unconfined") is True
    except (OSError, ValueError, AttributeError):
        return False


FIX = ("To fix it (instructor): give the image bubblewrap and user namespaces (setup.sh installs bubblewrap with "
       "apt-get: read its log in the image build, and choose an Ubuntu base image whose container lets bubblewrap "
       "make namespaces), or, accepting that learners' code then runs as root beside the model answers and hidden "
       "checks, rebuild the zip with `make autograder UNCONFINED=1` (python -m graphcourse.grading.gradescope_bundle "
       "--allow-unconfined) and upload it again; see docs/grading.md, 'On Gradescope'.")


def refused(reasons: list[str] | tuple[str, ...]) -> dict:
    """The results.json of a submission not graded because its kernels could not be confined (score 0, no tests)."""
    result = failure("Your notebooks were NOT graded: this autograder does not run learners' code unconfined, and "
                     "this Gradescope container cannot confine it (" + "; ".join(reasons or ["no reason given"]) + "). "
                     "This is not a mark on your work: please tell your instructor, who can regrade your submission "
                     "once it is fixed. " + FIX)
    result["extra_data"] = {"graded": False, "confined": False, "allow_unconfined": False,
                            "confinement": "NOT CONFINED: " + "; ".join(reasons)}
    return result


UNCONFINED_LABEL = ("GRADED UNCONFINED: your code ran without the grader's confinement (no bubblewrap or user "
                    "namespaces in this container), as the instructor chose for this assignment (--allow-unconfined).")


def find_notebooks(submission: Path) -> tuple[list[Path], list[str], list[str]]:
    """(notebooks, other files, notes): every *.ipynb under the submission at any depth, links and hidden files left out."""
    books, others, notes = [], [], []
    for dirpath, dirnames, filenames in os.walk(submission):
        keep = []
        for d in sorted(dirnames):
            if d in SKIP_DIRS or d.startswith("."):
                continue
            if Path(dirpath, d).is_symlink():
                notes.append(f"{Path(dirpath, d).relative_to(submission)}: a link to a folder, not followed")
                continue
            keep.append(d)
        dirnames[:] = keep
        for name in sorted(filenames):
            path = Path(dirpath, name)
            rel = path.relative_to(submission)
            if not name.lower().endswith(".ipynb"):
                others.append(str(rel))
            elif path.is_symlink():
                notes.append(f"{rel}: a link, not a notebook file: not graded")
            elif name.startswith("."):
                notes.append(f"{rel}: a hidden file (its name starts with a dot): not graded")
            elif path.is_file():
                books.append(path)
    return books, others, notes


def _staged_name(name: str, taken: set[str]) -> str:
    stem, n = name[: -len(".ipynb")], 2
    while name.lower() in taken:  # two folders each with 06_exercises.ipynb: the grader keeps the newer
        name, n = f"{stem} ({n}).ipynb", n + 1
    taken.add(name.lower())
    return name


def grade_submission(root: Path, python: str = sys.executable, allow_unconfined: bool | None = None) -> dict:
    """Gradescope's results for the notebooks under root/submission, graded by the course's grader. Where the
    learners' kernels cannot be confined, nothing is graded unless allow_unconfined (default: the bundle's config)."""
    from .notebooks import InvalidNotebook, parse, read_bytes
    from .sandbox import detect

    source, submission = root / "source", root / "submission"
    if allow_unconfined is None:
        allow_unconfined = allows_unconfined(source)
    expected = ", ".join(p.name for p in solution_paths(source / "solutions")) or "the exercise notebooks"
    books, others, notes = find_notebooks(submission) if submission.is_dir() else ([], [], [])
    if not books:
        seen = f" Your submission holds: {', '.join(others[:10])}{', ...' if len(others) > 10 else ''}." if others else \
            " Your submission is empty."
        return failure("No exercise notebook (.ipynb file) was found in your submission, so nothing was graded."
                       + seen + f" Upload your exercise notebooks as Jupyter saved them ({expected}; any of them, in "
                       "any folder), not a PDF, an HTML export or a link." + "".join(f" Note: {n}." for n in notes))
    work = Path(tempfile.mkdtemp(prefix="autograder-"))
    try:
        learner = work / "learner"
        learner.mkdir()
        staged, unreadable, taken = [], [], set()
        for path in books:
            rel = path.relative_to(submission)
            try:
                data, mtime = read_bytes(path)
                parse(data, str(rel))
            except InvalidNotebook as exc:
                unreadable.append(f"{rel}: {exc}")
                continue
            name = _staged_name(path.name, taken)
            if name != path.name:
                notes.append(f"{rel} was graded as {name} (another notebook of yours has its name)")
            (learner / name).write_bytes(data)
            os.utime(learner / name, (mtime, mtime))  # of two copies of one notebook, the grader grades the newer
            staged.append(learner / name)
        if not staged:
            return failure("None of your notebooks could be read, so nothing was graded. " + "; ".join(unreadable)
                           + ". Open each in Jupyter, save it (File > Save Notebook), and upload the saved .ipynb again.")
        confinement = detect()  # the grader's own test, before any learner's code runs
        print("run_autograder: " + confinement.describe()
              + ("" if confinement.confined else f" (allow_unconfined: {allow_unconfined})"), flush=True)
        if not confinement.confined and not allow_unconfined:
            return refused(confinement.reasons)
        report, out = work / "report.json", work / "gradescope"
        cmd = [python, "-m", "graphcourse.grading", *map(str, staged), "--report", str(report), "--gradescope", str(out),
               "--solutions", str(source / "solutions"), "--jobs", "1", "--quiet"]
        if allow_unconfined:
            cmd.append("--allow-unconfined")  # checked above: only a bundle built with it gets here unconfined
        print("run_autograder:", " ".join(cmd), flush=True)
        done = subprocess.run(cmd, cwd=source, env=dict(os.environ, PYTHONPATH=str(source)), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, errors="replace")
        print(done.stdout, flush=True)  # the grader's log: in Gradescope's stdout, which only instructors read
        results = sorted(out.glob("*.json")) if out.is_dir() else []
        if done.returncode != 0 or len(results) != 1:
            last = done.stdout.strip().splitlines()[-1:] or ["no message"]
            return failure("The grader could not grade your notebooks (" + last[0][:500] + "). This is not a mark on "
                           "your work: please tell your instructor, who can read the autograder's log and regrade.")
        result = json.loads(results[0].read_text(encoding="utf-8"))
        run = json.loads(report.read_text(encoding="utf-8")).get("run", {}) if report.is_file() else {}
        extra = result.setdefault("extra_data", {})
        extra["seed"] = run.get("seed")
        extra["confined"] = run.get("confined")
        extra["allow_unconfined"] = allow_unconfined
        if run.get("confined") is not True:
            reasons = [str(run.get("confinement") or "the grader's report does not say its kernels were confined")
                       .removeprefix("NOT CONFINED: ")]
            if not allow_unconfined:  # the grader found what detect() above did not: its marks are not kept
                return refused(reasons)
            extra["confinement"] = "NOT CONFINED: " + reasons[0]
        said = [f"could not read {u}" for u in unreadable] + notes
        if said:
            result["output"] = "; ".join([result.get("output", "")] + said).lstrip("; ")
        if run.get("confined") is not True:
            result["output"] = (UNCONFINED_LABEL + " " + result.get("output", "")).strip()
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(root: Path | None = None) -> int:
    """Grade the submission under root (AUTOGRADER_ROOT, default /autograder) into root/results/results.json."""
    root = Path(root or os.environ.get("AUTOGRADER_ROOT") or DEFAULT_ROOT)
    try:
        result = grade_submission(root)
    except Exception as exc:  # the learner gets a message, the instructor the traceback (stdout)
        import traceback
        traceback.print_exc(file=sys.stdout)
        result = failure(f"The autograder failed while grading your notebooks ({type(exc).__name__}: {exc}). This is "
                         "not a mark on your work: please tell your instructor, who can read the log and regrade.")
    target = root / "results" / "results.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name("results.json.part")
    tmp.write_text(json.dumps(result, indent=1, ensure_ascii=True) + "\n", encoding="utf-8")
    os.replace(tmp, target)
    print(f"run_autograder: score {result.get('score')} written to {target}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m graphcourse.grading.gradescope_bundle", description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where to write the zip (default: build/autograder.zip)")
    p.add_argument("--torch", default=None, help="the torch setup.sh installs, as pip arguments (default: the course's "
                   "pinned torch, CPU build)")
    p.add_argument("--allow-unconfined", action="store_true",
                   help="build a zip that grades even where learners' kernels cannot be confined (no bubblewrap or "
                        "user namespaces in the container): their code then runs as root beside solutions/, and each "
                        "result says GRADED UNCONFINED. Default: such a submission is not graded and its result says why")
    p.add_argument("--run", action="store_true", help="grade the submission under $AUTOGRADER_ROOT (what run_autograder does)")
    args = p.parse_args(argv)
    if args.run:
        return run()
    try:
        names = build(args.out, torch=args.torch, allow_unconfined=args.allow_unconfined)
    except (OSError, RuntimeError) as exc:
        print(f"autograder: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {args.out}: {len(names)} files ({sum(n.startswith('solutions/') for n in names)} solutions notebooks). "
          "Upload it in Gradescope: Configure Autograder (docs/grading.md, 'On Gradescope').")
    if args.allow_unconfined:
        print("autograder: built with --allow-unconfined: where the container cannot confine learners' kernels, "
              "their code runs as root beside solutions/ (the model answers and hidden checks), and each result "
              "says GRADED UNCONFINED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
