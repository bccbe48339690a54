"""The JupyterLite build (`make lite`): toy lessons and exercises in the browser's Python (Pyodide), built from
the registries; a toy lesson run top to bottom and a toy exercise answered and checked in headless Chromium."""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import nbformat
import pytest

pytest.importorskip("jupyterlite_core", reason="jupyterlite-core is not installed: pip install -e '.[lite]'")
pytest.importorskip("jupyterlite_pyodide_kernel", reason="jupyterlite-pyodide-kernel is not installed")

from graphcourse.authoring import lite  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
# the docs' screenshots are refreshed only when asked (COURSE_UPDATE_SCREENSHOTS=1, as in test_browser): a test
# run never rewrites tracked files; otherwise they go to a temporary folder (taking them still has to work)
SCREENSHOTS = (REPO / "docs" / "screenshots" if os.environ.get("COURSE_UPDATE_SCREENSHOTS", "") not in ("", "0")
               else Path(tempfile.mkdtemp(prefix="lite-shots-")))
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]
KERNEL_START_S = 240     # Pyodide compiles its WebAssembly and loads IPython: generous for a busy 2-core machine
RUN_S = 300


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    if not shutil.which("npm") and not any(lite.CACHE.glob("pyodide-*.tgz")):
        pytest.skip("npm is not installed: the Pyodide runtime comes from the npm package pyodide")
    root = tmp_path_factory.mktemp("lite")
    return lite.build(out=root / "site", work=root / "work")


def test_toy_lessons_and_exercises_go_in_and_gpu_ones_stay_out(built):
    assert "01_the_big_idea.ipynb" in built.notebooks
    for name in built.notebooks:
        nb = nbformat.read(built.out / "files" / name, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert lite.cell_kind(cell.source) == "runs", f"{name}: {cell.source[:80]}"
                assert "torch" not in lite._imports(cell.source)
    left = " ".join(built.left_out)
    assert "05_decode_loop.ipynb" in left and "03_real_cuda_graphs.ipynb" in left


def test_a_figure_cell_keeps_its_numbers_and_shows_its_stored_figure(built):
    nb = nbformat.read(built.out / "files" / "01_the_big_idea.ipynb", as_version=4)
    notes = [c for c in nb.cells if c.cell_type == "markdown" and "attachment:" in c.source]
    assert notes and all(c.get("attachments") for c in notes)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "compare_timelines" not in code and "eager = tg.simulate" in code


def test_split_figure_cell_sends_what_uses_a_figure_to_the_drawing():
    source = ("%matplotlib inline\nfrom graphcourse.lessons.plots import compare_timelines\n\n"
              "# the prices\ncost = 3\nfig = compare_timelines({}, 'x')\nfig.savefig('a.png')\nprint(cost)")
    runs, draws, tainted = lite.split_figure_cell(source, set())
    assert runs == "# the prices\ncost = 3\nprint(cost)"
    assert draws == ("%matplotlib inline\nfrom graphcourse.lessons.plots import compare_timelines\n"
                     "fig = compare_timelines({}, 'x')\nfig.savefig('a.png')")
    assert {"compare_timelines", "fig"} <= tainted


def test_a_call_into_a_shipped_module_that_needs_matplotlib_or_torch_is_shown_as_recorded():
    source = "x = 1\nfig = plot_paths(data)\nprint(x, graph_partition_flag())\nprint(x)"
    runs, draws, _ = lite.split_figure_cell(source, set(lite.CALLS_NEED))
    assert runs == "x = 1\nprint(x)"
    assert draws == "fig = plot_paths(data)\nprint(x, graph_partition_flag())"
    nb, why = lite.browser_copy(REPO / "notebooks" / "07_graphs_by_the_compiler.ipynb", set())
    if nb is not None:  # in the browser: no cell calls what cannot run there
        code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
        assert "plot_paths(" not in code and "graph_partition_flag()" not in code
    else:
        assert "need torch, matplotlib or a GPU" in why


def test_everything_the_browser_loads_is_in_the_site(built):
    pyodide = built.out / "static" / "pyodide"
    lock = json.loads((pyodide / "pyodide-lock.json").read_text())
    for name, entry in lock["packages"].items():
        wheel = pyodide / entry["file_name"]
        assert wheel.is_file(), f"{name}: {entry['file_name']} is named in the lock but not shipped"
        assert hashlib.sha256(wheel.read_bytes()).hexdigest() == entry["sha256"], name
    assert {"micropip", "ipython", "jedi", "comm", "toygraph", "graphcourse"} <= set(lock["packages"])
    assert "matplotlib" not in lock["packages"] and "numpy" not in lock["packages"]
    config = json.loads((built.out / "jupyter-lite.json").read_text())["jupyter-config-data"]
    kernel = config["litePluginSettings"][lite.KERNEL_PLUGIN]
    assert kernel["pyodideUrl"] == "./static/pyodide/pyodide.mjs" and kernel["disablePyPIFallback"] is True
    assert built.origin["npm"] == [f"pyodide@{lite.pyodide_version()}"]


def test_the_graphcourse_wheel_holds_only_what_imports_in_the_browser(built):
    import zipfile

    wheel = next((built.out / "static" / "pyodide").glob("graphcourse-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "graphcourse/lessons/teaching.py" in names and "data/gpu_reference.json" in names
    assert "graphcourse/lessons/decode_paths.py" in names and "data/decode_paths.json" in names  # what lessons 07, 08 read
    assert not any(n in names for n in ("graphcourse/gpulib/graphs.py", "graphcourse/lessons/plots.py", "graphcourse/lessons/widgets.py"))


# --------------------------------------------------------------------------- in Chromium


@pytest.fixture(scope="module")
def server(built):
    handler = functools.partial(lite._Handler, directory=str(built.out))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture()
def page(server):
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} not found (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS)
        try:
            pg = browser.new_page(viewport={"width": 1280, "height": 900})
            pg.elsewhere = []
            pg.on("request", lambda r: pg.elsewhere.append(r.url)
                  if r.url.startswith(("http:", "https:", "ws:")) and not r.url.startswith(
                      (server, server.replace("http:", "ws:"))) else None)
            yield pg
        finally:
            browser.close()


def _open(page, server: str, name: str) -> None:
    page.goto(f"{server}/lab/index.html?path={name}", timeout=120_000)
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=120_000)
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=KERNEL_START_S * 1000)


