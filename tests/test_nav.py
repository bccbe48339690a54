"""graphcourse.authoring.nav: the navigation lines and Colab cells the release gives each lesson (one repository setting,
idempotent, inert off Colab), and authored lessons that hold none of them."""

from __future__ import annotations

import shutil
import subprocess
import sys
import types
from pathlib import Path

import nbformat
import pytest

from graphcourse.authoring import nav
from graphcourse.authoring.execute import STRIP_TAG

ROOT = Path(__file__).resolve().parents[1]


def test_the_repository_is_one_setting_in_pyproject(tmp_path):
    published = tmp_path / "published.toml"
    published.write_text('[tool.graphcourse]\nrepository = "https://github.com/a/course.git"\nbranch = "dev"\n')
    repo, branch = nav.repository(published)
    assert (repo, branch) == ("https://github.com/a/course", "dev")
    url = nav.colab_url(ROOT / "notebooks" / "03_real_cuda_graphs.ipynb", repo, branch)
    assert url == (f"https://colab.research.google.com/github/{repo.removeprefix('https://github.com/')}"
                   f"/blob/{branch}/notebooks/03_real_cuda_graphs.ipynb")
    bad = tmp_path / "pyproject.toml"
    bad.write_text('[tool.graphcourse]\nrepository = "https://gitlab.com/x/y"\n')
    with pytest.raises(ValueError, match="must be a GitHub URL"):
        nav.repository(bad)


def test_colab_cells_are_inserted_once_and_follow_the_setting(tmp_path):
    path = ROOT / "notebooks" / "01_the_big_idea.ipynb"
    nb = nbformat.read(path, as_version=4)  # as authored: no generated cells
    nb.cells.insert(0, nbformat.v4.new_markdown_cell("[Contents](../README.md)"))
    counts = [c.execution_count for c in nb.cells if c.cell_type == "code"]
    assert nav.colab_cells(nb, path, "https://github.com/a/b", "main") is True
    assert [c.get("id") for c in nb.cells[1:3]] == [nav.COLAB_LINK_ID, nav.COLAB_SETUP_ID]
    setup = nb.cells[2]
    assert setup.execution_count == 1 and setup.outputs == []
    assert [c.execution_count for c in nb.cells[3:] if c.cell_type == "code"] == [n and n + 1 for n in counts]
    assert "https://colab.research.google.com/github/a/b/blob/main/notebooks/01_the_big_idea.ipynb" in nb.cells[1].source
    assert nav.colab_cells(nb, path, "https://github.com/a/b", "main") is False, "idempotent"
    assert nav.colab_cells(nb, path, "https://github.com/c/d", "dev") is True
    assert "github/c/d/blob/dev/" in nb.cells[1].source and '"dev"' in nb.cells[2].source
    assert all(len(line) <= 100 for line in nb.cells[2].source.splitlines())
    assert sum(c.get("id") == nav.COLAB_SETUP_ID for c in nb.cells) == 1


def test_the_setup_cell_does_nothing_off_colab():
    source = nav.colab_setup_source(ROOT / "notebooks" / "05_decode_loop.ipynb", "https://github.com/a/b", "main")
    result = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout == "" and result.stderr == ""


def test_on_colab_it_clones_installs_and_moves_into_the_lesson_folder(monkeypatch):
    source = nav.colab_setup_source(ROOT / "notebooks" / "05_decode_loop.ipynb", "https://github.com/a/b", "main")
    calls, moves = [], []
    colab = types.ModuleType("google.colab")
    output = types.ModuleType("google.colab.output")
    output.enable_custom_widget_manager = lambda: calls.append(["widgets"])
    colab.output = output
    google = types.ModuleType("google")
    google.colab = colab
    monkeypatch.setitem(sys.modules, "google", google)
    monkeypatch.setitem(sys.modules, "google.colab", colab)
    monkeypatch.setitem(sys.modules, "google.colab.output", output)
    monkeypatch.setattr(subprocess, "run", lambda cmd, check=False: calls.append(cmd))
    import os

    monkeypatch.setattr(os.path, "isdir", lambda p: False)
    monkeypatch.setattr(os, "chdir", moves.append)
    before = list(sys.path)
    try:
        exec(compile(source, "colab-setup", "exec"), {})
        assert sys.path[0] == nav.CLONE_DIR
    finally:
        sys.path[:] = before
    assert calls[0][:2] == ["git", "clone"] and "https://github.com/a/b" in calls[0] and "main" in calls[0]
    assert calls[1][1:] == ["-m", "pip", "install", "-q", "--no-deps", "-e", nav.CLONE_DIR]
    assert calls[2] == ["widgets"]
    assert moves == [f"{nav.CLONE_DIR}/notebooks"]


