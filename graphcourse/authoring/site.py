"""Build the course's static site: the lessons as stored, the exercises without answers, the learner's docs.

`python -m graphcourse.authoring.site` (or `make site`) first builds the learner release
(graphcourse.authoring.release) into build/site-release/, then stages a copy of its notebooks/,
exercises/, docs/ and README.md under build/site-src/, and runs Sphinx with myst-nb over it
(docs/site/conf.py) into build/site/. It reads the release rather than the repository so that
the site publishes only what a learner may read: no solutions, no tests, no instructor kit
(docs/instructor/ holds the answers). Nothing is executed: each lesson shows
the outputs it was stored with, under a "recorded on" line naming the GPU, torch and date
(from data/gpu_reference.json's provenance, and from what the lesson's own outputs say about
the machine that ran them). The staged copy differs from the lessons only in what a web page
needs: that line, `# NBVAL_...` comment lines dropped from code, each figure's text
alternative, and slider widgets unfolded into the static outputs saved in their state.
After the build every relative link and fragment of every page is checked, and so is that the
site loads nothing from another host (it works offline).
"""

from __future__ import annotations

import argparse
import html.parser
import json
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import nbformat

from ..core.cli import exit_status
from ..core.paths import ROOT
from ..errors import GraphCourseError
from . import release

CONF_DIR = ROOT / "docs" / "site"
DEFAULT_SRC = ROOT / "build" / "site-src"
DEFAULT_RELEASE = ROOT / "build" / "site-release"
"""The release the site is built from (a folder of its own, so that `make release`'s build/release is left alone)."""
DEFAULT_OUT = ROOT / "build" / "site"

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
NBVAL_COMMENT = re.compile(r"^\s*#\s*NBVAL_\w+\s*$")
GPU_SAID = re.compile(r"(?:A CUDA GPU is here \(|CUDA GPU here: True \(|measured live on )([^),\n]+)")
NO_GPU_SAID = "No CUDA GPU here"


class SiteError(GraphCourseError):
    """The site could not be built, or the built site has broken links."""


# --------------------------------------------------------------------------- what a lesson was recorded on


def provenance(reference: Path | None = None) -> dict[str, Any]:
    """The provenance of the recorded GPU results (data/gpu_reference.json), or {} when the file is missing."""
    path = reference or ROOT / "data" / "gpu_reference.json"
    try:
        return dict(json.loads(path.read_text()).get("provenance", {}))
    except (OSError, ValueError):
        return {}


def _output_text(nb: nbformat.NotebookNode) -> str:
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if out.get("output_type") == "stream":
                parts.append(out.get("text", ""))
            elif "text/plain" in out.get("data", {}):
                parts.append(str(out["data"]["text/plain"]))
    return "\n".join(parts)


def recorded_on(nb: nbformat.NotebookNode, prov: dict[str, Any]) -> str:
    """The "recorded on: GPU, torch, date" line of one lesson, as HTML.

    The GPU, torch and date come from the benchmark's provenance; the line says whether the
    lesson's own outputs were measured live on that GPU or came from a machine without one.
    """
    gpu = prov.get("gpu_name", "an unnamed GPU")
    torch_version = prov.get("torch", "unknown")
    date = str(prov.get("date_utc", "unknown date"))[:10]
    text = _output_text(nb)
    said = GPU_SAID.search(text)
    if said:
        how = f"outputs as stored, run on {said.group(1).strip()}"
    elif NO_GPU_SAID in text:
        how = "outputs as stored, run on a machine without a CUDA GPU: its GPU figures are the recorded ones"
    elif not any(c.get("outputs") for c in nb.cells if c.cell_type == "code"):
        how = "stored without outputs"
    else:
        how = "outputs as stored (this lesson's cells need no GPU)"
    if not prov:
        return ('<p class="recorded-on"><strong>Recorded on:</strong> no recorded GPU results in this copy '
                f"(data/gpu_reference.json is missing); {how}.</p>")
    return (f'<p class="recorded-on"><strong>Recorded on:</strong> {gpu}, torch {torch_version}, {date} '
            f"({how}; GPU figures from the course's benchmark, data/gpu_reference.json).</p>")


