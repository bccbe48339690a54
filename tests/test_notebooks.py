"""Every lesson as stored: executed with outputs, no unexpected errors, no machine paths, the seed's anatomy, working links."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
LESSONS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
STORED = LESSONS + sorted((ROOT / "solutions").glob("*.ipynb"))
ANATOMY = ["learning objectives", "## the big idea", "## walking through it", "## common mistakes",
           "## check yourself", "## key takeaways", "## further learning"]
MACHINE_PATH = re.compile(r"/work/|/tmp/|/root/|/home/\w+/|site-packages|ipykernel_\d+")


def _nb(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def _outputs_text(nb: nbformat.NotebookNode) -> str:
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            parts.append(out.get("text", ""))
            parts.extend(str(v) for k, v in out.get("data", {}).items() if k.startswith("text/"))
            parts.extend(out.get("traceback", []))
    return "\n".join(parts)


def test_the_lessons_are_all_here():
    names = [p.name[:2] for p in LESSONS]
    assert names[:2] == ["00", "01"] and names == sorted(names)


@pytest.mark.parametrize("path", STORED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_stored_executed_without_errors_or_machine_paths(path):
    nb = _nb(path)
    code = [c for c in nb.cells if c.cell_type == "code"]
    kept = [c for c in code if "strip-output" not in c.metadata.get("tags", [])]
    assert all(c.get("execution_count") for c in kept), "every code cell is stored executed (python -m graphcourse.authoring.execute)"
    errors = [c.source[:60] for c in code if any(o.output_type == "error" for o in c.outputs)
              and "raises-exception" not in c.metadata.get("tags", [])]
    assert not errors, f"cells stored with an error output: {errors}"
    found = MACHINE_PATH.findall(_outputs_text(nb))
    assert not found, f"outputs hold paths of the machine they ran on: {found[:5]}"
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3"


@pytest.mark.parametrize("path", [p for p in LESSONS if p.name[:2] != "00"], ids=lambda p: p.name)
def test_each_lesson_has_the_seed_anatomy(path):
    text = "\n".join(c.source for c in _nb(path).cells if c.cell_type == "markdown").lower()
    missing = [h for h in ANATOMY if h not in text]
    assert not missing, f"{path.name} lacks the sections {missing}"
    assert "<details>" in text, "check-yourself answers are folded in <details>"


@pytest.fixture(scope="module")
def released():
    """Each lesson as the release holds it (graphcourse.authoring.release dresses the authored lesson)."""
    from graphcourse.authoring import release

    course = set(release.course_files(ROOT))
    return {p.name: nbformat.reads(release.released_bytes(ROOT, f"notebooks/{p.name}", course).decode(), as_version=4)
            for p in LESSONS}


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_navigation_links_point_to_files_that_exist(path, released):
    nb = released[path.name]
    first, last = nb.cells[0], nb.cells[-1]
    assert first.cell_type == last.cell_type == "markdown" and "Contents" in first.source and first.source == last.source
    for target in re.findall(r"\]\(([^)#]+)\)", first.source):
        assert (path.parent / target).resolve().exists(), f"{path.name}: navigation link to missing {target}"
    index = LESSONS.index(path)
    if index + 1 < len(LESSONS):
        assert LESSONS[index + 1].name in first.source, f"{path.name} links to the next lesson"
    else:
        assert "my-work/" in first.source, "the last lesson leads to the learner's own copy of the exercises"
    if index:
        assert LESSONS[index - 1].name in first.source, f"{path.name} links back to the lesson before"


def test_the_authored_lessons_hold_no_generated_cells():
    """Navigation, Colab cells and slide marks are made by the release, never stored in a lesson."""
    from graphcourse.authoring.nav import generated

    assert generated() == [], "run python -m graphcourse.authoring.nav (make nav) to remove them"
    for path in LESSONS:
        nb = _nb(path)
        assert nb.cells[0].source.startswith(f"# {path.name[:2]} · "), f"{path.name} opens with its title"
        counts = [c.execution_count for c in nb.cells if c.cell_type == "code"]
        assert all(n in (None, i) for i, n in enumerate(counts, 1)), f"{path.name}: its own cells count from 1 {counts}"


def test_nav_tool_titles_and_links(tmp_path):
    from graphcourse.authoring.nav import nav_line, title

    paths = []
    for name, heading in [("00_a.ipynb", "# 00 · Set-up"), ("01_b.ipynb", "# 01 · The idea: long subtitle")]:
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(heading)])
        nbformat.write(nb, tmp_path / name)
        paths.append(tmp_path / name)
    assert title(paths[1]) == "The idea"
    assert nav_line(paths, 0) == "[Contents](../README.md) · [01 The idea →](01_b.ipynb)"
    assert nav_line(paths, 1, True) == (
        "[← 00 Set-up](00_a.ipynb) · [Contents](../README.md) · "
        "[Graded exercises: answer them in your copy, my-work/ →](../README.md#your-own-copy)")
    assert "exercises/" not in nav_line(paths, 1, tmp_path / "06_x.ipynb"), \
        "never into exercises/: a course update rewrites it, and answers typed there are lost"
    assert nav_line(paths, 1, False) == "[← 00 Set-up](00_a.ipynb) · [Contents](../README.md)"


MY_LESSONS = [p for p in LESSONS if p.name[:2] in ("00", "02", "03", "04", "05", "06")]


@pytest.mark.parametrize("path", MY_LESSONS, ids=lambda p: p.name)
def test_test_plumbing_is_out_of_sight_and_code_fits_a_window(path):
    nb = _nb(path)
    code = [c for c in nb.cells if c.cell_type == "code"]
    visible = [c.source[:50] for c in code if "NBVAL" in c.source]
    assert not visible, f"nbval markers shown to learners (use cell tags instead): {visible}"
    long = [line for c in code for line in c.source.splitlines() if len(line) > 100]
    assert not long, f"{len(long)} code lines over 100 characters, e.g. {long[:2]}"


@pytest.mark.parametrize("path", [p for p in MY_LESSONS if p.name[:2] != "00"], ids=lambda p: p.name)
def test_further_learning_entries_link_to_their_sources(path):
    text = "\n".join(c.source for c in _nb(path).cells if c.cell_type == "markdown")
    section = text.split("## Further learning", 1)[1].split("\n[", 1)[0]
    entries = [ln for ln in section.splitlines() if ln.startswith("- ")]
    external = [e for e in entries if not e.startswith(("- `", "- Next"))]
    unlinked = [e[:60] for e in external if "](http" not in e]
    assert external and not unlinked, f"further-learning entries without a link: {unlinked}"
    assert "original lesson" not in text.lower(), "learners never see 'the original lesson': name the source or drop it"
