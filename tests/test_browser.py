"""The course as a learner meets it: JupyterLab and its sliders in a real browser.

Marker ``browser``. Each test starts JupyterLab from this Python (the course's virtual
environment) on 127.0.0.1 with a free port, a token and temporary Jupyter directories,
opens a temporary COPY of a lesson (outputs cleared; the committed notebook is never
touched and nothing is written into notebooks/) in headless Debian Chromium through
Playwright, and then, like a learner:

1. waits for the kernel to be idle (answering the kernel dialog / news pop-up if shown);
2. runs Run > Run All Cells from the menu bar, and waits until every cell ran;
3. fails on anything a learner would see broken: an error in a cell (a traceback; a
   warning on stderr is allowed), a widget stuck at "Loading widget...", "Error displaying
   widget", a widget shown as plain text because the widget extension is missing;
4. finds the batch-size slider, focuses its handle (role="slider"), presses arrow keys,
   and checks that the slider's Output widget shows a different text AND a different plot
   image; screenshots the slider's output area before and after.

Contract with the lessons (notebooks/02_launch_tax.ipynb, notebooks/04_buckets_and_padding.ipynb):
the batch-size slider is an ipywidgets slider given the CSS class ``batch-size-slider``
(``slider.add_class("batch-size-slider")``, see graphcourse.lessons.widgets.BATCH_SLIDER_CLASS), and
moving it redraws a text and a matplotlib figure (PNG) in an ``ipywidgets.Output`` shown in
the same cell (or elsewhere in the notebook).

Skipped, with one reason, where /usr/bin/chromium is missing (``apt-get install chromium``;
``.ci/run`` installs it). A lesson that does not exist yet is skipped by name. A scratch
notebook that honours the same contract keeps the machinery itself tested.

Run:  .venv/bin/python -m pytest -m browser tests/test_browser.py -v
README screenshots:  COURSE_UPDATE_SCREENSHOTS=1 .venv/bin/python -m pytest -m browser tests/test_browser.py
(or  .venv/bin/python tests/browser_support.py notebooks/02_launch_tax.ipynb ...), which
write docs/screenshots/<lesson>-slider-before.png and -after.png.
Budget: about 10-20 s per notebook on a 2-core machine; each step has its own time limit
(see browser_support: SERVER_START_S, KERNEL_IDLE_S, RUN_ALL_S, SLIDER_UPDATE_S, ...).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

import browser_support as bs

pytestmark = pytest.mark.browser
REASON = bs.chromium_missing_reason()
if REASON:  # one skip for the whole module: one line in `pytest -rs` (or see conftest)
    pytest.skip(REASON, allow_module_level=True)

LESSONS = ["notebooks/02_launch_tax.ipynb", "notebooks/04_buckets_and_padding.ipynb"]
UPDATE_DOCS = os.environ.get("COURSE_UPDATE_SCREENSHOTS", "") not in ("", "0")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """One JupyterLab server for the module, stopped (with its kernels) whatever happens."""
    with bs.lab_server(tmp_path_factory.mktemp("lab")) as server:
        yield server


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium for the module, closed whatever happens. Each notebook gets a
    page of its own in one shared context (its HTTP cache makes JupyterLab load faster)."""
    with bs.chromium_browser() as b:
        yield bs.new_context(b)