# --------------------------------------------------------------------------- widgets and figures, made static


def _widget_outputs(model_id: str, state: dict[str, Any], seen: set[str] | None = None) -> tuple[list[str], list]:
    """Controls (as 'description = value') and stored outputs of a widget and its children."""
    seen = set() if seen is None else seen
    if model_id in seen or model_id not in state:
        return [], []
    seen.add(model_id)
    model = state[model_id]
    st = model.get("state", {})
    controls, outputs = [], []
    if model.get("model_name") == "OutputModel":
        outputs.extend(st.get("outputs", []))
    elif st.get("description") is not None and ("value" in st or "index" in st):
        value = st.get("value")
        labels = st.get("_options_labels") or []
        if value is None and isinstance(st.get("index"), int) and 0 <= st["index"] < len(labels):
            value = labels[st["index"]]  # a dropdown saves the index of its choice
        controls.append(f"{st.get('description') or model.get('model_name', 'control')} = {value}")
    for child in st.get("children", []):
        if isinstance(child, str) and child.startswith("IPY_MODEL_"):
            c, o = _widget_outputs(child[len("IPY_MODEL_"):], state, seen)
            controls += c
            outputs += o
    return controls, outputs


def unfold_widgets(nb: nbformat.NotebookNode) -> int:
    """Replace each widget view by the outputs saved in its state (text and figure), under a line naming its controls."""
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    unfolded = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        new_outputs = []
        for out in cell.get("outputs", []):
            view = out.get("data", {}).get(WIDGET_VIEW) if out.get("output_type") in ("display_data",
                                                                                      "execute_result") else None
            if not view:
                new_outputs.append(out)
                continue
            controls, outputs = _widget_outputs(view.get("model_id", ""), state)
            where = ("Sliders: interactive in JupyterLab ({}); on this page, the outputs they showed when the lesson "
                     "was stored")
            note = where + (f", with {'; '.join(controls)}." if controls else ".")
            html_note = _escape(note).format("<code>make lab</code>")
            new_outputs.append(nbformat.v4.new_output("display_data", data={
                "text/html": f'<p class="widget-snapshot">{html_note}</p>', "text/plain": note.format("make lab")}))
            for o in outputs:
                new_outputs.append(nbformat.from_dict(o))
            unfolded += 1
        cell.outputs = new_outputs
    nb.metadata.pop("widgets", None)
    return unfolded


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _printed(cell: nbformat.NotebookNode | None) -> str:
    if cell is None:
        return ""
    text = " ".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")
    return " ".join(text.split())


def alt_for_cell(cell: nbformat.NotebookNode, heading: str, before: nbformat.NotebookNode | None = None) -> str:
    """The text alternative of a cell's figure: the one stored with it (graphcourse.lessons.palette), else one made from
    the section it sits in and the numbers printed with it (by the cell, else by the code cell before it)."""
    for out in cell.get("outputs", []):
        alt = out.get("metadata", {}).get("image/png", {}).get("alt") if isinstance(out.get("metadata"), dict) else None
        if alt:
            return str(alt)
    alt = f"Figure in '{heading}'" if heading else "Figure"
    if _printed(cell):
        alt += f"; the cell prints its numbers: {_printed(cell)}"
    elif _printed(before):
        alt += f"; the numbers printed just before it: {_printed(before)}"
    return alt[:597] + "…" if len(alt) > 600 else alt


def add_alt_text(nb: nbformat.NotebookNode) -> int:
    """Give every cell that shows a figure a text alternative (myst-nb puts it in the image's alt)."""
    heading = ""
    count = 0
    before = None
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            found = re.findall(r"^#+\s+(.+)$", cell.source, flags=re.M)
            heading = found[-1].strip() if found else heading
            continue
        if cell.cell_type != "code":
            continue
        if any("image/png" in o.get("data", {}) for o in cell.get("outputs", [])):
            alt = alt_for_cell(cell, heading, before)
            cell.metadata.setdefault("mystnb", {}).setdefault("image", {})["alt"] = alt
            count += 1
        before = cell
    return count


