"""The release: the course learners get, built from the sources, with no answer in it, and updates that lose nothing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from graphcourse.authoring import release

ROOT = Path(__file__).resolve().parents[1]
PRIVATE = ("solutions", "tests", "classroom", "docs/instructor", ".git", ".ci")


@pytest.fixture(scope="module")
def release_built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("release") / "course"
    release.build(out, log=lambda m: None)
    return out


def test_the_release_holds_the_learner_course(release_built: Path) -> None:
    lessons = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert lessons and sorted(p.name for p in (release_built / "notebooks").glob("*.ipynb")) == lessons
    books = sorted(p.name for p in (ROOT / "exercises").glob("*"))
    assert sorted(p.name for p in (release_built / "exercises").glob("*")) == books
    for needed in ("Makefile", "bootstrap.py", "pyproject.toml", "README.md", "toygraph/capture.py",
                   "graphcourse/core/paths.py", "graphcourse/grading/observe.py", "data/gpu_reference.json"):
        assert (release_built / needed).is_file(), needed
    manifest = json.loads((release_built / release.MANIFEST).read_text())
    assert set(manifest["files"]) == set(release.course_files(ROOT))


def test_no_path_to_an_answer_is_in_the_release(release_built: Path) -> None:
    for rel in PRIVATE:
        assert not (release_built / rel).exists(), rel
    names = {p.name for p in release_built.rglob("*")}
    assert "wrong_answers" not in names and "instructor" not in names
    assert release.leaks(release_built, release.secrets(ROOT / "solutions")) == []


def test_the_leak_search_finds_answers_where_they_are() -> None:
    """The search can fail: it finds nearly every model answer in solutions/, and the wrong answers in tests/."""
    secret = release.secrets(ROOT / "solutions")
    answers = [w for w in secret if w.endswith("model answer")]
    assert len(answers) >= 14, "every exercise's model answer is searched for"
    found = {line.split(": ", 1)[1].rsplit(" (", 1)[0] for line in release.leaks(ROOT / "solutions", secret)}
    too_short = {w for w, lines in secret.items() if len(lines) < release.LEAK_MIN_LINES}
    assert found == set(secret) - too_short
    assert release.leaks(ROOT / "tests" / "wrong_answers", secret), "a model answer with one mistake is a near-answer"


def test_a_leaked_answer_stops_the_build(tmp_path: Path) -> None:
    root = _course_copy(tmp_path / "src")
    answer = next((ROOT / "tests" / "wrong_answers").rglob("*.py")).read_text()
    (root / "toygraph" / "notes.py").write_text(answer)
    with pytest.raises(release.ReleaseError, match="toygraph/notes.py: ex"):
        release.build(tmp_path / "out", root=root, log=lambda m: None)
    assert not (tmp_path / "out" / release.MANIFEST).exists(), "nothing is published from a leaking build"


def test_from_a_learners_kernel_nothing_private_is_readable(release_built: Path) -> None:
    """A kernel started as `make lab` starts it in the release imports the release's packages and finds no answers."""
    probe = (
        "import json, os, graphcourse, toygraph\n"
        "from graphcourse.core import paths\n"
        "found = sorted(os.path.relpath(os.path.join(d, n), paths.ROOT) for d, ds, fs in os.walk(paths.ROOT)\n"
        "               for n in ds + fs if n in ('solutions', 'tests', 'wrong_answers', 'instructor', 'classroom'))\n"
        "print(json.dumps({'root': str(paths.ROOT), 'pkg': graphcourse.__file__, 'toy': toygraph.__file__,\n"
        "                  'solutions': paths.SOLUTIONS_DIR.exists(), 'found': found}))\n")
    env = dict(os.environ, PYTHONPATH=str(release_built))
    done = subprocess.run([sys.executable, "-c", probe], cwd=release_built / "notebooks", env=env, capture_output=True,
                          text=True, timeout=120)
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert Path(seen["root"]) == release_built.resolve()
    assert Path(seen["pkg"]).is_relative_to(release_built.resolve()) and Path(seen["toy"]).is_relative_to(release_built.resolve())
    assert seen["solutions"] is False and seen["found"] == []


def _course_copy(dest: Path) -> Path:
    """A copy of the authored course (what the release reads, with solutions/) to change as a course update would."""
    for rel in release.course_files(ROOT):
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dest / rel)
    shutil.copytree(ROOT / "solutions", dest / "solutions")
    return dest