def test_scratch_lesson_slider_redraws_text_and_plot(lab, browser, tmp_path):
    """The machinery on a notebook that honours the slider contract (exists before the lessons)."""
    notebook = bs.write_notebook(tmp_path / "scratch_lesson.ipynb", bs.SCRATCH_CELLS)
    report = bs.check_lesson(browser, lab, notebook, tmp_path / "shots")
    before, after = report["value"]
    assert float(after) != float(before)
    assert report["text"][0] != report["text"][1]
    assert report["images"][0] != report["images"][1]
    assert report["warnings"] >= 1, "the scratch warning should be shown and tolerated"
    for png in report["screenshots"]:
        assert png.stat().st_size > 1000 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_checks_catch_what_a_learner_would_see_broken(lab, browser, tmp_path):
    """An error in a cell and a widget that cannot render are reported; a warning is not."""
    notebook = bs.write_notebook(tmp_path / "broken.ipynb", [
        ("code", "import warnings\nwarnings.warn('only a warning')"),
        ("code", "from IPython.display import display\n"
                 "display({'application/vnd.jupyter.widget-view+json':\n"
                 "         {'model_id': 'no-such-model', 'version_major': 2, 'version_minor': 0}},\n"
                 "        raw=True)"),
        ("code", "1 / 0"),
        ("code", "print('never reached')"),
    ])
    rel = lab.add_notebook(notebook)
    with bs.open_notebook(browser, lab, rel) as nb:
        nb.wait_kernel_idle()
        state = nb.run_all(limit_s=60)
        problems = nb.wait_widgets(limit_s=3)
    model_errors = [e for c in state["cells"] for e in c["errors"]]
    assert any("ZeroDivisionError" in e for e in model_errors), state
    assert any("ZeroDivisionError" in e for e in problems["errors"]), problems
    assert not any("only a warning" in e for e in problems["errors"]), problems
    assert any("only a warning" in w for w in problems["warnings"]), problems
    assert problems["loading"] or any("model not found" in e for e in problems["errors"]), problems
    assert state["cells"][-1]["count"] is None  # Run All stopped at the error


@pytest.mark.parametrize("lesson", LESSONS, ids=[Path(p).stem for p in LESSONS])
def test_lesson_slider_redraws_in_browser(lab, browser, lesson, tmp_path):
    notebook = bs.REPO / lesson
    if not notebook.exists():
        pytest.skip(f"{lesson} does not exist yet")
    shots = bs.SCREENSHOT_DIR if UPDATE_DOCS else tmp_path / "shots"
    report = bs.check_lesson(browser, lab, notebook, shots)
    assert report["text"][0] != report["text"][1]
    assert report["images"][0] != report["images"][1]


# --------------------------------------------------------------------------------------
# The new learner of issue 11's "Done when": README -> make lab -> every lesson -> the
# exercises -> an answer in their own copy -> self-check -> grade.
# --------------------------------------------------------------------------------------

ANSWER_EX01 = '''def pick_bucket(batch_size, buckets):
    fits = [b for b in buckets if b >= batch_size]
    return min(fits) if fits else None


def pad_batch(batch, size, pad_value=0):
    if len(batch) > size:
        raise ValueError(f"a batch of {len(batch)} rows does not fit in {size}")
    return list(batch) + [pad_value] * (size - len(batch))
'''

_JS_CURRENT = """() => {
  const app = window.jupyterapp;
  const w = app && app.shell.currentWidget;
  return w && w.context ? w.context.path : null;
}"""

# The cells of the notebook open at `path`: id, type, role/exercise, count, errors, output text.
_JS_CELLS = """(path) => {
  const app = window.jupyterapp;
  for (const w of app.shell.widgets('main')) {
    if (!(w.context && w.context.path === path && w.content && w.content.model)) continue;
    const out = [];
    const cells = w.content.model.cells;
    for (let i = 0; i < cells.length; i++) {
      const c = cells.get(i);
      const meta = c.getMetadata ? (c.getMetadata('graphcourse') || {}) : {};
      const outs = c.type === 'code' ? c.outputs.toJSON() : [];
      out.push({index: i, type: c.type, exercise: meta.exercise || null, role: meta.role || null,
                count: c.type === 'code' ? c.executionCount : null,
                errors: outs.filter(o => o.output_type === 'error').map(o => o.ename + ': ' + o.evalue),
                text: outs.map(o => (o.text || '') + ((o.data && o.data['text/plain']) || '')).join('')});
    }
    return {dirty: w.context.model.dirty, cells: out,
            kernel: w.sessionContext.session && w.sessionContext.session.kernel
                    ? w.sessionContext.session.kernel.status : null};
  }
  return null;
}"""


@pytest.fixture(scope="module")
def course_lab(tmp_path_factory):
    """JupyterLab serving the course as `make lab` does (copies of it, in a temporary folder)."""
    with bs.lab_server(tmp_path_factory.mktemp("course"), layout="course") as server:
        yield server


def test_a_lesson_opens_unchanged_once_its_kernel_starts(course_lab, browser):
    """JupyterLab writes the kernel's language_info into the notebook as the kernel starts; a lesson stored with
    another Python opened marked unsaved, and autosave rewrote it as if the learner had changed it."""
    rel = "notebooks/01_the_big_idea.ipynb"
    with bs.open_notebook(browser, course_lab, rel) as nb:
        nb.wait_kernel_idle()
        dirty = nb.page.evaluate("""(p) => { for (const w of window.jupyterapp.shell.widgets('main'))
          if (w.context && w.context.path === p) return w.context.model.dirty; return null; }""", rel)
    assert dirty is False, "the lesson opened marked unsaved"