def _run_all(page) -> None:
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_role("menuitem", name=re.compile("^Run All Cells")).click()


def _wait_until_done(page, deadline_s: float) -> None:
    """Wait until no cell is queued or running ([*]) for three polls in a row. (After an error stops Run All,
    JupyterLite's execution indicator may stay 'busy', so the prompts are what tells.)"""
    end = time.monotonic() + deadline_s
    quiet = 0
    while time.monotonic() < end:
        busy = page.eval_on_selector_all(".jp-CodeCell .jp-InputArea-prompt",
                                         "els => els.filter(e => e.textContent.includes('*')).length")
        quiet = 0 if busy else quiet + 1
        if quiet >= 3:
            return
        time.sleep(1)
    raise AssertionError("the notebook was still running after the time limit")


def _errors(page) -> list[str]:
    return page.eval_on_selector_all(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']",
                                     "els => els.map(e => e.textContent.slice(0, 400))")


@pytest.mark.browser
def test_a_toy_lesson_runs_top_to_bottom_in_the_browser(page, server, built):
    _open(page, server, "01_the_big_idea.ipynb")
    _run_all(page)
    time.sleep(1)
    _wait_until_done(page, RUN_S)
    prompts = page.eval_on_selector_all(".jp-CodeCell .jp-InputArea-prompt", "els => els.map(e => e.textContent)")
    nb = nbformat.read(built.out / "files" / "01_the_big_idea.ipynb", as_version=4)
    assert len(prompts) == sum(c.cell_type == "code" for c in nb.cells)
    assert all(re.search(r"\[\d+\]", p) for p in prompts), (prompts, _errors(page)[:1])
    assert _errors(page) == []
    text = " ".join(page.eval_on_selector_all(".jp-OutputArea-output", "els => els.map(e => e.textContent)"))
    assert "ShapeMismatchError: captured for batch size" in text  # the toy's errors, shown by expect_error
    assert len(text) > 1000  # every cell's output is there, not only the first few
    figures = page.eval_on_selector_all(".jp-MarkdownOutput img", "els => els.map(e => [e.naturalWidth, e.alt])")
    assert figures and all(w > 100 and len(alt) > 10 for w, alt in figures)
    assert page.elsewhere == [], f"the page reached beyond the local server: {page.elsewhere[:5]}"
    page.locator(".jp-MarkdownOutput img").first.scroll_into_view_if_needed()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "lite-01_the_big_idea.png"))


