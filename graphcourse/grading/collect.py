"""Collect a class's exercise notebooks from the learners' homes into one folder, to grade them.

    python -m graphcourse.grading.collect [--group course-learners | --users ada grace | --homes DIR]
                                  [--out grading-out/class-YYYYmmdd-HHMMSS] [--grade]

Used on the class server (classroom/hub/), run as root (it reads every learner's home):

* learners are the members of a Unix group (``--group``, default ``$COURSE_HUB_GROUP`` or
  ``course-learners``, the group ``coursehub.py add-users`` puts them in), or the users named by
  ``--users``, or every subfolder of ``--homes DIR`` (a folder of homes copied from laptops);
* in each home, every exercise notebook of the course (a notebook whose metadata the exercise
  builder wrote, whatever its name or folder: ``06_exercises.ipynb``, a "my copy", a renamed
  copy) is copied to ``OUT/<user>/``, keeping its name and modification time (the grader grades
  the most recently modified copy); a notebook identical to the handed-out one is left out;
* ``OUT/collected.json`` lists, per learner, what was collected from where (with its sha256)
  and what was left out and why; learners with nothing to grade are printed.

``--grade`` then runs the course's grader on OUT, with every output in one run: ``python -m
graphcourse.grading OUT --roster OUT/roster.txt --report OUT/grades.json --csv OUT/grades.csv --feedback
OUT/_feedback --gradescope OUT/_gradescope --junit OUT/grades.xml``. The roster is every learner collect
looked at, so one who handed in nothing is in every output as "not handed in".

Learners' files are only read, never written, moved or touched (no symlink is followed; a file
not owned by its learner, larger than ``--max-mb`` or not a regular file is left out). OUT must
be new or empty: an earlier collection is never overwritten.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import errno
import grp
import hashlib
import json
import os
import pwd
import re
import stat
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..core.exercise_format import as_my_copy
from ..core.paths import EXERCISES_DIR, ROOT
from ..errors import GraphCourseError


class CollectError(GraphCourseError, RuntimeError):
    """The class's notebooks cannot be collected as asked; the message says how to fix it."""


DEFAULT_GROUP = "course-learners"
SKIP_DIRS = {"node_modules", "__pycache__", ".ipynb_checkpoints", "site-packages"}
MAX_DEPTH = 8
MAX_ENTRIES = 50_000  # per home: a home with more entries is searched this far only
_SAFE = re.compile(r"[^\w .()+-]")
# The exercise builder's metadata, as JSON text: still found in a damaged (truncated) notebook.
_MARK = re.compile(rb'"graphcourse"\s*:\s*\{\s*"(role|exercise|exercises|generated_by)"')
# A cell's id, as JSON text (nbformat 4.5): a damaged copy truncated before the first cell with the
# builder's metadata (the exercises notebook opens with a long introduction) still begins with the
# handed-out notebook's first cells, whose ids Jupyter keeps in a learner's copy.
_CELL_ID = re.compile(rb'"id"\s*:\s*"([A-Za-z0-9_-]{1,64})"')


@dataclass
class Learner:
    name: str
    home: Path
    uid: int | None  # the owner a collected file must have (None: not checked)
    files: list[dict] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)
    note: str = ""


# --------------------------------------------------------------------------------------
# Who the learners are
# --------------------------------------------------------------------------------------


def from_group(group: str) -> list[Learner]:
    try:
        g = grp.getgrnam(group)
    except KeyError:
        raise CollectError(f"no Unix group {group!r} here: name the learners' group with --group "
                           "(or COURSE_HUB_GROUP=... make grade-class), or the learners with --users "
                           "(see `coursehub.py list`)") from None
    names = set(g.gr_mem) | {p.pw_name for p in pwd.getpwall() if p.pw_gid == g.gr_gid}
    return from_users(sorted(names))


def from_users(names: list[str]) -> list[Learner]:
    out = []
    for name in names:
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            raise CollectError(f"no user {name!r} on this machine (see `getent passwd`)") from None
        out.append(Learner(name, Path(entry.pw_dir), entry.pw_uid))
    return out


