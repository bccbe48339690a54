"""The static site (`make site`), built from the learner release: every lesson with its stored outputs and
recorded-on line, exercises without answers, nothing from the instructor kit, links that resolve, figures with
text alternatives; lesson 05 opened in headless Chromium."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import nbformat
import pytest

pytest.importorskip("sphinx", reason="Sphinx is not installed: pip install -e '.[site]'")
pytest.importorskip("myst_nb", reason="myst-nb is not installed: pip install -e '.[site]'")

from graphcourse.authoring import site  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
# the docs' screenshots are refreshed only when asked (COURSE_UPDATE_SCREENSHOTS=1, as in test_browser): a test
# run never rewrites tracked files; otherwise they go to a temporary folder (taking them still has to work)
SCREENSHOTS = (REPO / "docs" / "screenshots" if os.environ.get("COURSE_UPDATE_SCREENSHOTS", "") not in ("", "0")
               else Path(tempfile.mkdtemp(prefix="site-shots-")))
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]
LESSONS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
KIT = REPO / "docs" / "instructor"
KIT_LINE = ("the answers to *Things to try* are computed with the functions the sliders call, so they hold for "
            "the toy's model as it is")
"""A line of docs/instructor/lessons.md that no lesson, exercise or learner's doc holds."""


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("site")
    report = site.build(out=root / "html", src=root / "src", release_dir=root / "release")
    return root / "html", report


def _text(page: Path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", page.read_text()))


def test_every_lesson_exercise_and_doc_is_a_page(built):
    out, report = built
    for lesson in LESSONS:
        assert (out / "notebooks" / f"{lesson.stem}.html").is_file(), lesson.name
    for exercise in (REPO / "exercises").glob("*.ipynb"):
        assert (out / "exercises" / f"{exercise.stem}.html").is_file(), exercise.name
    for doc in (REPO / "docs").rglob("*.md"):
        rel = doc.relative_to(REPO)
        if rel.parts[:2] not in (("docs", "site"), ("docs", "instructor")):
            assert (out / rel.with_suffix(".html")).is_file(), rel
    index = (out / "index.html").read_text()
    for lesson in LESSONS:
        assert f'href="notebooks/{lesson.stem}.html"' in index
    assert report.pages >= len(LESSONS) + 2 and report.links_checked > 100


def _plain(text: str) -> str:
    return " ".join(text.replace("\u2019", "'").replace("\u2018", "'").split())


def test_nothing_from_the_instructor_kit_is_published(built):
    out, _ = built
    assert KIT_LINE in (KIT / "lessons.md").read_text(), "KIT_LINE left docs/instructor/lessons.md: pick another"
    learner = " ".join(_plain(p.read_text()) for p in [REPO / "README.md", *(REPO / "docs").glob("*.md"),
                                                        *(REPO / "notebooks").glob("*.ipynb"),
                                                        *(REPO / "exercises").glob("*.ipynb")])
    needle = _plain(KIT_LINE.replace("*", ""))
    assert needle not in _plain(learner.replace("*", "")), "KIT_LINE is not distinctive: a learner's file holds it"
    kit_names = {p.name for p in KIT.rglob("*") if p.is_file()} - {"README.md"}
    kit_names |= {Path(n).with_suffix(".html").name for n in kit_names}
    for folder in (out, out.parent / "src", out.parent / "release"):
        published = [p.relative_to(folder) for p in folder.rglob("*")]
        assert not [p for p in published if "instructor" in p.parts or p.name in kit_names], folder
    for page in out.rglob("*.html"):
        body = page.read_text()
        assert needle not in _plain(_text(page)), f"{page.relative_to(out)} shows docs/instructor/lessons.md"
        refs = re.findall(r'(?:href|src)="([^"]*)"', body)
        assert not [r for r in refs if "instructor/" in r], f"{page.relative_to(out)} links into the kit"
        assert 'caption-text">For instructors<' not in body, page


def test_each_lesson_carries_its_recorded_on_line(built):
    out, _ = built
    prov = json.loads((REPO / "data" / "gpu_reference.json").read_text())["provenance"]
    for lesson in LESSONS:
        page = (out / "notebooks" / f"{lesson.stem}.html").read_text()
        found = re.search(r'<p class="recorded-on">(.*?)</p>', page, flags=re.S)
        assert found, f"{lesson.name}: no recorded-on line"
        line = html.unescape(re.sub(r"<[^>]+>", "", found.group(1)))
        assert prov["gpu_name"] in line and prov["torch"] in line and prov["date_utc"][:10] in line, line


def test_the_recorded_on_line_says_where_the_outputs_ran():
    prov = {"gpu_name": "NVIDIA H200", "torch": "2.11.0+cu130", "date_utc": "2026-11-30T04:42:46Z"}
    on_gpu = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(outputs=[nbformat.v4.new_output(
        "stream", name="stdout", text="A CUDA GPU is here (NVIDIA H100 80GB HBM3): measuring live.\n")])])
    on_cpu = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(outputs=[nbformat.v4.new_output(
        "stream", name="stdout", text="No CUDA GPU here: this cell shows results recorded on a GPU\n")])])
    assert "run on NVIDIA H100 80GB HBM3" in site.recorded_on(on_gpu, prov)
    assert "without a CUDA GPU" in site.recorded_on(on_cpu, prov)
    assert "NVIDIA H200, torch 2.11.0+cu130, 2026-11-30" in site.recorded_on(on_cpu, prov)
    assert "is missing" in site.recorded_on(on_cpu, {})


