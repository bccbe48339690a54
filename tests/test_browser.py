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
(``slider.add_class("batch-size-slider")``, see graphcourse.widgets.BATCH_SLIDER_CLASS), and
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
