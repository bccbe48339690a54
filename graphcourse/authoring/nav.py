"""The navigation line (previous · contents · next) at the top and bottom of every lesson, and under the top
one an "Open in Colab" link and a Colab set-up cell: made when the release is built, never stored in a lesson.

The authored lessons (``notebooks/``) hold only what their author wrote. The release
(graphcourse.authoring.release, ``make release``) dresses each lesson it writes with :func:`dress`: the
navigation lines from the lessons' file names and titles, the Colab cells, and the slide marks
(graphcourse.authoring.slides). A lesson's title is its first heading without the number:
``# 02 · The launch tax: why ...`` gives "The launch tax". So a one-sentence edit to a lesson changes that
lesson alone, and every generated line is made the same way for the release, the site, the browser build
and the class server.

    python -m graphcourse.authoring.nav --check   # exit 1 when an authored lesson holds generated cells
    python -m graphcourse.authoring.nav           # remove them (a lesson copied back from a release)

The links are relative paths to files of the course (``02_launch_tax.ipynb``, ``../README.md``): they
work in JupyterLab serving the release (``make lab``) and on GitHub. The Colab link and the set-up cell
are made from ONE setting, the repository URL in pyproject.toml's ``[tool.graphcourse] repository`` (and
``branch``), where the release is published. While it is empty (the course is not published yet) the
link cell says so and the set-up cell, on Colab, says how to get the course there: no lesson links to a
repository that does not exist.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tomllib
from pathlib import Path

import nbformat

from ..core.paths import ROOT

NAV_CELL = re.compile(r"^(\[←[^\]]*\]\([^)]*\) · )?\[Contents\]\(")
COLAB_LINK_ID, COLAB_SETUP_ID = "colab-link", "colab-setup"
CLONE_DIR = "/content/cuda-graphs-course"  # where the set-up cell puts the course on Colab


def repository(pyproject: Path = ROOT / "pyproject.toml") -> tuple[str | None, str]:
    """(repository URL or None while unset, branch): the one setting behind the Colab links, from pyproject.toml."""
    with open(pyproject, "rb") as f:
        data = tomllib.load(f)
    settings = data.get("tool", {}).get("graphcourse", {})
    url = str(settings.get("repository", "")).strip()
    branch = settings.get("branch", "main")
    if not url:
        return None, branch
    m = re.fullmatch(r"https://github\.com/([\w.-]+)/([\w.-]+?)(?:\.git)?/?", url)
    if not m:
        raise ValueError(f"pyproject.toml [tool.graphcourse] repository must be a GitHub URL "
                         f"(https://github.com/OWNER/NAME), or empty while the course is not published; "
                         f"found {url!r}")
    return f"https://github.com/{m.group(1)}/{m.group(2)}", branch


def _course_path(path: Path | str) -> str:
    """A notebook's path in the course (POSIX, relative): given relative, as it is; given absolute, from ROOT."""
    path = Path(path)
    return path.resolve().relative_to(ROOT).as_posix() if path.is_absolute() else path.as_posix()


def colab_url(path: Path | str, repo: str, branch: str) -> str:
    """The Colab link of a notebook of the course: colab.research.google.com/github/OWNER/NAME/blob/BRANCH/PATH."""
    rel = _course_path(path)
    return f"https://colab.research.google.com/github/{repo.removeprefix('https://github.com/')}/blob/{branch}/{rel}"


UNPUBLISHED_LINK = (
    "**On a free GPU (Colab):** this copy of the course is not published on GitHub yet, so its lessons have no "
    "*Open in Colab* link. The GPU parts run live on any machine with an NVIDIA GPU (README, \"Set-up\"); on a "
    "machine without one they show the figures recorded on the H200, labelled as recorded.")
"""What the first lesson says while `repository` is unset (README, "Teaching with it", tells the author what to set)."""
UNPUBLISHED_SHORT = "**Colab:** no *Open in Colab* link yet (lesson 00 says why)."
"""What every later lesson says instead: the paragraph once, not in every lesson."""


def colab_link_source(path: Path, repo: str | None, branch: str) -> str:
    if repo is None:
        return UNPUBLISHED_LINK if Path(path).name.startswith("00_") else UNPUBLISHED_SHORT
    return (f"[Open in Colab]({colab_url(path, repo, branch)}) to run this lesson on a free GPU: "
            "the next cell installs the course there (anywhere else it does nothing).")