def _dress(path: Path, repo: str | None = None, branch: str = "main") -> nbformat.NotebookNode:
    names = [p.name for p in nav.lessons()]
    nb = nbformat.read(path, as_version=4)
    nav.dress(nb, f"notebooks/{path.name}", names, {n: nav.title(ROOT / "notebooks" / n) for n in names}, True,
              repo, branch)
    return nb


def test_dressing_a_lesson_is_idempotent_and_strip_gives_the_authored_lesson_back():
    """The release dresses each authored lesson; dressing twice changes nothing, and strip undoes it exactly."""
    for path in nav.lessons():
        authored = nbformat.read(path, as_version=4)
        nb = _dress(path, "https://github.com/a/b")
        assert nb.cells[0].get("id") == nav.NAV_TOP_ID and nb.cells[-1].get("id") == nav.NAV_BOTTOM_ID
        assert nb.cells[1].get("id") == nav.COLAB_LINK_ID and nb.cells[2].get("id") == nav.COLAB_SETUP_ID
        once = nbformat.writes(nb)
        nav.dress(nb, f"notebooks/{path.name}", [p.name for p in nav.lessons()],
                  {p.name: nav.title(p) for p in nav.lessons()}, True, "https://github.com/a/b", "main")
        assert nbformat.writes(nb) == once, f"{path.name}: dressing twice changed it"
        assert nav.strip(nb) is True and nav.strip(nb) is False
        assert nbformat.writes(nb) == nbformat.writes(authored), f"{path.name}: strip did not undo dress"
        # cells tagged strip-output (lesson 00's machine description) are stored without their
        # answers on purpose (graphcourse.authoring.execute.STRIP_TAG); every other code cell is stored executed
        kept = [c for c in nb.cells if c.cell_type == "code" and STRIP_TAG not in c.metadata.get("tags", [])]
        assert all(c.execution_count for c in kept), "stored as executed"


def test_the_command_removes_generated_cells_from_a_lesson_copied_back(tmp_path, monkeypatch):
    """An author who copies a released lesson back into notebooks/: --check says so, the command strips it."""
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks")
    monkeypatch.setattr(nav, "lessons", lambda folder=tmp_path / "notebooks": sorted(folder.glob("[0-9][0-9]_*.ipynb")))
    copied = tmp_path / "notebooks" / "02_launch_tax.ipynb"
    nbformat.write(_dress(ROOT / "notebooks" / copied.name), copied)
    assert nav.main(["--check"]) == 1
    assert nav.main([]) == 0 and nav.main(["--check"]) == 0
    assert copied.read_bytes() == (ROOT / "notebooks" / copied.name).read_bytes()


def test_an_unpublished_course_links_to_no_repository(tmp_path):
    """With [tool.graphcourse] repository empty, no lesson links to Colab or clones anything."""
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.graphcourse]\nrepository = ""\nbranch = "main"\n')
    repo, branch = nav.repository(pyproject)
    assert repo is None and branch == "main"
    path = ROOT / "notebooks" / "05_decode_loop.ipynb"
    link = nav.colab_link_source(path, repo, branch)
    assert "colab.research.google.com" not in link and "lesson 00 says why" in link
    first = nav.colab_link_source(ROOT / "notebooks" / "00_setup_check.ipynb", repo, branch)
    assert "not published on GitHub yet" in first and "colab.research.google.com" not in first
    assert "make nav" not in first + link, "the fix is the author's (README), not the learner's"
    setup = nav.colab_setup_source(path, repo, branch)
    assert "git" not in setup and 'if "google.colab" in sys.modules:' in setup
    exec(compile(setup, "colab-setup", "exec"), {})  # off Colab it does nothing


def test_a_repository_that_is_not_github_is_refused_with_the_fix(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.graphcourse]\nrepository = "gitlab.com/a/b"\n')
    with pytest.raises(ValueError, match="must be a GitHub URL"):
        nav.repository(pyproject)


def test_the_released_lessons_follow_the_setting(tmp_path):
    """The release's Colab cells are what pyproject.toml says now, in every lesson."""
    from graphcourse.authoring import release

    repo, branch = nav.repository()
    course = set(release.course_files(ROOT))
    for path in nav.lessons():
        nb = nbformat.reads(release.released_bytes(ROOT, f"notebooks/{path.name}", course).decode(), as_version=4)
        by_id = {c.get("id"): c for c in nb.cells}
        assert by_id[nav.COLAB_LINK_ID].source == nav.colab_link_source(path, repo, branch), path.name
        assert by_id[nav.COLAB_SETUP_ID].source == nav.colab_setup_source(path, repo, branch), path.name
        assert by_id[nav.NAV_TOP_ID].source == by_id[nav.NAV_BOTTOM_ID].source
