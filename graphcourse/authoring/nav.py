"""Write the navigation line (previous · contents · next) at the top and bottom of every lesson,
and under the top one an "Open in Colab" link and a Colab set-up cell.

`python -m graphcourse.authoring.nav` rewrites them from the lessons' file names and titles;
`python -m graphcourse.authoring.nav --check` exits 1 when one is out of date. A lesson's title is its
first heading without the number: `# 02 · The launch tax: why ...` gives "The launch tax".
Only the first and last cells change, and only when they are navigation cells; the Colab
cells (ids ``colab-link`` and ``colab-setup``) are inserted after the first one, once, and
rewritten when the repository setting changes.

The links are relative paths to files of the repository (``02_launch_tax.ipynb``,
``../README.md``): they work in JupyterLab serving the repository root (``make lab``) and on
GitHub. The Colab link and the set-up cell are made from ONE setting, the repository URL in
pyproject.toml's ``[tool.graphcourse] repository`` (and ``branch``). While it is empty (the course
is not published yet) the link cell says so and the set-up cell, on Colab, says how to get the
course there: no lesson links to a repository that does not exist.
"""

from __future__ import annotations

import argparse
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


def colab_url(path: Path, repo: str, branch: str) -> str:
    """The Colab link of a notebook of this repository: colab.research.google.com/github/OWNER/NAME/blob/BRANCH/PATH."""
    rel = Path(path).resolve().relative_to(ROOT).as_posix()
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
    folder = Path(path).resolve().parent.relative_to(ROOT).as_posix()
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


def title(path: Path) -> str:
    """The short title of a lesson, from its first `# NN · Title: subtitle` heading."""
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "markdown" and cell.source.startswith("# "):
            heading = cell.source.splitlines()[0][2:]
            return re.sub(r"^\d+\s*·\s*", "", heading).split(":")[0].strip()
    raise ValueError(f"{path.name} has no '# NN · Title' heading to take its title from.")


EXERCISES_LINK = "[Graded exercises: answer them in your copy, my-work/ →](../README.md#your-own-copy)"
"""The last lesson's way on: the README's section on the learner's own copies in my-work/ (made by
`make lab` / `make my-exercises`, never overwritten), not a file in exercises/, which a course update
rewrites: a learner who answered there would lose the work."""


def nav_line(paths: list[Path], index: int, exercises: bool | Path | None = None) -> str:
    """The navigation line of lesson `index`: previous lesson, the contents (README), the next lesson or the exercises.

    `exercises`: whether the course has graded exercises; the last lesson then links to
    :data:`EXERCISES_LINK` (how to get and where to answer one's own copy), never into exercises/.
    """
    parts = []
    if index > 0:
        prev = paths[index - 1]
        parts.append(f"[← {prev.name[:2]} {title(prev)}]({prev.name})")
    parts.append("[Contents](../README.md)")
    if index + 1 < len(paths):
        nxt = paths[index + 1]
        parts.append(f"[{nxt.name[:2]} {title(nxt)} →]({nxt.name})")
    elif exercises:
        parts.append(EXERCISES_LINK)
    return " · ".join(parts)


def update(check: bool = False, colab: bool = True) -> list[str]:
    """Rewrite (or with check=True only find) the navigation cells that are out of date; returns the lessons concerned.

    With colab=True (the default) the Colab link and set-up cells count too.
    """
    paths = lessons()
    repo, branch = repository() if colab else ("", "")
    exercises = sorted((ROOT / "exercises").glob("*.ipynb"))
    stale = []
    for i, path in enumerate(paths):
        nb = nbformat.read(path, as_version=4)
        want = nav_line(paths, i, bool(exercises))
        changed = False
        for cell in (nb.cells[0], nb.cells[-1]):
            if cell.cell_type != "markdown" or not NAV_CELL.match(cell.source):
                raise ValueError(f"{path.name}: its first and last cells must be navigation lines "
                                 f"(a markdown cell holding '[Contents](../README.md)'); add them, then run this again.")
            if cell.source != want:
                cell.source, changed = want, True
        if colab and colab_cells(nb, path, repo, branch):
            changed = True
        if changed:
            stale.append(path.name)
            if not check:
                nbformat.write(nb, path)
    return stale


def main(argv: list[str] | None = None) -> int:
    """Command line: rewrite navigation lines, or check them with --check."""
    parser = argparse.ArgumentParser(prog="python -m graphcourse.authoring.nav", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report lessons whose navigation line is out of date")
    parser.add_argument("--no-colab", action="store_true", help="leave the Colab link and set-up cells alone")
    args = parser.parse_args(argv)
    try:
        stale = update(check=args.check, colab=not args.no_colab)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.check and stale:
        print(f"navigation out of date in {', '.join(stale)}: run python -m graphcourse.authoring.nav", file=sys.stderr)
        return 1
    print(f"navigation {'checked' if args.check else 'written'}: {len(lessons())} lessons"
          + (f", updated {', '.join(stale)}" if stale and not args.check else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