def colab_setup_source(path: Path, repo: str | None, branch: str) -> str:
    """The first code cell: on Colab only, fetch the course, install it, and work from its notebook folder."""
    folder = Path(_course_path(path)).parent.as_posix()
    if repo is None:
        return f'''# On Google Colab only (anywhere else this cell does nothing): this copy of the course
# names no public repository yet, so the cell cannot fetch the course; it says what to do.
import sys

if "google.colab" in sys.modules:
    print("This notebook needs the course's packages (toygraph, graphcourse). Upload the course's "
          "folder to Colab, run `pip install -e <that folder>`, then run this notebook from its "
          "{folder}/ folder.")
'''.rstrip("\n")
    return f'''# On Google Colab only (anywhere else this cell does nothing): fetch the course, install it,
# and run from its {folder}/ folder, so the GPU parts run live on Colab's GPU.
import sys

if "google.colab" in sys.modules:
    import os
    import subprocess

    COURSE = "{CLONE_DIR}"
    if not os.path.isdir(COURSE):
        subprocess.run(["git", "clone", "-q", "--depth", "1", "--branch", "{branch}",
                        "{repo}", COURSE], check=True)
    # Colab has torch, matplotlib and ipywidgets: install the course alone, for this kernel now
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "-e", COURSE],
                   check=True)
    sys.path.insert(0, COURSE)
    os.chdir(os.path.join(COURSE, "{folder}"))
    from google.colab import output

    output.enable_custom_widget_manager()  # the sliders are ipywidgets
'''.rstrip("\n")


def _shift_counts(nb, by: int = 1) -> None:
    """Renumber the stored execution counts as if one more cell had run first."""
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.get("execution_count"):
            cell.execution_count += by
            for out in cell.outputs:
                if out.get("execution_count"):
                    out.execution_count += by


def colab_cells(nb, path: Path, repo: str | None, branch: str) -> bool:
    """Insert (after the top navigation cell) or refresh the Colab link and set-up cells; True when changed."""
    link, setup = colab_link_source(path, repo, branch), colab_setup_source(path, repo, branch)
    by_id = {c.get("id"): c for c in nb.cells}
    changed = False
    if COLAB_LINK_ID not in by_id:
        cell = nbformat.v4.new_markdown_cell(link, id=COLAB_LINK_ID)
        nb.cells.insert(1, cell)
        changed = True
    elif by_id[COLAB_LINK_ID].source != link:
        by_id[COLAB_LINK_ID].source, changed = link, True
    if COLAB_SETUP_ID not in by_id:
        # stored as run first, with no output: exactly what running it off Colab gives
        _shift_counts(nb)
        cell = nbformat.v4.new_code_cell(setup, id=COLAB_SETUP_ID, execution_count=1,
                                         metadata={"tags": ["colab-setup"]})
        nb.cells.insert(2, cell)
        changed = True
    elif by_id[COLAB_SETUP_ID].source != setup:
        by_id[COLAB_SETUP_ID].source, changed = setup, True
    for cell_id in (COLAB_LINK_ID, COLAB_SETUP_ID):  # slides skip them
        cell = next(c for c in nb.cells if c.get("id") == cell_id)
        if cell.metadata.get("slideshow", {}).get("slide_type") != "skip":
            cell.metadata["slideshow"] = {"slide_type": "skip"}
            changed = True
    return changed


def lessons(folder: Path = ROOT / "notebooks") -> list[Path]:
    """The lessons in reading order: notebooks/NN_name.ipynb."""
    return sorted(folder.glob("[0-9][0-9]_*.ipynb"))


def title_of(nb) -> str:
    """The short title of a lesson (a notebook node or its JSON), from its first `# NN · Title: subtitle` heading."""
    for cell in nb["cells"]:
        source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        if cell["cell_type"] == "markdown" and source.startswith("# "):
            heading = source.splitlines()[0][2:]
            return re.sub(r"^\d+\s*·\s*", "", heading).split(":")[0].strip()
    raise ValueError("no '# NN · Title' heading to take the lesson's title from.")


def title(path: Path) -> str:
    """The short title of the lesson in `path` (see :func:`title_of`)."""
    try:
        return title_of(json.loads(Path(path).read_text(encoding="utf-8")))
    except ValueError as exc:
        raise ValueError(f"{Path(path).name}: {exc}") from None


EXERCISES_LINK = "[Graded exercises: answer them in your copy, my-work/ →](../README.md#your-own-copy)"
"""The last lesson's way on: the README's section on the learner's own copies in my-work/ (made by
`make lab` / `make my-exercises`, never overwritten), not a file in exercises/, which a course update
rewrites: a learner who answered there would lose the work."""


