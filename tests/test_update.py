"""`make update` (bootstrap.py update): a learner who got the course with git updates it without losing a run.

A simulated update: a bare repository as the course's 'origin' (a lesson, an exercise notebook, a README, the
Makefile and bootstrap.py), a learner's clone with its own my-work/ copy, the learner runs the lesson (JupyterLab
autosaves it), the course pushes a new version of that lesson, and the learner runs `make update`. Then the refusals:
not a clone, a changed file outside notebooks/ and exercises/, commits of the learner's own, and a merge that fails
(everything put back).
"""

from __future__ import annotations

import datetime
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import bootstrap  # noqa: E402  (the set-up script at the repository root)
from graphcourse.authoring import release  # noqa: E402

LESSON = "notebooks/01_the_big_idea.ipynb"
DAY = "2026-12-01"
GIT_ENV = {"GIT_AUTHOR_NAME": "course", "GIT_AUTHOR_EMAIL": "course@example.org", "GIT_COMMITTER_NAME": "course",
           "GIT_COMMITTER_EMAIL": "course@example.org", "GIT_CONFIG_NOSYSTEM": "1"}

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="make update needs git")


@pytest.fixture(autouse=True)
def _git_alone(monkeypatch, tmp_path):
    """git as on a fresh machine: no global or system configuration of whoever runs the tests."""
    for key, value in GIT_ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "gitconfig"))


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def lesson(text: str, outputs: str | None = None) -> str:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(text), nbformat.v4.new_code_cell("print(1 + 1)")]
    if outputs is not None:  # what JupyterLab saves after a run
        nb.cells[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text=outputs)]
        nb.cells[1].execution_count = 1
    return nbformat.writes(nb)


def commit(author: Path, files: dict[str, str], message: str) -> None:
    for rel, text in files.items():
        (author / rel).parent.mkdir(parents=True, exist_ok=True)
        (author / rel).write_text(text)
    git(author, "add", *files)
    git(author, "commit", "-q", "-m", message)
    git(author, "push", "-q", "origin", "HEAD:main")


@pytest.fixture
def course(tmp_path: Path) -> tuple[Path, Path]:
    """(the course's authoring clone that pushes updates, the learner's clone with my-work/ and a run lesson)."""
    origin, author, learner = tmp_path / "origin.git", tmp_path / "author", tmp_path / "learner"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    git(tmp_path, "clone", "-q", str(origin), str(author))
    git(author, "checkout", "-q", "-b", "main")
    files = {"README.md": "# the course\n", ".gitignore": "/my-work/\n", LESSON: lesson("# Lesson 01"),
             "notebooks/02_launch_tax.ipynb": lesson("# Lesson 02"), "exercises/06_exercises.ipynb": lesson("# ex"),
             "toygraph/capture.py": "CAPTURE = 1\n"}
    for name in ("Makefile", "bootstrap.py"):
        files[name] = (ROOT / name).read_text()
    commit(author, files, "the course")
    git(tmp_path, "clone", "-q", str(origin), str(learner))
    (learner / "my-work").mkdir()
    (learner / "my-work" / "06_exercises.ipynb").write_text("my answers")
    return author, learner


def run_lesson(learner: Path, rel: str = LESSON) -> str:
    """The learner runs a lesson: JupyterLab autosaves it with the outputs. Returns what it saved."""
    text = lesson("# " + rel, outputs="2\n")
    (learner / rel).write_text(text)
    return text


def update(learner: Path, make: bool = False) -> subprocess.CompletedProcess:
    cmd = (["make", "-s", "update", f"PYTHON={sys.executable}"] if make else [sys.executable, "bootstrap.py", "update"])
    return subprocess.run(cmd, cwd=learner, capture_output=True, text=True, timeout=120)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(folder).parts}


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_update_pulls_and_keeps_the_autosaved_lesson_in_my_work(course) -> None:
    author, learner = course
    mine = run_lesson(learner)
    untouched = run_lesson(learner, "notebooks/02_launch_tax.ipynb")
    my_copy = (learner / "my-work" / "06_exercises.ipynb").stat()
    commit(author, {LESSON: lesson("# Lesson 01, corrected")}, "lesson 01 corrected")
    done = update(learner, make=True)
    assert done.returncode == 0, done.stderr + done.stdout
    assert git(learner, "rev-parse", "HEAD") == git(author, "rev-parse", "HEAD"), "the pull went through"
    assert "corrected" in (learner / LESSON).read_text(), "the lesson is the course's new version"
    kept = learner / "my-work" / "kept-from-update" / datetime.date.today().isoformat() / LESSON
    assert kept.read_text() == mine, "the learner's run of the lesson is kept"
    assert f"{LESSON} -> my-work/kept-from-update/" in done.stdout, done.stdout
    assert (learner / "notebooks/02_launch_tax.ipynb").read_text() == untouched, \
        "a lesson the update does not change keeps the learner's run in place"
    after = (learner / "my-work" / "06_exercises.ipynb").stat()
    assert (learner / "my-work" / "06_exercises.ipynb").read_text() == "my answers"
    assert (after.st_mtime_ns, after.st_ino) == (my_copy.st_mtime_ns, my_copy.st_ino), "my-work/ untouched"


def test_a_second_update_never_overwrites_an_earlier_kept_file(course, monkeypatch) -> None:
    author, learner = course
    first = run_lesson(learner)
    commit(author, {LESSON: lesson("# Lesson 01, v2")}, "v2")
    assert bootstrap.update(learner, day=DAY) == 0
    second = lesson("# my second run", outputs="4\n")
    (learner / LESSON).write_text(second)
    commit(author, {LESSON: lesson("# Lesson 01, v3")}, "v3")
    assert bootstrap.update(learner, day=DAY) == 0
    kept = learner / "my-work" / "kept-from-update" / DAY / "notebooks"
    assert (kept / "01_the_big_idea.ipynb").read_text() == first
    assert (kept / "01_the_big_idea (2).ipynb").read_text() == second
    assert "v3" in (learner / LESSON).read_text() and git(learner, "status", "--porcelain") == ""


