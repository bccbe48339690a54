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
    assert all(c.get("execution_count") for c in code), "every code cell is stored executed (python -m graphcourse.execute)"
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


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_navigation_links_point_to_files_that_exist(path):
    nb = _nb(path)
    first, last = nb.cells[0], nb.cells[-1]
    assert first.cell_type == last.cell_type == "markdown" and "Contents" in first.source and first.source == last.source
    for target in re.findall(r"\]\(([^)#]+)\)", first.source):
        assert (path.parent / target).resolve().exists(), f"{path.name}: navigation link to missing {target}"
    index = LESSONS.index(path)
    if index + 1 < len(LESSONS):
        assert LESSONS[index + 1].name in first.source, f"{path.name} links to the next lesson"


def test_navigation_lines_are_what_the_nav_tool_writes():
    from graphcourse.nav import update

    assert update(check=True) == [], "run python -m graphcourse.nav"


def test_nav_tool_titles_and_links(tmp_path):
    from graphcourse.nav import nav_line, title

    paths = []
    for name, heading in [("00_a.ipynb", "# 00 · Set-up"), ("01_b.ipynb", "# 01 · The idea: long subtitle")]:
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(heading)])
        nbformat.write(nb, tmp_path / name)
        paths.append(tmp_path / name)
    assert title(paths[1]) == "The idea"
    assert nav_line(paths, 0) == "[Contents](../README.md) · [01 The idea →](01_b.ipynb)"
    assert nav_line(paths, 1, tmp_path / "06_x.ipynb") == (
        "[← 00 Set-up](00_a.ipynb) · [Contents](../README.md) · [Graded exercises →](../exercises/06_x.ipynb)")