def test_stored_outputs_and_folded_answers_are_shown(built):
    out, _ = built
    page = (out / "notebooks" / "05_decode_loop.html").read_text()
    assert page.count("<img") >= 1 and "<details" in page
    lesson = nbformat.read(REPO / "notebooks" / "05_decode_loop.ipynb", as_version=4)
    printed = [line.strip() for c in lesson.cells if c.cell_type == "code" for o in c.outputs
               if o.output_type == "stream" for line in o.text.splitlines() if len(line.strip()) > 20]
    text = _text(out / "notebooks" / "05_decode_loop.html")
    assert printed and all(" ".join(line.split()) in " ".join(text.split()) for line in printed[:10])
    assert "NBVAL_" not in text


def test_every_figure_has_a_text_alternative(built):
    out, report = built
    assert report.images_without_alt == []
    for lesson in LESSONS:
        page = (out / "notebooks" / f"{lesson.stem}.html").read_text()
        for img in re.findall(r"<img[^>]*>", page):
            alt = re.search(r'alt="([^"]*)"', img)
            assert alt and len(alt.group(1).strip()) > 10, f"{lesson.name}: {img[:120]}"


def test_widgets_are_unfolded_into_their_saved_outputs(built):
    out, _ = built
    for lesson in LESSONS:
        nb = nbformat.read(lesson, as_version=4)
        views = sum(site.WIDGET_VIEW in o.get("data", {}) for c in nb.cells if c.cell_type == "code"
                    for o in c.outputs)
        if not views:
            continue
        page = (out / "notebooks" / f"{lesson.stem}.html").read_text()
        assert page.count('class="widget-snapshot"') == views, lesson.name
        if lesson.stem.startswith(("02", "04")):  # the explorers: their controls are named under the snapshot
            assert "batch size = " in _text(out / "notebooks" / f"{lesson.stem}.html")


def test_exercises_are_shown_without_the_model_answers(built):
    out, _ = built
    text = " ".join(_text(p) for p in (out / "exercises").glob("*.html"))
    assert "BEGIN SOLUTION" not in text and "END SOLUTION" not in text
    squeezed = " ".join(text.split())
    # lines the learner's own copy already shows (an exercise's text may name the call it teaches)
    given = " ".join(" ".join(c.source.split()) for ex in (REPO / "exercises").glob("*.ipynb")
                     for c in nbformat.read(ex, as_version=4).cells)
    leaked = []
    for solution in (REPO / "solutions").glob("*.ipynb"):
        for cell in nbformat.read(solution, as_version=4).cells:
            inside = False
            for line in cell.source.splitlines():
                if "### BEGIN SOLUTION" in line:
                    inside = True
                elif "### END SOLUTION" in line:
                    inside = False
                elif inside and len(line.strip()) > 25 and not line.strip().startswith("#"):
                    if " ".join(line.split()) in squeezed and " ".join(line.split()) not in given:
                        leaked.append(line.strip())
    assert not leaked, f"model answers on the site: {leaked[:5]}"