def from_homes(folder: Path) -> list[Learner]:
    folder = Path(folder)
    if not folder.is_dir():
        raise CollectError(f"{folder} is not a folder of learners' homes")
    return [Learner(d.name, d, None) for d in sorted(folder.iterdir())
            if d.is_dir() and not d.is_symlink() and not d.name.startswith(".")]


# --------------------------------------------------------------------------------------
# What counts as an exercise notebook
# --------------------------------------------------------------------------------------


def is_exercise_notebook(nb: dict) -> bool:
    """A notebook built from solutions/ by the exercise builder (its metadata says so), or one
    whose cells still carry the builder's answer/check metadata (a learner's renamed copy)."""
    if not isinstance(nb, dict):
        return False
    meta = nb.get("metadata")
    if isinstance(meta, dict) and isinstance(meta.get("graphcourse"), dict) \
            and "exercises" in meta["graphcourse"]:
        return True
    for cell in nb.get("cells") or []:
        cm = cell.get("metadata") if isinstance(cell, dict) else None
        if isinstance(cm, dict) and isinstance(cm.get("graphcourse"), dict) \
                and cm["graphcourse"].get("role") in ("answer", "check"):
            return True
    return False


def handed_out_digests(folder: Path = EXERCISES_DIR) -> set[str]:
    """sha256 of every generated exercises notebook, and of the learner's own copy of it as made untouched in my-work/
    (``make lab`` and the class server make one): a learner's file equal to either is unanswered."""
    import nbformat

    digests = set()
    for p in Path(folder).glob("*.ipynb"):
        data = p.read_bytes()
        digests.add(hashlib.sha256(data).hexdigest())
        try:
            mine = nbformat.writes(as_my_copy(nbformat.reads(data.decode("utf-8"), as_version=4), p.name))
        except Exception:  # noqa: BLE001 (a damaged handed-out notebook has no untouched copy to know)
            continue
        digests.add(hashlib.sha256((mine if mine.endswith("\n") else mine + "\n").encode("utf-8")).hexdigest())
    return digests


def handed_out_cell_ids(folder: Path = EXERCISES_DIR) -> set[str]:
    """The cell ids of every generated exercises notebook: a damaged notebook holding one of them
    is a learner's copy of an exercises notebook (collected, so that the grader says why it
    cannot be graded), even where it was cut off before any of the builder's metadata."""
    ids: set[str] = set()
    for p in Path(folder).glob("*.ipynb"):
        try:
            nb = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        if not is_exercise_notebook(nb):
            continue
        ids |= {c["id"] for c in nb.get("cells") or []
                if isinstance(c, dict) and isinstance(c.get("id"), str) and c["id"]}
    return ids


def looks_like_exercise_notebook(data: bytes, cell_ids: set[str]) -> bool:
    """A file that is not readable JSON but was an exercise notebook: it still carries the
    builder's metadata, or a cell id of a handed-out exercises notebook."""
    if _MARK.search(data):
        return True
    return any(m.group(1).decode("ascii") in cell_ids for m in _CELL_ID.finditer(data))


# --------------------------------------------------------------------------------------
# Reading a learner's files (as root, in a home the learner controls)
# --------------------------------------------------------------------------------------


