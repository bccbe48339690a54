"""Every link in the lessons, the exercises, the README and docs/ resolves, in JupyterLab and on GitHub.

JupyterLab (``make lab`` serves the repository root) and GitHub both resolve a relative link
against the folder of the file that holds it, so a relative link works in both when it names
a file of the repository that git tracks (not one git ignores, such as my-work/). Anchors are
stricter: GitHub makes a heading's id by lower-casing it and dropping punctuation
(``## Check yourself`` -> ``check-yourself``), JupyterLab keeps its case and only replaces
spaces (``Check-yourself``); an anchor must be valid in both (or be an explicit
``<a id="...">``). "Open in Colab" links must name a notebook that exists. And from the README,
following links reaches every lesson and every exercises notebook.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from urllib.parse import unquote

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted(
    [ROOT / "README.md"]
    + list((ROOT / "notebooks").glob("*.ipynb"))
    + list((ROOT / "exercises").glob("*.ipynb"))
    + list((ROOT / "docs").glob("*.md"))
    + list((ROOT / "docs" / "instructor").rglob("*.md"))
)
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_LINK = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)", re.MULTILINE)
HTML_LINK = re.compile(r"""(?:href|src)\s*=\s*["']([^"']+)["']""")
EXPLICIT_ID = re.compile(r"""<a\s+(?:id|name)\s*=\s*["']([^"']+)["']""")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
COLAB = re.compile(r"https://colab\.research\.google\.com/github/[^/]+/[^/]+/blob/[^/]+/(.+)")


def markdown_of(path: Path) -> str:
    """The markdown text of a file: a .md file whole, a notebook's markdown cells joined."""
    if path.suffix == ".ipynb":
        nb = nbformat.read(path, as_version=4)
        return "\n\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    return path.read_text(encoding="utf-8")


def links_in(text: str) -> list[str]:
    """Link targets of markdown links, images, reference links and HTML href/src, outside code."""
    text = CODE_SPAN.sub("", FENCE.sub("", text))
    return LINK.findall(text) + REF_LINK.findall(text) + HTML_LINK.findall(text)


def _plain(heading: str) -> str:
    """A heading's text as rendered: links become their text, code and emphasis marks go."""
    heading = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    return re.sub(r"[`*]", "", heading)


def github_slug(heading: str) -> str:
    text = _plain(heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def jupyterlab_id(heading: str) -> str:
    return _plain(heading).strip().replace(" ", "-")


def anchors(path: Path) -> tuple[set[str], set[str]]:
    """(ids GitHub gives the file's headings, ids JupyterLab gives them), explicit <a id> in both."""
    text = FENCE.sub("", markdown_of(path))
    heads = HEADING.findall(text)
    gh, seen = set(), {}
    for h in heads:
        slug = github_slug(h)
        n = seen.get(slug, 0)
        gh.add(slug if n == 0 else f"{slug}-{n}")
        seen[slug] = n + 1
    jl = {jupyterlab_id(h) for h in heads}
    explicit = set(EXPLICIT_ID.findall(text))
    return gh | explicit, jl | explicit


def git_ignored(path: Path) -> bool:
    try:
        return subprocess.run(["git", "check-ignore", "-q", str(path)], cwd=ROOT,
                              capture_output=True).returncode == 0
    except OSError:
        return False


def problems_of(source: Path) -> list[str]:
    found = []
    for target in links_in(markdown_of(source)):
        if target.startswith(("http://", "https://")):
            m = COLAB.match(target)
            if m and not (ROOT / unquote(m.group(1))).is_file():
                found.append(f"{target}: the Colab link names no notebook of this repository")
            continue
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # mailto:, data: ...
            continue
        path_part, _, anchor = target.partition("#")
        dest = (source.parent / unquote(path_part)).resolve() if path_part else source
        if path_part:
            if ROOT not in dest.parents and dest != ROOT:
                found.append(f"{target}: points outside the repository")
                continue
            if not dest.exists():
                found.append(f"{target}: no such file")
                continue
            if git_ignored(dest):
                found.append(f"{target}: git ignores it, so GitHub does not have it")
                continue
        if anchor:
            if dest.is_dir() or dest.suffix not in (".md", ".ipynb"):
                found.append(f"{target}: an anchor into a file that has no headings")
                continue
            gh, jl = anchors(dest)
            if anchor not in gh or anchor not in jl:
                found.append(f"{target}: anchor not valid in both renderers (GitHub has "
                             f"{sorted(a for a in gh if anchor.lower() in a)[:3]}, JupyterLab "
                             f"{sorted(a for a in jl if anchor.lower() in a.lower())[:3]}); "
                             "link to the file, or add <a id=\"...\"></a> at the place")
    return found


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_link_resolves(source):
    found = problems_of(source)
    assert not found, f"{source.relative_to(ROOT)}:\n  " + "\n  ".join(found)


def test_everything_is_reachable_from_the_readme():
    """Following links from README.md (as a learner clicks) reaches every lesson and every exercises notebook."""
    todo, seen = [ROOT / "README.md"], set()
    while todo:
        page = todo.pop()
        if page in seen or not page.is_file() or page.suffix not in (".md", ".ipynb"):
            continue
        seen.add(page)
        for target in links_in(markdown_of(page)):
            path_part = target.partition("#")[0]
            if path_part and not re.match(r"^[a-z][a-z0-9+.-]*:", path_part):
                todo.append((page.parent / unquote(path_part)).resolve())
    wanted = set((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")) | set((ROOT / "exercises").glob("*.ipynb"))
    missing = sorted(p.relative_to(ROOT).as_posix() for p in wanted - seen)
    assert not missing, f"not reachable by links from README.md: {missing}"


def test_the_checker_catches_broken_links(tmp_path, monkeypatch):
    """The checks can fail: a missing file, a case-sensitive anchor, an ignored file, a bad Colab path."""
    page = ROOT / "docs" / "_link_probe.md"
    text = ("[a](no_such_file.md) [b](../README.md#Quick-start) [c](../README.md#quick-start) "
            "[d](../my-work/06_exercises.ipynb) "
            "[e](https://colab.research.google.com/github/o/n/blob/main/notebooks/99_none.ipynb) "
            "<a id=\"here\"></a> [f](#here) [g](#nowhere)\n\n## Quick start\n")
    monkeypatch.setattr(Path, "read_text", lambda self, encoding=None: text if self == page else
                        Path.read_bytes(self).decode())
    found = "\n".join(problems_of(page))
    assert "no_such_file.md: no such file" in found
    assert "#Quick-start: anchor not valid in both" in found  # JupyterLab's id, not GitHub's
    assert "#quick-start: anchor" in found  # GitHub's id, not JupyterLab's
    assert "99_none.ipynb" in found
    assert "#nowhere" in found and "#here:" not in found
    assert github_slug("Check yourself: `item()` & co.") == "check-yourself-item--co"
    assert jupyterlab_id("Check yourself") == "Check-yourself"