def nav_line(paths: list[Path], index: int, exercises: bool | Path | None = None,
             titles: dict[str, str] | None = None) -> str:
    """The navigation line of lesson `index`: previous lesson, the contents (README), the next lesson or the exercises.

    `exercises`: whether the course has graded exercises; the last lesson then links to
    :data:`EXERCISES_LINK` (how to get and where to answer one's own copy), never into exercises/.
    `titles`: the lessons' titles by file name, when already known (else each is read from its file).
    """
    def name_of(path: Path) -> str:
        return titles[Path(path).name] if titles is not None else title(path)

    parts = []
    if index > 0:
        prev = Path(paths[index - 1])
        parts.append(f"[← {prev.name[:2]} {name_of(prev)}]({prev.name})")
    parts.append("[Contents](../README.md)")
    if index + 1 < len(paths):
        nxt = Path(paths[index + 1])
        parts.append(f"[{nxt.name[:2]} {name_of(nxt)} →]({nxt.name})")
    elif exercises:
        parts.append(EXERCISES_LINK)
    return " · ".join(parts)


NAV_TOP_ID, NAV_BOTTOM_ID = "nav-top", "nav-bottom"


def strip(nb) -> bool:
    """Remove what :func:`dress` adds (navigation lines, Colab cells, slide marks); True when something was removed.

    An author's own slide tags (``slides:skip`` and the like) are the author's and stay."""
    changed = False
    setup = [c for c in nb.cells if c.get("id") == COLAB_SETUP_ID or "colab-setup" in c.metadata.get("tags", [])]
    keep = [c for c in nb.cells if c.get("id") != COLAB_LINK_ID and not any(c is s for s in setup)]
    if len(keep) != len(nb.cells):
        nb.cells, changed = keep, True
    if setup:
        _shift_counts(nb, -len(setup))  # stored as run first: the lesson's own cells count from 1 again
    for end in (0, -1):
        if nb.cells and nb.cells[end].cell_type == "markdown" and NAV_CELL.match(nb.cells[end].source):
            del nb.cells[end]
            changed = True
    for cell in nb.cells:
        if "slideshow" in cell.metadata:
            del cell.metadata["slideshow"]
            changed = True
    return changed


def dress(nb, rel: str, names: list[str], titles: dict[str, str], exercises: bool,
          repo: str | None, branch: str) -> None:
    """Give the authored lesson `nb` (course path `rel`, e.g. notebooks/02_launch_tax.ipynb) its navigation lines
    and Colab cells, as the release holds it. `names`: the lessons' file names in reading order; `titles`: their
    titles; `exercises`: whether the course has graded exercises. Anything generated it already holds is replaced."""
    strip(nb)
    name = Path(rel).name
    if name not in names:
        raise ValueError(f"{rel} is not one of the lessons {names}")
    line = nav_line([Path(n) for n in names], names.index(name), exercises, titles)
    nb.cells.insert(0, nbformat.v4.new_markdown_cell(line, id=NAV_TOP_ID))
    nb.cells.append(nbformat.v4.new_markdown_cell(line, id=NAV_BOTTOM_ID))
    colab_cells(nb, rel, repo, branch)


def generated(paths: list[Path] | None = None) -> list[str]:
    """The authored lessons that hold generated cells or marks (which the release makes, see :func:`dress`)."""
    found = []
    for path in paths if paths is not None else lessons():
        if strip(nbformat.read(path, as_version=4)):
            found.append(path.name)
    return found


def main(argv: list[str] | None = None) -> int:
    """Command line: find (--check) or remove generated cells in the authored lessons."""
    parser = argparse.ArgumentParser(prog="python -m graphcourse.authoring.nav", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="only report authored lessons that hold navigation, Colab cells or slide marks")
    args = parser.parse_args(argv)
    try:
        found = generated()
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.check:
        if found:
            print(f"{', '.join(found)} hold navigation, Colab cells or slide marks, which the release makes: "
                  "run python -m graphcourse.authoring.nav to remove them", file=sys.stderr)
            return 1
        print(f"authored lessons checked: {len(lessons())}, none holds generated cells")
        return 0
    for path in lessons():
        nb = nbformat.read(path, as_version=4)
        if strip(nb):
            nbformat.write(nb, path)
    print(f"authored lessons: {len(lessons())}" + (f", removed generated cells from {', '.join(found)}" if found else
                                                  ", none held generated cells"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