# --------------------------------------------------------------------------- staging the sources


STAGED = ("notebooks/", "exercises/", "docs/", "README.md", "index.md")
MD_IMAGE = re.compile(r"!\[([^\]]*)\]\((https?://[^)\s]+)[^)]*\)")
MD_LINK = re.compile(r"(?<!!)\[([^\]]+)\]\(([^)\s]+)\)")


EXPLICIT_ANCHOR = re.compile(r'^<a id="([A-Za-z][\w-]*)"></a>[ \t]*$', re.MULTILINE)
"""A line holding only an explicit anchor, as the README puts one before a heading it links to."""


def web_ready(markdown: str, rel_path: str, root: Path = ROOT) -> str:
    """Markdown as the offline site can show it: images from other hosts become their alt text (a badge such as
    "Open in Colab" stays a link), and links to repository files that are not pages name the file instead.

    `rel_path` is the markdown's path inside `root`, the folder it was read from (the release, for the site):
    a link to a file the authored course has but `root` lacks (the instructor kit, solutions/) keeps only its text.
    """
    root = root.resolve()
    markdown = MD_IMAGE.sub(lambda m: m.group(1) or "image", markdown)
    # an explicit anchor line, `<a id="name"></a>` (GitHub and JupyterLab), becomes a MyST target, `(name)=`,
    # so that links to `page#name` resolve in the site too
    markdown = EXPLICIT_ANCHOR.sub(r"(\1)=", markdown)
    here = Path(rel_path).parent

    def fix(match: re.Match) -> str:
        text, target = match.group(1), match.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, flags=re.I) or target.startswith(("#", "/")):
            return match.group(0)
        path = target.split("#", 1)[0]
        resolved = Path(*[p for p in (here / path).parts])
        try:
            norm = (root / resolved).resolve().relative_to(root).as_posix()
        except ValueError:
            return match.group(0)
        if not (root / norm).exists() and (ROOT / norm).exists():
            return text  # in the authored course only, never published: no link to it
        if norm == "README.md":  # the README is the site's home page, index.md
            fragment = target[len(path):]
            return f"[{text}]({os.path.relpath('index.md', here.as_posix() or '.')}{fragment})"
        if norm.startswith(STAGED) or norm in STAGED or not (root / norm).exists():
            return match.group(0)  # a page of the site (or a broken link, which the build reports)
        return f"{text} (`{norm}` in the course's files)" if text.strip("`") != norm else f"`{norm}`"

    return MD_LINK.sub(fix, markdown)


def _stage_notebook(src: Path, dest: Path, prov: dict[str, Any] | None, contents: str, root: Path = ROOT) -> None:
    nb = nbformat.read(src, as_version=4)
    root = root.resolve()
    rel = src.resolve().relative_to(root).as_posix() if src.resolve().is_relative_to(root) else src.name
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.source = "\n".join(line for line in cell.source.splitlines() if not NBVAL_COMMENT.match(line))
        elif cell.cell_type == "markdown":
            cell.source = web_ready(cell.source.replace("](../README.md)", f"]({contents})"), rel, root)
    unfold_widgets(nb)
    add_alt_text(nb)
    if prov is not None:
        for i, cell in enumerate(nb.cells):
            if cell.cell_type == "markdown" and cell.source.startswith("# "):
                title, _, rest = cell.source.partition("\n")
                cell.source = f"{title}\n\n{recorded_on(nb, prov)}\n{rest}"
                break
    dest.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, dest)


def _title(path: Path) -> str:
    if path.suffix == ".ipynb":
        nb = nbformat.read(path, as_version=4)
        text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    else:
        text = path.read_text()
    found = re.search(r"^#\s+(.+)$", text, flags=re.M)
    return found.group(1).strip() if found else path.stem