def test_an_up_to_date_course_changes_nothing(course, capsys) -> None:
    _, learner = course
    run_lesson(learner)
    before = snapshot(learner)
    assert bootstrap.update(learner, day=DAY) == 0
    assert "up to date" in capsys.readouterr().out
    assert snapshot(learner) == before


def test_a_folder_that_is_not_a_git_clone_is_refused(tmp_path, capsys) -> None:
    folder = tmp_path / "course"
    folder.mkdir()
    shutil.copy(ROOT / "bootstrap.py", folder)
    (folder / "notebooks").mkdir()
    (folder / LESSON).write_text(lesson("# 01", outputs="2\n"))
    before = snapshot(folder)
    done = subprocess.run([sys.executable, "bootstrap.py", "update"], cwd=folder, capture_output=True, text=True,
                          env={**os.environ, "GIT_CEILING_DIRECTORIES": str(tmp_path)})
    assert done.returncode == 2
    assert "nothing was changed" in done.stderr and "not a git clone" in done.stderr, done.stderr
    assert snapshot(folder) == before


def test_a_changed_file_outside_the_lessons_is_refused_with_how_to_keep_it(course, capsys) -> None:
    author, learner = course
    run_lesson(learner)
    (learner / "toygraph" / "capture.py").write_text("CAPTURE = 2  # my experiment\n")
    (learner / "README.md").write_text("# my notes in the README\n")  # the update does not change it: no matter
    commit(author, {LESSON: lesson("# Lesson 01, v2"), "toygraph/capture.py": "CAPTURE = 3\n"}, "v2")
    before, head = snapshot(learner), git(learner, "rev-parse", "HEAD")
    assert bootstrap.update(learner, day=DAY) == 2
    said = capsys.readouterr().err
    assert "nothing was changed" in said and "toygraph/capture.py" in said and "README.md" not in said, said
    assert "git checkout -- PATH" in said and "my-work/" in said
    assert snapshot(learner) == before and git(learner, "rev-parse", "HEAD") == head


def test_commits_of_the_learners_own_are_refused(course, capsys) -> None:
    author, learner = course
    (learner / "notes.md").write_text("notes")
    git(learner, "add", "notes.md")
    git(learner, "commit", "-q", "-m", "my notes")
    commit(author, {LESSON: lesson("# Lesson 01, v2")}, "v2")
    before, head = snapshot(learner), git(learner, "rev-parse", "HEAD")
    assert bootstrap.update(learner, day=DAY) == 2
    said = capsys.readouterr().err
    assert "1 commit(s) of its own" in said and "git pull --rebase" in said, said
    assert snapshot(learner) == before and git(learner, "rev-parse", "HEAD") == head


def test_a_failed_merge_puts_everything_back(course, monkeypatch, capsys) -> None:
    author, learner = course
    run_lesson(learner)
    staged = lesson("# my staged exercise")
    (learner / "exercises" / "06_exercises.ipynb").write_text(staged)
    git(learner, "add", "exercises/06_exercises.ipynb")
    (learner / "exercises" / "06_exercises.ipynb").write_text(staged + "\n")  # staged, then changed again
    new_here = lesson("# a lesson I made")
    (learner / "notebooks" / "03_real_cuda_graphs.ipynb").write_text(new_here)  # untracked, and the update adds it
    commit(author, {LESSON: lesson("# v2"), "exercises/06_exercises.ipynb": lesson("# ex v2"),
                    "notebooks/03_real_cuda_graphs.ipynb": lesson("# Lesson 03")}, "v2")
    before, status = snapshot(learner), git(learner, "status", "--porcelain")
    index = git(learner, "ls-files", "-s")
    real_git = bootstrap._git

    def merge_fails(root, *args, **kwargs):
        if args[:1] == ("merge",):
            return subprocess.CompletedProcess(args, 128, "", "fatal: simulated failure")
        return real_git(root, *args, **kwargs)

    monkeypatch.setattr(bootstrap, "_git", merge_fails)
    assert bootstrap.update(learner, day=DAY) == 1
    said = capsys.readouterr().err
    assert "everything is as it was" in said and "simulated failure" in said, said
    assert snapshot(learner) == before, "every file as it was, no kept copy left behind"
    assert git(learner, "status", "--porcelain") == status and git(learner, "ls-files", "-s") == index
    assert not (learner / "my-work" / "kept-from-update").exists()
    # and without the failure, the same update goes through, keeping all three
    monkeypatch.setattr(bootstrap, "_git", real_git)
    assert bootstrap.update(learner, day=DAY) == 0
    kept = learner / "my-work" / "kept-from-update" / DAY
    assert (kept / "exercises" / "06_exercises.ipynb").read_text() == staged + "\n"
    assert (kept / "notebooks" / "03_real_cuda_graphs.ipynb").read_text() == new_here
    assert git(learner, "status", "--porcelain") == ""


def test_the_release_carries_make_update() -> None:
    """A clone of the published release updates the same way: the release copies the Makefile and bootstrap.py."""
    assert {"Makefile", "bootstrap.py"} <= set(release.FILES)
    makefile = (ROOT / "Makefile").read_text()
    assert "\nupdate:\n\t@$(PYTHON) bootstrap.py update\n" in makefile