def test_a_course_update_keeps_every_run_and_answer_of_the_learner(tmp_path: Path) -> None:
    src = _course_copy(tmp_path / "src")
    out = tmp_path / "course"
    release.build(out, root=src, log=lambda m: None)
    # the learner: runs lesson 01 (JupyterLab autosaves it), answers in my-work/, keeps notes, edits lesson 02
    lesson1, lesson2 = sorted((out / "notebooks").glob("0[12]_*.ipynb"))
    nb = nbformat.read(lesson1, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("my_experiment = 42"))
    nbformat.write(nb, lesson1)
    mine = lesson1.read_text()
    (out / "my-work").mkdir()
    (out / "my-work" / "06_exercises.ipynb").write_text("my answers")
    (out / "notes.md").write_text("my notes")
    lesson2.write_text(lesson2.read_text().replace("launch", "LAUNCH", 1))
    mine2 = lesson2.read_text()
    # the course update: lesson 01 changes, README changes, a toygraph module is removed
    upd = nbformat.read(src / "notebooks" / lesson1.name, as_version=4)
    upd.cells[1].source += "\n\nA sentence the update adds."
    nbformat.write(upd, src / "notebooks" / lesson1.name)
    (src / "README.md").write_text((src / "README.md").read_text() + "\nupdated\n")
    gone = src / "toygraph" / "prices.py"
    gone.unlink()
    said: list[str] = []
    release.build(out, root=src, log=said.append)
    kept = out / "my-work" / "kept-from-update" / "notebooks" / lesson1.name
    assert kept.read_text() == mine, "the learner's run of the changed lesson is kept"
    assert "A sentence the update adds." in (out / "notebooks" / lesson1.name).read_text()
    assert lesson2.read_text() == mine2, "a lesson the update did not change keeps the learner's edits in place"
    assert (out / "my-work" / "06_exercises.ipynb").read_text() == "my answers"
    assert (out / "notes.md").read_text() == "my notes"
    assert (out / "README.md").read_text().endswith("updated\n")
    assert not (out / "toygraph" / "prices.py").exists()
    assert any(lesson1.name in line and "kept" in line for line in said), said
    # a second update with the learner's kept copy already there: a new name, nothing overwritten
    nbformat.write(nb, lesson1)
    upd.cells[1].source += " Again."
    nbformat.write(upd, src / "notebooks" / lesson1.name)
    release.build(out, root=src, log=lambda m: None)
    assert kept.read_text() == mine and len(list(kept.parent.glob("*.ipynb"))) == 2


def test_the_release_refuses_a_folder_that_is_not_one(tmp_path: Path) -> None:
    (tmp_path / "thesis.tex").write_text("mine")
    with pytest.raises(release.ReleaseError, match="not a release"):
        release.build(tmp_path, log=lambda m: None)
    assert (tmp_path / "thesis.tex").read_text() == "mine" and len(list(tmp_path.iterdir())) == 1
    with pytest.raises(release.ReleaseError, match="would hold the authored course"):
        release.build(ROOT, log=lambda m: None)


def test_make_release_is_one_command(course_process, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "graphcourse.authoring.release", "--out", str(tmp_path / "r")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "no solutions, tests or instructor kit" in done.stdout
    assert "release:" in (ROOT / "Makefile").read_text() and "graphcourse.authoring.release" in (ROOT / "Makefile").read_text()


def test_every_link_in_the_releases_markdown_resolves_inside_it(release_built: Path) -> None:
    """A link to what only the authored course has (the instructor kit) keeps its text and loses its target."""
    dead = []
    for md in release_built.rglob("*.md"):
        for m in release._MD_LINK.finditer(md.read_text()):
            target = m[2]
            if "://" in target or target.startswith(("mailto:", "/")):
                continue
            if not (md.parent / target).exists():
                dead.append(f"{md.relative_to(release_built)}: {target}")
    assert dead == []
    assert "[instructor kit](docs/instructor/README.md)" in (ROOT / "README.md").read_text(), "the authored README links it"


def test_a_link_to_what_only_the_authored_course_has_keeps_its_text(tmp_path: Path) -> None:
    (tmp_path / "docs" / "instructor").mkdir(parents=True)
    (tmp_path / "docs" / "instructor" / "README.md").write_text("kit")
    (tmp_path / "docs" / "grading.md").write_text("x")
    (tmp_path / "page.md").write_text("See the [instructor kit](docs/instructor/README.md) and [grading](docs/grading.md).")
    out = release.released_bytes(tmp_path, "page.md", {"page.md", "docs/grading.md"}).decode()
    assert out == "See the instructor kit and [grading](docs/grading.md)."


def test_the_releases_readme_describes_the_course_learners_have(release_built: Path) -> None:
    authored = (ROOT / "README.md").read_text()
    released = (release_built / "README.md").read_text()
    for learners in ("## Quick start", "## Lessons", "## Your own copy of the exercises", "**Check your work**",
                     "## What is where"):
        assert learners in authored and learners in released, learners
    for authors_only in ("Instructors grade a whole class", "## For instructors", "## Where things live",
                         "## For maintainers", "<!-- authored only", "<!-- end authored only", "- `tests/`:"):
        assert authors_only not in released, authors_only
    assert "## For maintainers" in authored and "Instructors grade a whole class" in authored


def test_every_authored_only_passage_is_closed() -> None:
    """An unclosed marker would leave its passage (and the marker) in the release."""
    for rel in release.course_files(ROOT):
        if rel.endswith(".md"):
            text = (ROOT / rel).read_text()
            opened, closed = text.count("<!-- authored only:"), text.count("<!-- end authored only -->")
            assert opened == closed == len(release.AUTHORED_ONLY.findall(text)), rel


def test_a_released_lesson_carries_the_language_info_its_kernel_reports(release_built: Path) -> None:
    """JupyterLab writes the kernel's language_info into a notebook as its kernel starts: a lesson stored with another
    Python's version opened marked unsaved (test_browser opens one and checks it is not)."""
    from ipykernel.ipkernel import IPythonKernel

    lessons = sorted((release_built / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert lessons
    for path in lessons:
        info = nbformat.read(path, as_version=4).metadata["language_info"]
        assert info == {**info, **IPythonKernel.language_info}, (path.name, info)
    authored = nbformat.read(release.ROOT / "notebooks" / lessons[0].name, as_version=4)
    assert "language_info" in authored.metadata  # the authored lesson keeps what executed it