def stage(src: Path = DEFAULT_SRC, reference: Path | None = None,
          release_dir: Path = DEFAULT_RELEASE) -> dict[str, list[str]]:
    """Build the release into `release_dir`, then write the site's sources from it into `src` (replacing what was
    there); returns the documents by section. Only files the release wrote (its release.json) are read."""
    try:
        manifest = release.build(release_dir, log=lambda m: None)
    except release.ReleaseError as exc:
        raise SiteError(f"the site is built from the learner release, which could not be built: {exc}") from None
    base = Path(release_dir).resolve()
    files = sorted(manifest["files"])
    if src.exists():
        shutil.rmtree(src)
    src.mkdir(parents=True)
    prov = provenance(reference or base / "data" / "gpu_reference.json")
    lessons = [base / f for f in files if re.fullmatch(r"notebooks/[0-9][0-9]_[^/]*\.ipynb", f)]
    if not lessons:
        raise SiteError(f"no lessons in {base / 'notebooks'}: the site needs notebooks/NN_name.ipynb.")
    sections: dict[str, list[str]] = {"Lessons": [], "Graded exercises": [], "About": []}
    for path in lessons:
        _stage_notebook(path, src / "notebooks" / path.name, prov, "../index.md", base)
        sections["Lessons"].append(f"notebooks/{path.stem}")
    for path in (base / f for f in files if re.fullmatch(r"exercises/[^/]*\.ipynb", f)):
        _stage_notebook(path, src / "exercises" / path.name, None, "../index.md", base)
        sections["Graded exercises"].append(f"exercises/{path.stem}")
    for name in files:
        rel = Path(name)
        if rel.parts[0] != "docs" or rel.parts[:2] == ("docs", "site") or ".ipynb_checkpoints" in rel.parts:
            continue
        path, dest = base / rel, src / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".ipynb":
            _stage_notebook(path, dest, None, "/".join([".."] * (len(rel.parts) - 1)) + "/index.md", base)
        elif path.suffix == ".md":
            dest.write_text(web_ready(path.read_text(), rel.as_posix(), base))
        else:
            shutil.copy2(path, dest)
        if path.suffix in (".md", ".ipynb"):
            sections["About"].append(str(rel.with_suffix("")))
    (src / "README.md").write_text(web_ready((base / "README.md").read_text(), "README.md", base))
    toctrees = []
    for caption, docs_in in sections.items():
        if docs_in:
            entries = "\n".join(docs_in)
            toctree = f"```{{toctree}}\n:caption: {caption}\n:maxdepth: 1\n\n{entries}\n```\n"
            toctrees.append(toctree)
    (src / "index.md").write_text("```{include} README.md\n```\n\n" + "\n".join(toctrees))
    return sections


# --------------------------------------------------------------------------- checking the built site


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.refs: list[tuple[str, str]] = []
        self.images: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        for key in ("id", "name"):
            if a.get(key) and (key == "id" or tag == "a"):
                self.ids.add(str(a[key]))
        for key in ("href", "src"):
            if a.get(key):
                self.refs.append((tag, str(a[key])))
        if tag == "img":
            self.images.append(a)


@dataclass
class LinkReport:
    """What the link check of a built site found."""

    pages: int = 0
    links_checked: int = 0
    external: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)
    images_without_alt: list[str] = field(default_factory=list)


def _parse(path: Path) -> _Links:
    parser = _Links()
    parser.feed(path.read_text(errors="replace"))
    return parser