def test_new_learner_reaches_every_lesson_answers_self_checks_and_grades(course_lab, browser, tmp_path):
    import json
    import re
    import subprocess
    import sys
    import time

    lessons = sorted(p.name for p in (course_lab.root / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    t0, timings = time.monotonic(), {}

    def lap(what):
        timings[what] = round(time.monotonic() - t0, 1)

    page = browser.new_page()
    nb = bs.NotebookPage(page=page, path=f"notebooks/{lessons[0]}")
    try:
        # 1. `make lab` opens on lesson 00 (its default_url); the README's "start with 00" holds
        nb.open(course_lab.notebook_url(f"notebooks/{lessons[0]}"))

        def now_open(path, what):
            return nb._poll(what, bs.PAGE_LOAD_S,
                            lambda: (lambda cur: cur if cur == path else (False, cur))(page.evaluate(_JS_CURRENT)))

        def click_nav(text):
            panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
            link = panel.locator(".jp-Cell").first.locator(".jp-RenderedMarkdown a").filter(has_text=text)
            link.first.click()

        # 2. every lesson by its "next →" link, then the exercises from lesson 06
        seen = [nb.path]
        for name in lessons[1:]:
            click_nav("→")
            now_open(f"notebooks/{name}", f"the next-lesson link to {name}")
            seen.append(f"notebooks/{name}")
        # the last lesson's exercises link leads to the README's "your own copy" section (answers go in my-work/,
        # never in exercises/, which a course update rewrites)
        click_nav("exercises")
        now_open("README.md", "the graded-exercises link of the last lesson")
        assert len(seen) == len(lessons)
        # the Contents link of a lesson opens the README (the course index)
        # (the command resolves to the opened widget, which Playwright cannot serialize: return nothing)
        page.evaluate("async (p) => { await window.jupyterapp.commands.execute('docmanager:open', {path: p}); "
                      "return null; }", f"notebooks/{lessons[-1]}")
        now_open(f"notebooks/{lessons[-1]}", "back to the last lesson")
        click_nav("Contents")
        now_open("README.md", "the Contents link")
        # it opens rendered (make lab's default viewer for markdown), and its links lead on
        readme = page.locator(".jp-RenderedMarkdown").filter(has_text="Quick start").first
        readme.wait_for(timeout=bs.PAGE_LOAD_S * 1000)
        readme.locator("a").filter(has_text="The big idea").first.click()
        now_open(f"notebooks/{lessons[1]}", "the README's link to lesson 01")
        lap("every lesson, the exercises and the README by their links")
        course_lab.shutdown_kernels()

        # 3. the learner's own copy, from the file browser: my-work/06_exercises.ipynb
        page.locator(".jp-BreadCrumbs-home").first.click()
        page.locator(".jp-DirListing-item").filter(has_text=re.compile(r"^my-work")).first.dblclick()
        page.locator(".jp-DirListing-item").filter(has_text="06_exercises.ipynb").first.dblclick()
        mine = "my-work/06_exercises.ipynb"
        now_open(mine, "opening my own copy")
        nb.path = mine
        nb.wait_kernel_idle()

        # 4. answer ex01 in the answer cell, as typed text
        cells = page.evaluate(_JS_CELLS, mine)["cells"]
        answer = next(c for c in cells if c["exercise"] == "ex01_bucket_picker" and c["role"] == "answer")
        checks = [c for c in cells if c["exercise"] == "ex01_bucket_picker" and c["role"] == "check"]
        assert checks, "ex01 has check cells"
        panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
        editor = panel.locator(".jp-Cell").nth(answer["index"]).locator(".cm-content")
        editor.scroll_into_view_if_needed()
        editor.click()
        page.keyboard.press("Control+a")
        page.keyboard.insert_text(ANSWER_EX01)

        lap("my copy open, answer typed")
        # 5. self-check: Run All runs the answer and its checks, which pass
        nb.run_all()
        lap("run all")
        cells = page.evaluate(_JS_CELLS, mine)["cells"]
        for c in [cells[answer["index"]]] + [cells[c["index"]] for c in checks]:
            assert c["count"] is not None and not c["errors"], f"ex01 cell {c['index']}: {c['errors']}"
        # (where a check cell calls the next, unanswered stub, NotImplementedError stops Run All there)
        # the exercises' self-check (graphcourse.authoring.selfcheck.check), as the notebook tells a learner to run it
        page.keyboard.press("Escape")
        at = page.evaluate("""(p) => { const app = window.jupyterapp;
          for (const w of app.shell.widgets('main')) if (w.context && w.context.path === p) {
            const m = w.content.model; m.sharedModel.insertCell(m.cells.length, {cell_type: 'code',
              source: 'from graphcourse.authoring.selfcheck import check\\nresults = check("ex01")\\n'
                      + 'print("statuses:", sorted({s for s, _ in results.values()}))'});
            w.content.activeCellIndex = m.cells.length - 1; return m.cells.length - 1; }
          return null; }""", mine)
        assert at is not None, "the self-check cell was inserted"
        page.keyboard.press("Shift+Enter")  # runs it, and (as the last cell) adds an empty one below
        deadline = time.monotonic() + bs.RUN_ALL_S
        while time.monotonic() < deadline:
            last = page.evaluate(_JS_CELLS, mine)["cells"][at]
            if last["count"] is not None and ("statuses:" in last["text"] or last["errors"]):
                break
            time.sleep(0.5)
        assert not last["errors"] and "statuses: ['passed']" in last["text"], last
        assert "ex01_bucket_picker" in last["text"] and "FAIL" not in last["text"], last
        got = re.search(r"visible checks matching the model answer: (\d+) of (\d+) points", last["text"])
        assert got and got.group(1) == got.group(2) and int(got.group(1)) > 0, last["text"]
        lap("self-check")

        # 6. save (Ctrl-S), then grade the saved copy with the course's grader
        page.keyboard.press("Escape")
        page.keyboard.press("Control+s")
        nb._poll("saving", 30, lambda: not page.evaluate(_JS_CELLS, mine)["dirty"])
        saved = (course_lab.root / mine).read_text()
        assert "fits = [b for b in buckets if b >= batch_size]" in saved
        report_path = tmp_path / "my_grades.json"
        result = subprocess.run([sys.executable, "-m", "graphcourse.grading", str(course_lab.root / mine),
                                 "--report", str(report_path), "--quiet"],
                                cwd=bs.REPO, capture_output=True, text=True, timeout=900)
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
        lap("saved and graded")
        print(f"new learner's journey, seconds since start: {timings}")
        report = json.loads(report_path.read_text())
        # the grader's report: {"format": "graphcourse-grades/2", "run": {...}, "learners": {name: {total, max,
        # open, status, exercises: {id: {points, max, open, status, message, checks}}}}} (docs/grading.md)
        assert report["format"] == "graphcourse-grades/2", report.get("format")
        assert report["run"]["status"] == "complete", report["run"]
        assert len(report["learners"]) == 1, list(report["learners"])
        (me,) = report["learners"].values()
        marks = me["exercises"]
        assert set(report["run"]["exercises"]) <= set(marks), (report["run"]["exercises"], list(marks))
        # one notebook handed in of the course's several: graded; the others "not handed in", costing it nothing
        books = me["notebooks"]
        assert books["06_exercises.ipynb"]["status"] == "graded", books
        assert all(b["status"] == "not-handed-in" and b["points"] == 0 for n, b in books.items()
                   if n != "06_exercises.ipynb"), books
        ex01 = marks["ex01_bucket_picker"]
        assert ex01["status"] == "passed" and ex01["points"] == ex01["max"] > 0, ex01
        ex02 = marks["ex02_keep_outputs"]
        assert ex02["points"] == 0 and ex02["status"] != "passed", "an unanswered exercise earns nothing"
        assert me["total"] == sum(m["points"] for m in marks.values()) >= ex01["points"], me
        assert (bs.REPO / "exercises" / "06_exercises.ipynb").read_text() != saved, "the course's copy untouched"
    except Exception:
        with contextlib.suppress(Exception):
            page.screenshot(path=str(tmp_path / "learner-failure.png"), full_page=True)
        raise
    finally:
        with contextlib.suppress(Exception):
            page.close()
        course_lab.shutdown_kernels()