def _answer(solution: Path, exercise: str) -> str:
    for cell in nbformat.read(solution, as_version=4).cells:
        if f"{exercise}:answer" in cell.metadata.get("tags", []):  # typed as a learner would: no markers
            return "\n".join(line for line in cell.source.splitlines() if "SOLUTION" not in line)
    raise AssertionError(f"no answer cell for {exercise} in {solution}")


def _fill_answer(page, exercise_index: int, code: str) -> None:
    editor = page.locator(".jp-CodeCell").nth(exercise_index).locator(".cm-content")
    editor.click()
    page.keyboard.press("Control+A")
    page.keyboard.press("Delete")
    page.keyboard.insert_text(code)


@pytest.mark.browser
def test_a_toy_exercise_is_answered_and_checked_in_the_browser(page, server, built):
    name = "06_exercises.ipynb"
    if name not in built.notebooks:
        pytest.skip("no graded exercise runs in the browser")
    nb = nbformat.read(built.out / "files" / name, as_version=4)
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    exercise = "ex01_bucket_picker"
    answer_at = next(i for i, c in enumerate(code_cells) if f"{exercise}:answer" in c.metadata.get("tags", []))
    checks = [i for i, c in enumerate(code_cells) if f"{exercise}:check" in c.metadata.get("tags", [])]
    assert checks
    _open(page, server, name)

    asserting = any("assert" in code_cells[i].source for i in checks)
    if asserting:  # a wrong answer first: the check cells say what is wrong
        _fill_answer(page, answer_at, "def pick_bucket(batch_size, buckets):\n    return buckets[0]\n\n\n"
                                      "def pad_batch(batch, size, pad_value=0):\n    return batch\n")
        _run_all(page)
        time.sleep(1)
        _wait_until_done(page, RUN_S)
        first_error = _errors(page)[0]
        assert "AssertionError" in first_error and "pick_bucket(17" in first_error, first_error

    _fill_answer(page, answer_at, _answer(REPO / "solutions" / name, exercise))
    _run_all(page)
    time.sleep(1)
    _wait_until_done(page, RUN_S)
    prompts = page.eval_on_selector_all(".jp-CodeCell .jp-InputArea-prompt", "els => els.map(e => e.textContent)")
    for i in [answer_at, *checks]:
        assert re.search(r"\[\d+\]", prompts[i]), f"cell {i} did not run: {prompts}"
    outputs = page.locator(".jp-CodeCell")
    for i in checks:
        errs = outputs.nth(i).locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
        assert errs.count() == 0, errs.first.text_content()
    # Run All stops at the next exercise's unanswered cell: its NotImplementedError is the first error left
    remaining = _errors(page)
    assert remaining and "NotImplementedError" in remaining[0], remaining[:1]
    assert page.elsewhere == [], f"the page reached beyond the local server: {page.elsewhere[:5]}"
    outputs.nth(answer_at).locator(".jp-InputArea-prompt").click()  # the answer and its checks in view
    page.keyboard.press("Escape")
    time.sleep(1)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "lite-06_exercises-ex01.png"))


def test_toy_modules_import_without_torch():
    """What the toy lessons import on a laptop never pulls in torch (seconds to import, and absent in a browser)."""
    import subprocess
    import sys

    code = ("import sys, toygraph, graphcourse, graphcourse.lessons.teaching, graphcourse.lessons.plots, graphcourse.lessons.widgets, "
            "graphcourse.lessons.reference, graphcourse.lessons.palette\n"
            "assert 'torch' not in sys.modules, sorted(m for m in sys.modules if m.startswith('torch'))[:5]")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                          env={**__import__("os").environ, "PYTHONPATH": str(REPO), "MPLBACKEND": "Agg"})
    assert done.returncode == 0, done.stderr[-800:]