def check_site(out: Path) -> LinkReport:
    """Check every page of a built site: relative links and #fragments resolve, nothing loads from another host,
    every image has alt text, and no link points at a source file (.ipynb, .md) that was not turned into a page."""
    report = LinkReport()
    pages = sorted(p for p in out.rglob("*.html") if "_static" not in p.relative_to(out).parts)
    parsed = {p: _parse(p) for p in pages}
    report.pages = len(pages)
    for page, links in parsed.items():
        rel_page = page.relative_to(out)
        for img in links.images:
            if not (img.get("alt") or "").strip():
                report.images_without_alt.append(f"{rel_page}: <img src={img.get('src')!r}>")
        for tag, ref in links.refs:
            parts = urlsplit(ref)
            if parts.scheme in ("mailto", "data", "javascript"):
                continue
            if parts.scheme or ref.startswith("//"):
                if tag in ("script", "img", "link", "iframe", "source"):
                    report.problems.append(f"{rel_page}: <{tag}> loads {ref} from another host (the site must work "
                                           f"offline)")
                else:
                    report.external.add(ref)
                continue
            report.links_checked += 1
            target = page if not parts.path else (page.parent / unquote(parts.path)).resolve()
            if parts.path.endswith("/") or (target.exists() and target.is_dir()):
                target = target / "index.html"
            if not target.exists():
                report.problems.append(f"{rel_page}: link {ref!r} points at a missing file")
                continue
            if target.suffix in (".ipynb", ".md") and tag == "a" and "_sources" not in target.parts:
                report.problems.append(f"{rel_page}: link {ref!r} points at a source file, not a page")
            if parts.fragment and target.suffix == ".html":
                ids = parsed[target].ids if target in parsed else _parse(target).ids
                if unquote(parts.fragment) not in ids:
                    report.problems.append(f"{rel_page}: link {ref!r}: no #{parts.fragment} in {target.name}")
    return report


# --------------------------------------------------------------------------- the build


def build(out: Path = DEFAULT_OUT, src: Path = DEFAULT_SRC, quiet: bool = True,
          release_dir: Path = DEFAULT_RELEASE) -> LinkReport:
    """Build the release and stage the site's sources from it, build the HTML site with Sphinx (warnings are
    errors), check its links; SiteError if any fail."""
    try:
        from sphinx.cmd.build import build_main
    except ImportError:
        raise SiteError("Sphinx is not installed: `pip install -e '.[site]'` installs Sphinx, myst-nb and the "
                        "book theme (make site does it).") from None
    stage(src, release_dir=release_dir)
    if out.exists():
        shutil.rmtree(out)
    doctrees = out.parent / (out.name + "-doctrees")
    args = ["-b", "html", "-c", str(CONF_DIR), "-d", str(doctrees), "-W", "--keep-going", "-n", "-E"]
    args += ["-q"] if quiet else []
    status = build_main(args + [str(src), str(out)])
    if status != 0:
        raise SiteError(f"Sphinx failed (exit {status}); its warnings above say which page and line.")
    report = check_site(out)
    if report.problems or report.images_without_alt:
        lines = report.problems + [f"image without alt text: {i}" for i in report.images_without_alt]
        raise SiteError(f"the built site at {out} has {len(lines)} problem(s):\n  " + "\n  ".join(lines[:40]))
    return report


def main(argv: list[str] | None = None) -> int:
    """Command line: build the site, or only check an already built one (--check-only)."""
    parser = argparse.ArgumentParser(prog="python -m graphcourse.authoring.site", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where the HTML goes (default build/site)")
    parser.add_argument("--check-only", action="store_true", help="only check the links of a site already built")
    parser.add_argument("--verbose", action="store_true", help="show Sphinx's progress")
    args = parser.parse_args(argv)
    started = time.monotonic()

    def body() -> None:
        if args.check_only:
            report = check_site(args.out)
            if report.problems or report.images_without_alt:
                raise SiteError("\n".join(report.problems + report.images_without_alt))
        else:
            report = build(args.out, quiet=not args.verbose)
        print(f"site: {report.pages} pages, {report.links_checked} internal links checked, "
              f"{len(report.external)} external links not followed (no network), "
              f"{time.monotonic() - started:.0f} s -> {args.out / 'index.html'}")

    return exit_status(body, "error", SiteError)


if __name__ == "__main__":
    sys.exit(main())