def test_the_link_check_finds_a_broken_link_and_a_remote_script(built, tmp_path):
    out, report = built
    assert report.problems == []
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    page = copy / "notebooks" / "05_decode_loop.html"
    page.write_text(page.read_text().replace(
        "</body>", '<a href="06_nowhere.html">x</a><a href="01_the_big_idea.html#no-such-section">y</a>'
                   '<script src="https://cdn.example.org/x.js"></script></body>'))
    problems = "\n".join(site.check_site(copy).problems)
    assert "06_nowhere.html" in problems and "#no-such-section" in problems and "another host" in problems


@pytest.mark.browser
def test_lesson_05_renders_in_chromium(built):
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} not found (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    out, _ = built
    page_path = out / "notebooks" / "05_decode_loop.html"
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            remote = []
            page.on("request", lambda r: remote.append(r.url) if not r.url.startswith(("file:", "data:")) else None)
            page.goto(page_path.as_uri(), wait_until="load", timeout=60_000)
            recorded = page.locator("p.recorded-on")
            assert recorded.count() == 1 and recorded.first.is_visible()
            assert "Recorded on:" in recorded.first.inner_text()
            sizes = page.eval_on_selector_all(
                "img", "els => els.filter(e => e.closest('.cell_output')).map(e => [e.naturalWidth, e.alt])")
            assert sizes and all(w > 100 and len(alt) > 10 for w, alt in sizes), sizes
            assert page.locator("nav, .bd-sidebar").count() > 0
            figure = page.locator(".cell_output img").first
            figure.scroll_into_view_if_needed()
            page.evaluate("window.scrollBy(0, -120)")
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOTS / "site-05_decode_loop.png"))
            page.goto(page_path.as_uri(), wait_until="load")
            page.screenshot(path=str(SCREENSHOTS / "site-05_decode_loop-top.png"))
            assert remote == [], f"the page loaded from the network: {remote[:5]}"
        finally:
            browser.close()


def test_web_ready_keeps_pages_and_names_repository_files():
    text = ("[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.example/x) "
            "[the Makefile](../../Makefile) [lesson 01](../../notebooks/01_the_big_idea.ipynb) "
            "[missing](../../nowhere.md) [a section](#check-yourself)")
    out = site.web_ready(text, "docs/guides/guide.md")
    assert "[Open In Colab](https://colab.example/x)" in out and "colab-badge.svg" not in out
    assert "the Makefile (`Makefile` in the course's files)" in out
    assert "[lesson 01](../../notebooks/01_the_big_idea.ipynb)" in out
    assert "[missing](../../nowhere.md)" in out and "[a section](#check-yourself)" in out


def test_web_ready_sends_links_to_the_readme_to_the_home_page():
    out = site.web_ready("[README](../../README.md#graded-exercises) and [home](README.md)", "docs/guides/x.md")
    assert "[README](../../index.md#graded-exercises)" in out
    assert site.web_ready("[home](README.md)", "README.md") == "[home](index.md)"


def test_web_ready_turns_an_explicit_anchor_into_a_myst_target():
    text = 'text\n<a id="your-own-copy"></a>\n\n## Your own copy\n[below](#your-own-copy) <a id="inline"></a>'
    out = site.web_ready(text, "README.md")
    assert "\n(your-own-copy)=\n\n## Your own copy\n" in out
    assert '<a id="inline"></a>' in out, "only a line holding the anchor alone becomes a target"


def test_web_ready_unlinks_what_only_the_authored_course_has(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "grading.md").write_text("# Grading\n")
    text = "[the kit](docs/instructor/README.md), [grading](docs/grading.md), [missing](docs/nowhere.md)"
    out = site.web_ready(text, "README.md", tmp_path)
    assert out.startswith("the kit, [grading](docs/grading.md)") and "[missing](docs/nowhere.md)" in out