def _read_own_file(path: Path, uid: int | None, max_bytes: int) -> tuple[bytes, os.stat_result]:
    """The file's bytes, read without following a symlink, blocking on a FIFO or trusting a
    file the learner does not own. Raises OSError/ValueError with the reason."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError("not a regular file")
        if uid is not None and st.st_uid != uid:
            raise ValueError(f"owned by uid {st.st_uid}, not by the learner")
        if st.st_size > max_bytes:
            raise ValueError(f"{st.st_size / 1e6:.1f} MB, over the {max_bytes / 1e6:.0f} MB limit")
        chunks, left = [], max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > max_bytes:
            raise ValueError(f"grew past the {max_bytes / 1e6:.0f} MB limit while being read")
        return data, st
    finally:
        os.close(fd)


def _candidates(home: Path) -> tuple[list[Path], bool]:
    """Every *.ipynb under home (no symlinked folder followed, hidden folders skipped)."""
    found, seen, truncated = [], 0, False
    base_depth = len(home.parts)
    for dirpath, dirnames, filenames in os.walk(home, followlinks=False):
        depth = len(Path(dirpath).parts) - base_depth
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in SKIP_DIRS
                             and depth < MAX_DEPTH)
        seen += len(dirnames) + len(filenames)
        found += [Path(dirpath) / f for f in sorted(filenames) if f.endswith(".ipynb")]
        if seen > MAX_ENTRIES:
            truncated = True
            break
    return found, truncated


def _dest_name(name: str, taken: set[str]) -> str:
    stem = _SAFE.sub("_", Path(name).stem).strip() or "notebook"
    candidate, n = f"{stem}.ipynb", 1
    while candidate.lower() in taken:
        n += 1
        candidate = f"{stem} ({n}).ipynb"
    taken.add(candidate.lower())
    return candidate


def collect_learner(learner: Learner, out: Path, pristine: set[str], max_bytes: int,
                    cell_ids: set[str] | None = None) -> None:
    cell_ids = handed_out_cell_ids() if cell_ids is None else cell_ids
    home = learner.home
    try:
        st = os.lstat(home)
    except OSError as exc:
        learner.note = f"no home: {exc.strerror}"
        return
    if not stat.S_ISDIR(st.st_mode):
        learner.note = f"{home} is not a folder"
        return
    paths, truncated = _candidates(home)
    if truncated:
        learner.note = f"more than {MAX_ENTRIES} files and folders in the home: searched that far only"
    taken: set[str] = set()
    dest_dir = out / learner.name
    for path in paths:
        rel = str(path.relative_to(home))
        try:
            data, fst = _read_own_file(path, learner.uid, max_bytes)
        except (OSError, ValueError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            if isinstance(exc, OSError) and exc.errno == errno.ELOOP:
                why = "a symlink (not followed)"
            learner.skipped.append({"path": rel, "why": why})
            continue
        try:
            nb = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            if looks_like_exercise_notebook(data, cell_ids):  # damaged: collected, the grader says why
                nb = None
            else:
                learner.skipped.append({"path": rel, "why": "not a readable notebook"})
                continue
        if nb is not None and not is_exercise_notebook(nb):
            continue  # a lesson or the learner's own notebook: not graded
        digest = hashlib.sha256(data).hexdigest()
        if digest in pristine:
            learner.skipped.append({"path": rel, "why": "identical to the handed-out notebook"})
            continue
        dest_dir.mkdir(mode=0o700, exist_ok=True)
        dest = dest_dir / _dest_name(path.name, taken)
        fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.utime(dest, ns=(fst.st_atime_ns, fst.st_mtime_ns))  # the grader grades the newest copy
        learner.files.append({
            "from": rel, "to": f"{learner.name}/{dest.name}", "sha256": digest,
            "modified": _dt.datetime.fromtimestamp(fst.st_mtime, _dt.timezone.utc).isoformat(
                timespec="seconds"),
        })


FEEDBACK, GRADESCOPE, ROSTER = "_feedback", "_gradescope", "roster.txt"
"""What --grade writes beside the learners' folders, besides grades.json, grades.csv and grades.xml: names no Unix user
(nor a learner collect would take) can have."""


def collect(learners: list[Learner], out: Path, max_mb: float = 20,
            pristine: set[str] | None = None) -> dict:
    """Copy every learner's exercise notebooks into out/<learner>/; write out/collected.json."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise CollectError(f"{out} already holds files: collect into a new folder (--out), "
                           "so that an earlier collection is never overwritten")
    names = [lr.name for lr in learners]
    clash = {n for n in names if names.count(n) > 1}
    if clash:
        raise CollectError(f"two learners named {sorted(clash)}: rename one of their folders")
    taken = sorted(set(names) & {FEEDBACK, GRADESCOPE, ROSTER})
    if taken:
        raise CollectError(f"a learner named {taken}: the name of an output of the grading; rename their folder")
    out.mkdir(parents=True, exist_ok=True, mode=0o700)
    pristine = handed_out_digests() if pristine is None else pristine
    cell_ids = handed_out_cell_ids()
    for learner in learners:
        collect_learner(learner, out, pristine, int(max_mb * 1e6), cell_ids)
    manifest = {
        "collected_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "learners": {
            lr.name: {"home": str(lr.home), "files": lr.files, "skipped": lr.skipped,
                      **({"note": lr.note} if lr.note else {})}
            for lr in learners
        },
    }
    (out / "collected.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def summary(manifest: dict) -> str:
    lines = []
    width = max([len(n) for n in manifest["learners"]] + [7])
    for name, entry in manifest["learners"].items():
        files = entry["files"]
        what = ", ".join(f["from"] for f in files) if files else "nothing to grade"
        extra = [s for s in entry["skipped"] if s["why"] != "identical to the handed-out notebook"]
        if any(s["why"] == "identical to the handed-out notebook" for s in entry["skipped"]) and not files:
            what = "nothing to grade (the handed-out notebook, unanswered)"
        if entry.get("note"):
            what += f" [{entry['note']}]"
        if extra:
            what += f" (left out: {'; '.join(s['path'] + ': ' + s['why'] for s in extra)})"
        lines.append(f"{name:<{width}}  {what}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m graphcourse.grading.collect",
                                     description=__doc__.splitlines()[0])
    who = parser.add_mutually_exclusive_group()
    who.add_argument("--group", default=None,
                     help="the learners' Unix group (default: $COURSE_HUB_GROUP or course-learners)")
    who.add_argument("--users", nargs="+", metavar="USER", help="these users' homes")
    who.add_argument("--homes", type=Path, metavar="DIR", help="every subfolder of DIR is a learner's home")
    parser.add_argument("--out", type=Path, default=None,
                        help="a new folder for the class's notebooks (default grading-out/class-<time>)")
    parser.add_argument("--max-mb", type=float, default=20, help="largest notebook collected (default 20 MB)")
    parser.add_argument("--grade", action="store_true",
                        help="then grade OUT: grades.json, grades.csv, grades.xml (JUnit), _feedback/ (with index.html) "
                             "and _gradescope/ in OUT")
    parser.add_argument("--timeout-per-cell", type=float, default=None, metavar="S",
                        help="passed on to the grader")
    parser.add_argument("--jobs", type=int, default=None, metavar="N", help="passed on to the grader")
    parser.add_argument("--allow-unconfined", action="store_true", help="passed on to the grader (trusted work only)")
    parser.add_argument("--quiet", action="store_true", help="passed on to the grader")
    args = parser.parse_args(argv)
    out = args.out or Path("grading-out") / _dt.datetime.now().strftime("class-%Y%m%d-%H%M%S")
    try:
        if args.users:
            learners = from_users(args.users)
        elif args.homes:
            learners = from_homes(args.homes)
        else:
            learners = from_group(args.group or os.environ.get("COURSE_HUB_GROUP") or DEFAULT_GROUP)
        if not learners:
            raise CollectError("no learners found (an empty group or folder?)")
        manifest = collect(learners, out, args.max_mb)
    except CollectError as exc:
        print(f"collect: {exc}", file=sys.stderr)
        return 2
    total = sum(len(e["files"]) for e in manifest["learners"].values())
    print(summary(manifest))
    handing_in = sum(1 for e in manifest["learners"].values() if e["files"])
    print(f"{total} notebook(s) from {handing_in} of {len(learners)} learner(s) in {out}/ "
          f"(what came from where: {out / 'collected.json'})")
    if not args.grade:
        return 0
    if total == 0:
        print("nothing to grade")
        return 0
    out = out.resolve()
    roster = out / ROSTER
    roster.write_text("# every learner collect looked at: one with nothing collected is 'not handed in'\n"
                      + "".join(f"{name}\n" for name in manifest["learners"]))
    cmd = [sys.executable, "-m", "graphcourse.grading", str(out), "--roster", str(roster),
           "--report", str(out / "grades.json"), "--csv", str(out / "grades.csv"),
           "--feedback", str(out / FEEDBACK), "--gradescope", str(out / GRADESCOPE), "--junit", str(out / "grades.xml")]
    if args.timeout_per_cell is not None:
        cmd += ["--timeout-per-cell", str(args.timeout_per_cell)]
    if args.jobs is not None:
        cmd += ["--jobs", str(args.jobs)]
    if args.quiet:
        cmd.append("--quiet")
    if args.allow_unconfined:
        cmd.append("--allow-unconfined")
    print("grading:", " ".join(cmd[1:]), flush=True)
    return subprocess.call(cmd, cwd=ROOT)


if __name__ == "__main__":
    sys.exit(main())