def _run_in_pyodide(built, cells: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    """Run code cells, in order, in the site's own Pyodide under node (magic lines become `pass`)."""
    (tmp_path / "cells.json").write_text(json.dumps([lite._python(c) for c in cells]))
    pyodide = (built.out / "static" / "pyodide").resolve()
    script = tmp_path / "run.mjs"
    script.write_text(
        f'import {{ loadPyodide }} from "{(pyodide / "pyodide.mjs").as_uri()}";\n'
        'import fs from "fs";\n'
        f'const cells = JSON.parse(fs.readFileSync({json.dumps(str(tmp_path / "cells.json"))}));\n'
        f'const py = await loadPyodide({{indexURL: {json.dumps(str(pyodide) + "/")}}});\n'
        'await py.loadPackage(["toygraph", "graphcourse"]);\n'
        'for (const [i, c] of cells.entries()) {\n'
        '  try { await py.runPythonAsync(c); }\n'
        '  catch (e) { console.log(`CELL ${i} FAILED: ${String(e).slice(-800)}`); process.exit(1); }\n'
        '}\n'
        'console.log(`ALL ${cells.length} CELLS RAN`);\n')
    return subprocess.run(["node", str(script)], capture_output=True, text=True, timeout=600)


@pytest.fixture()
def node():
    if not shutil.which("node"):
        pytest.skip("node is not installed: it runs the site's Pyodide outside a browser")


def test_every_toy_exercise_checks_out_in_pyodide_with_the_model_answers(built, node, tmp_path):
    """The browser's own Python (the site's Pyodide, run by node): each exercise kept for the browser, with the
    model answers from solutions/, runs its check cells without an error; so a learner's right answer passes."""
    solution, kept, _ = lite.exercises_for_browser(REPO / "solutions" / "06_exercises.ipynb")
    if solution is None:
        pytest.skip("no graded exercise runs in the browser")
    cells = [c.source for c in solution.cells if c.cell_type == "code"]
    done = _run_in_pyodide(built, cells, tmp_path)
    assert done.returncode == 0 and f"ALL {len(cells)} CELLS RAN" in done.stdout, (done.stdout + done.stderr)[-1500:]
    assert kept and "ex01_bucket_picker" in kept


def test_every_lesson_in_the_browser_runs_top_to_bottom_in_pyodide(built, node, tmp_path):
    for name in built.notebooks:
        nb = nbformat.read(built.out / "files" / name, as_version=4)
        if nb.metadata.get("graphcourse", {}).get("exercises"):
            continue  # the exercises: their answer cells raise NotImplementedError until answered
        cells = [c.source for c in nb.cells if c.cell_type == "code"]
        done = _run_in_pyodide(built, cells, tmp_path)
        assert done.returncode == 0 and f"ALL {len(cells)} CELLS RAN" in done.stdout, (
            name, (done.stdout + done.stderr)[-1500:])


COLAB_SETUP = '''# On Google Colab only (anywhere else this cell does nothing): fetch the course, install it.
import sys

if "google.colab" in sys.modules:
    import os
    import subprocess

    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "-e", "course"], check=True)
    !echo shell lines parse too
    from google.colab import output

    output.enable_custom_widget_manager()'''


def test_a_lesson_with_its_colab_cells_still_goes_to_the_browser(tmp_path):
    nb = nbformat.read(REPO / "notebooks" / "01_the_big_idea.ipynb", as_version=4)
    nb.cells.insert(1, nbformat.v4.new_markdown_cell("[Open in Colab](https://colab.example/01) for a free GPU"))
    nb.cells.insert(2, nbformat.v4.new_code_cell(COLAB_SETUP, metadata={"tags": ["colab-setup"]}))
    nb.cells.insert(3, nbformat.v4.new_code_cell(COLAB_SETUP.replace("fetch", "get")))  # untagged: found by shape
    path = tmp_path / "01_the_big_idea.ipynb"
    nbformat.write(nb, path)
    browser = lite.lesson_for_browser(path, set())
    assert browser is not None
    assert not any("google.colab" in c.source for c in browser.cells if c.cell_type == "code")
    assert any("Open in Colab" in c.source for c in browser.cells if c.cell_type == "markdown")
    assert lite.cell_kind("if x:\n    !pip install y\n    %time 1\nimport toygraph") == "runs"


def test_an_import_the_browser_lacks_becomes_a_stand_in_that_says_so():
    code = lite._stand_in("from graphcourse.authoring.selfcheck import check")
    namespace: dict = {}
    exec(code, namespace)
    with pytest.raises(NotImplementedError, match=r"graphcourse.authoring.selfcheck.*make lab"):
        namespace["check"]("ex01")
    assert all(len(line) <= 100 for line in code.splitlines())
