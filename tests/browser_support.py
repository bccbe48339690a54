"""Drive JupyterLab in headless Chromium: the machinery behind tests/test_browser.py.

Everything here is isolated from the user's own Jupyter setup: the server runs from this
Python (the course's virtual environment), on 127.0.0.1, a free port and a random token,
with temporary config/data/runtime/settings/workspace directories, on a temporary COPY of
the notebook (laid out as <tmp>/notebooks/<name>.ipynb next to links to the repository's
top-level folders, so that relative paths such as ``../data`` and imports of the course's
packages behave as they do for a learner). Nothing is written into notebooks/.

Contract with the lessons: the batch-size slider is an ipywidgets slider given the CSS
class ``batch-size-slider`` (``slider.add_class("batch-size-slider")``); moving it redraws
text and a matplotlib figure in an ``ipywidgets.Output`` (directly, or via ``interactive``).

Run as a script to refresh the README screenshots::

    .venv/bin/python tests/browser_support.py notebooks/02_launch_tax.ipynb ...

which writes docs/screenshots/<lesson>-slider-before.png and -after.png.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SLIDER_CLASS = "batch-size-slider"
SCREENSHOT_DIR = REPO / "docs" / "screenshots"

# Per-step time limits, in seconds: generous for a 2-core CI machine, but bounded.
SERVER_START_S = 60
PAGE_LOAD_S = 60
KERNEL_IDLE_S = 60
RUN_ALL_S = 180
WIDGETS_S = 30
SLIDER_UPDATE_S = 30

# JupyterLab user settings for the test server: no news/update pop-ups, and every cell
# kept in the DOM (no windowing) so that the checks see the whole notebook.
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {
        "windowingMode": "none",
    },
}


def chromium_missing_reason() -> str | None:
    """A one-line skip reason when the browser tests cannot run here, else None."""
    if not CHROMIUM.exists():
        return f"{CHROMIUM} not found (apt-get install chromium); browser tests skipped"
    try:
        import playwright  # noqa: F401
    except ImportError:
        return "playwright (Python) is not installed; browser tests skipped"
    return None


def pytest_terminal_summary(terminalreporter, exitstatus=None, config=None):
    """One line at the end of a pytest run when the browser tests were skipped.

    A pytest hook: active once tests/conftest.py imports it
    (``from browser_support import pytest_terminal_summary``). Silent under ``-rs``,
    which already prints the reason.
    """
    if "s" in (terminalreporter.config.option.reportchars or "") \
            or "a" in (terminalreporter.config.option.reportchars or ""):
        return
    for report in terminalreporter.stats.get("skipped", []):
        if "test_browser.py" in str(getattr(report, "nodeid", "")) + str(report.location[0]):
            longrepr = report.longrepr
            reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
            if "browser tests skipped" in reason:
                terminalreporter.write_line(reason.removeprefix("Skipped: "))
                return


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------------------
# The JupyterLab server
# --------------------------------------------------------------------------------------


@dataclass
class LabServer:
    root: Path  # the server's root_dir (a temporary folder)
    port: int
    token: str
    proc: subprocess.Popen
    log_path: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        return f"{self.base_url}/{path.lstrip('/')}"

    def notebook_url(self, rel_path: str) -> str:
        # ?reset: start from an empty workspace, so no earlier notebook is reopened
        return self.url(f"lab/tree/{rel_path}?reset&token={self.token}")

    def api(self, path: str, method: str = "GET", timeout: float = 10):
        req = urllib.request.Request(
            self.url(f"api/{path}"),
            method=method,
            headers={"Authorization": f"token {self.token}"},
        )
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            body = resp.read()
        return json.loads(body) if body else None

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no server log)"

    def add_notebook(self, source: Path, name: str | None = None) -> str:
        """Copy a notebook into the server's notebooks/ folder; return its path for the URL.

        The copy gets a python3 kernelspec so JupyterLab never asks which kernel to use,
        and loses its stored outputs and widget state: the page shows only what this run
        produced, as for a learner opening a fresh clone.
        """
        nb = json.loads(Path(source).read_text())
        nb.get("metadata", {}).pop("widgets", None)
        for cell in nb.get("cells", []):
            if cell.get("cell_type") == "code":
                cell["outputs"], cell["execution_count"] = [], None
        nb.setdefault("metadata", {})["kernelspec"] = {
            "name": "python3",
            "display_name": "Python 3 (ipykernel)",
            "language": "python",
        }
        name = name or Path(source).name
        dest = self.root / "notebooks" / name
        dest.write_text(json.dumps(nb, indent=1))
        return f"notebooks/{name}"

    def shutdown_kernels(self) -> None:
        with contextlib.suppress(Exception):
            for session in self.api("sessions"):
                self.api(f"sessions/{session['id']}", method="DELETE")


def _descendants(pid: int) -> list[int]:
    """All live descendants of pid (read from /proc; empty where there is no /proc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
            ppid = int(text.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _kill_tree(proc: subprocess.Popen, grace: float = 10) -> None:
    """Stop the server's process group, then anything it started in other groups."""
    if proc.poll() is not None:
        return
    kids = _descendants(proc.pid)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)  # the server shuts its kernels down
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=grace)
    for pid in kids:  # kernels run in their own sessions: end any left behind
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _link_repo_folders(root: Path) -> None:
    """<root>/notebooks is the copies' home; link the repository's other top-level
    folders beside it so that ``../data`` or ``../toygraph`` resolve as in the repo."""
    (root / "notebooks").mkdir()
    for item in REPO.iterdir():
        if item.name.startswith(".") or item.name == "notebooks" or not item.is_dir():
            continue
        with contextlib.suppress(OSError):
            (root / item.name).symlink_to(item, target_is_directory=True)


def _course_layout(root: Path) -> None:
    """<root> laid out as `make lab` serves the course: the release's README.md, lessons and
    exercises as COPIES (a learner's clicks and saves never reach the repository), the packages
    and data as links, and the learner's own copy my-work/06_exercises.ipynb made by
    graphcourse.authoring.mycopy, as `make lab` makes it."""
    root.mkdir(parents=True, exist_ok=True)
    from graphcourse.authoring import release

    course = set(release.course_files(REPO))
    for rel in sorted(course):  # the release's README and lessons (dressed with navigation and slide marks)
        if rel == "README.md" or rel.startswith(("notebooks/", "exercises/")) and rel.endswith(".ipynb"):
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(release.released_bytes(REPO, rel, course))
    for folder in ("toygraph", "graphcourse", "data", "docs"):
        (root / folder).symlink_to(REPO / folder, target_is_directory=True)
    subprocess.run([sys.executable, "-m", "graphcourse.authoring.mycopy", "--source", str(root / "exercises"),
                    "--to", str(root / "my-work")], cwd=REPO, check=True, capture_output=True)


@contextlib.contextmanager
def lab_server(workdir: Path | None = None, layout: str = "copies") -> Iterator[LabServer]:
    """Start JupyterLab on a temporary root; stop it (and its kernels) whatever happens.

    layout "copies": an empty notebooks/ for add_notebook() beside links to the repository's
    folders; "course": the repository as `make lab` serves it (see _course_layout).
    """
    own_tmp = workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="browser-lab-")) if own_tmp else Path(workdir)
    root, home = workdir / "root", workdir / "jupyter-home"
    root.mkdir(parents=True)
    if layout == "course":
        _course_layout(root)
    else:
        _link_repo_folders(root)
    settings_dir = home / "lab-user-settings"
    settings = dict(LAB_SETTINGS)
    if layout == "course":  # JupyterLab's default windowing, as a learner has it: long lessons open faster
        settings.pop("@jupyterlab/notebook-extension/tracker.jupyterlab-settings")
    for rel, value in settings.items():
        path = settings_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))

    # Run All stops at an error only for requests that reach the kernel within
    # stop_on_error_timeout of it; ipykernel's default, 0 s, lets a busy machine run the next cell.
    kernel_config = home / "ipython" / "profile_default" / "ipython_kernel_config.py"
    kernel_config.parent.mkdir(parents=True, exist_ok=True)
    kernel_config.write_text("c.Kernel.stop_on_error_timeout = 2.0\n")

    env = dict(os.environ)
    env.update(
        JUPYTER_CONFIG_DIR=str(home / "config"),
        JUPYTER_DATA_DIR=str(home / "data"),
        JUPYTER_RUNTIME_DIR=str(home / "runtime"),
        JUPYTERLAB_SETTINGS_DIR=str(settings_dir),
        JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
        IPYTHONDIR=str(home / "ipython"),
        MPLCONFIGDIR=str(home / "matplotlib"),
        MPLBACKEND="module://matplotlib_inline.backend_inline",
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")])),
        PYTHONUNBUFFERED="1",
    )
    env.pop("JUPYTER_PATH", None)
    env.pop("JUPYTER_TOKEN", None)
    if layout == "course":  # the course's Jupyter Server settings, as `make lab` has them (bootstrap.lab_env)
        env["JUPYTER_CONFIG_PATH"] = str(REPO / "graphcourse" / "lab_settings")
    else:
        env.pop("JUPYTER_CONFIG_PATH", None)

    port, token = free_port(), secrets.token_hex(24)
    cmd = [
        sys.executable, "-m", "jupyterlab",
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        "--LabApp.news_url=",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        # window.jupyterapp: lets the test read the notebook model and the kernel state
        "--LabApp.expose_app_in_browser=True",
    ]
    if layout == "course":  # the JupyterLab defaults `make lab` gives (bootstrap.LAB_SETTINGS_DIR)
        cmd.append(f"--LabApp.app_settings_dir={REPO / 'graphcourse' / 'lab_settings'}")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    log_path = workdir / "jupyterlab.log"
    log = open(log_path, "wb")
    proc = subprocess.Popen(
        cmd, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL, start_new_session=True,
    )
    server = LabServer(root=root, port=port, token=token, proc=proc, log_path=log_path)
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"JupyterLab exited with code {proc.returncode} while starting:\n"
                    + server.log_tail()
                )
            try:
                server.api("status", timeout=2)
                break
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"JupyterLab did not answer within {SERVER_START_S}s:\n" + server.log_tail()
                )
            time.sleep(0.25)
        yield server
        failed = False
    except BaseException:
        failed = True
        raise
    finally:
        server.shutdown_kernels()
        _kill_tree(proc)
        log.close()
        if own_tmp and not failed:  # after a failure, keep the log for the message
            shutil.rmtree(workdir, ignore_errors=True)


# --------------------------------------------------------------------------------------
# The browser
# --------------------------------------------------------------------------------------


@contextlib.contextmanager
def chromium_browser() -> Iterator[object]:
    """Headless Debian Chromium through Playwright; closed whatever happens."""
    from playwright.sync_api import sync_playwright

    pw = sync_playwright().start()
    browser = None
    try:
        browser = pw.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS,
            timeout=PAGE_LOAD_S * 1000,
        )
        yield browser
    finally:
        if browser is not None:
            with contextlib.suppress(Exception):
                browser.close()
        with contextlib.suppress(Exception):
            pw.stop()


# --------------------------------------------------------------------------------------
# A scratch lesson: the smallest notebook that honours the slider contract
# --------------------------------------------------------------------------------------

SCRATCH_CELLS = [
    ("markdown", "# Scratch lesson\nA slider with the `batch-size-slider` class redraws text and a plot."),
    ("code", "import warnings\nwarnings.warn('a warning on stderr is not an error')"),
    ("code",
     "import ipywidgets as widgets\n"
     "import matplotlib.pyplot as plt\n"
     "from IPython.display import display\n"
     "%matplotlib inline\n"
     "\n"
     "slider = widgets.IntSlider(value=8, min=1, max=64, description='batch size',\n"
     "                           continuous_update=False)\n"
     "slider.add_class('batch-size-slider')\n"
     "out = widgets.Output()\n"
     "\n"
     "def draw(batch):\n"
     "    with out:\n"
     "        out.clear_output(wait=True)\n"
     "        print(f'batch size {batch}: {1000 / batch:.1f} us per sequence')\n"
     "        fig, ax = plt.subplots(figsize=(4, 2.5))\n"
     "        xs = list(range(1, 65))\n"
     "        ax.plot(xs, [1000 / x for x in xs])\n"
     "        ax.axvline(batch, color='red')\n"
     "        ax.set_xlabel('batch size')\n"
     "        plt.show()\n"
     "\n"
     "slider.observe(lambda change: draw(change['new']), names='value')\n"
     "draw(slider.value)\n"
     "display(widgets.VBox([slider, out]))"),
]


def write_notebook(path: Path, cells: list[tuple[str, str]]) -> Path:
    """Write a minimal nbformat-4 notebook with the given (cell_type, source) cells."""
    nb_cells = []
    for i, (kind, source) in enumerate(cells):
        cell = {"cell_type": kind, "id": f"cell-{i}", "metadata": {}, "source": source}
        if kind == "code":
            cell.update(execution_count=None, outputs=[])
        nb_cells.append(cell)
    nb = {
        "cells": nb_cells,
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)",
                           "language": "python"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(nb, indent=1))
    return path


# --------------------------------------------------------------------------------------
# Driving one notebook in the page
# --------------------------------------------------------------------------------------

# The notebook panel for a path, its kernel and its code cells, read from JupyterLab's
# own model (window.jupyterapp, exposed by --LabApp.expose_app_in_browser).
_JS_STATE = """(path) => {
  const app = window.jupyterapp;
  if (!app) return {found: false, why: 'JupyterLab not loaded yet'};
  let panel = null, open = [];
  for (const w of app.shell.widgets('main')) {
    if (w.context) open.push(w.context.path);
    if (w.context && w.context.path === path && w.content && w.content.model) panel = w;
  }
  if (!panel) return {found: false, why: 'notebook panel not open yet'};
  const sc = panel.sessionContext;
  const kernel = sc && sc.session ? sc.session.kernel : null;
  const cells = [];
  let widgetOutputs = 0;
  const model = panel.content.model;
  for (let i = 0; i < model.cells.length; i++) {
    const c = model.cells.get(i);
    if (c.type !== 'code') continue;
    const outs = c.outputs.toJSON();
    const errors = outs.filter(o => o.output_type === 'error')
      .map(o => `cell ${i}: ${o.ename}: ${o.evalue}`);
    widgetOutputs += outs.filter(
      o => o.data && o.data['application/vnd.jupyter.widget-view+json']).length;
    cells.push({index: i, count: c.executionCount, errors});
  }
  const running = [...panel.node.querySelectorAll('.jp-InputArea-prompt')]
    .filter(p => p.textContent.includes('*')).length;
  return {found: true, ready: !!(sc && sc.isReady), kernel: kernel ? kernel.status : null,
          connection: kernel ? kernel.connectionStatus : null, cells, running, open, widgetOutputs,
          nCells: model.cells.length, domCells: panel.node.querySelectorAll('.jp-Cell').length};
}"""

# What a learner would see broken in the page.
_JS_PROBLEMS = """() => {
  const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
  if (!panel) return {errors: ['no notebook panel in the page'], loading: 0, widgetViews: 0};
  const tb = /Traceback \\(most recent call last\\)|^\\s*Cell In\\[\\d+\\], line \\d+|^-{20,}\\s*$/m;
  const lastLine = /^[A-Za-z_][\\w.]*(Error|Exception|Exit|Interrupt)\\b(:.*)?$/;
  const errors = [], warnings = [];
  for (const el of panel.querySelectorAll(
      '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')) {
    const text = el.innerText || '';
    const lines = text.split('\\n').map(l => l.trim()).filter(Boolean);
    const last = lines.length ? lines[lines.length - 1] : '';
    if (tb.test(text) || lastLine.test(last)) errors.push('error output: ' + (last || text).slice(0, 300));
    else warnings.push(text.slice(0, 200));
  }
  // ipywidgets' view renderer: an output panel without data-mime-type that holds
  // "Loading widget..." until the view is made, then a .jupyter-widgets element.
  const views = [...panel.querySelectorAll('.jp-OutputArea-output:not([data-mime-type])')]
    .filter(v => !v.classList.contains('lm-mod-hidden'));
  let loading = 0;
  for (const v of views) {
    const t = (v.textContent || '').trim();
    if (t.startsWith('Loading widget')) loading += 1;
    if (t.startsWith('Error displaying widget')) errors.push('widget: ' + t.slice(0, 200));
  }
  for (const el of panel.querySelectorAll('.jupyter-widgets-error-widget'))
    errors.push('widget failed to render: ' + (el.innerText || '').trim().slice(0, 200));
  // Without the widget extension, JupyterLab falls back to the text repr: IntSlider(value=...)
  for (const el of panel.querySelectorAll('.jp-OutputArea-output[data-mime-type="text/plain"]')) {
    const t = (el.innerText || '').trim();
    if (/^(Int|Float|Selection)?\\w*(Slider|Box|Output|interactive)\\((children|value|layout|description|options|outputs)=/.test(t))
      errors.push('widget shown as text (is the ipywidgets JupyterLab extension missing?): ' + t.slice(0, 120));
  }
  const rendered = views.filter(v => v.querySelector('.jupyter-widgets')).length;
  return {errors, warnings, loading, widgetViews: views.length, renderedViews: rendered};
}"""

# The rendered output that the slider drives: text of its Output widget(s) and plot images.
_JS_SLIDER_OUTPUT = """(sliderSel) => {
  const slider = document.querySelector(sliderSel);
  if (!slider) return null;
  const cell = slider.closest('.jp-Cell');
  const notebook = slider.closest('.jp-Notebook') || document;
  let scopes = cell ? [...cell.querySelectorAll('.widget-output')] : [];
  if (!scopes.length) scopes = [...notebook.querySelectorAll('.widget-output')];
  if (!scopes.length && cell) scopes = [...cell.querySelectorAll('.jp-Cell-outputArea')];
  const text = scopes.map(s => {
    if (s.classList.contains('widget-output')) return (s.innerText || '').trim();
    // fallback scope (a whole output area): leave out the slider's own label and readout
    const clone = s.cloneNode(true);
    clone.querySelectorAll('.widget-slider, .widget-readout').forEach(e => e.remove());
    return (clone.textContent || '').trim();
  }).join('\\n---\\n');
  const images = [];
  for (const s of scopes) {
    for (const img of s.querySelectorAll('img')) images.push(img.getAttribute('src') || '');
    for (const svg of s.querySelectorAll('[data-mime-type="image/svg+xml"]')) images.push(svg.innerHTML);
  }
  const handle = slider.matches('[role="slider"]') ? slider : slider.querySelector('[role="slider"]');
  return {text, images, outputs: scopes.length,
          value: handle ? handle.getAttribute('aria-valuenow') : null,
          valueText: handle ? handle.getAttribute('aria-valuetext') : null,
          min: handle ? handle.getAttribute('aria-valuemin') : null,
          max: handle ? handle.getAttribute('aria-valuemax') : null};
}"""

SLIDER_HANDLE = f'.{SLIDER_CLASS} [role="slider"], [role="slider"].{SLIDER_CLASS}'


class StepTimeout(AssertionError):
    """A step of the browser test did not finish within its time limit."""


def _digest(items: list[str]) -> list[str]:
    import hashlib

    return [hashlib.sha1(i.encode()).hexdigest()[:12] for i in items]


@dataclass
class NotebookPage:
    """One notebook open in JupyterLab in its own browser context."""

    page: object
    path: str  # relative to the server root, e.g. notebooks/02_launch_tax.ipynb
    dialogs: list[str] = field(default_factory=list)  # unexpected dialogs seen

    # ---- pop-ups -----------------------------------------------------------------------
    def handle_popups(self) -> None:
        """Answer JupyterLab's news question and kernel dialog if they show up."""
        page = self.page
        news = page.locator(".Toastify__toast").filter(has_text="official Jupyter news")
        if news.count():
            with contextlib.suppress(Exception):
                news.first.get_by_role("button", name="No", exact=True).click(timeout=2000)
        dialog = page.locator(".jp-Dialog")
        if dialog.count() and dialog.first.is_visible():
            text = (dialog.first.inner_text(timeout=2000) or "").strip()
            if text.startswith("Select Kernel"):  # keep the preselected (notebook's) kernel
                with contextlib.suppress(Exception):
                    dialog.first.locator(".jp-Dialog-button.jp-mod-accept").click(timeout=2000)
            else:
                self.dialogs.append(text[:300])
                with contextlib.suppress(Exception):
                    dialog.first.locator(".jp-Dialog-button").last.click(timeout=2000)

    def _poll(self, what: str, limit_s: float, check, interval: float = 0.25):
        """Call check() until it returns something truthy; fail after limit_s seconds."""
        deadline = time.monotonic() + limit_s
        last = None
        while True:
            self.handle_popups()
            if self.dialogs:  # e.g. "Kernel Restarting": the kernel died
                raise AssertionError(f"{self.path}: {what}: unexpected dialog: {self.dialogs}")
            last = check()
            if last and not (isinstance(last, tuple) and not last[0]):
                return last
            if time.monotonic() > deadline:
                raise StepTimeout(f"{self.path}: {what} not done within {limit_s:.0f}s; "
                                  f"last state: {str(last)[:800]}")
            time.sleep(interval)

    # ---- state ---------------------------------------------------------------------------
    def state(self) -> dict:
        return self.page.evaluate(_JS_STATE, self.path)

    def problems(self) -> dict:
        return self.page.evaluate(_JS_PROBLEMS)

    def slider_output(self) -> dict | None:
        return self.page.evaluate(_JS_SLIDER_OUTPUT, SLIDER_HANDLE)

    # ---- steps ---------------------------------------------------------------------------
    def open(self, url: str) -> None:
        self.page.goto(url, timeout=PAGE_LOAD_S * 1000)
        self._poll("opening the notebook", PAGE_LOAD_S, lambda: self.state().get("found"))

    def wait_kernel_idle(self, limit_s: float = KERNEL_IDLE_S) -> dict:
        def idle():
            s = self.state()
            ok = s.get("found") and s.get("ready") and s.get("kernel") == "idle" \
                and s.get("connection") == "connected" and not s.get("running")
            return s if ok else (False, s)
        return self._poll("kernel idle", limit_s, idle)

    def run_all(self, limit_s: float = RUN_ALL_S) -> dict:
        """Run > Run All Cells from the menu bar; wait until every cell ran or one failed."""
        page = self.page
        self.handle_popups()
        page.locator(".lm-MenuBar-itemLabel").filter(has_text=re.compile(r"^Run$")).click()
        label = page.locator(".lm-Menu-itemLabel").filter(has_text=re.compile(r"^Run All Cells$"))
        page.locator(".lm-Menu-item").filter(has=label).click()

        def finished():
            s = self.state()
            cells = s.get("cells") or []
            errors = [e for c in cells for e in c["errors"]]
            done = all(c["count"] is not None for c in cells) or errors
            ok = done and s.get("kernel") == "idle" and not s.get("running")
            return s if ok else (False, s)
        state = self._poll("running all cells", limit_s, finished, interval=0.5)
        return state

    def wait_widgets(self, limit_s: float = WIDGETS_S) -> dict:
        """Wait until no widget says "Loading widget..."; return what is wrong in the page."""
        try:
            return self._poll("widgets rendering", limit_s,
                              lambda: (lambda p: p if p["loading"] == 0 else (False, p))(
                                  self.problems()))
        except StepTimeout:
            return self.problems()

    def slider_handle(self):
        return self.page.locator(SLIDER_HANDLE).first

    def move_slider(self, keys: list[str] | None = None) -> tuple[dict, dict]:
        """Focus the batch-size slider's handle, press keys (default: 4 x ArrowRight, or
        ArrowLeft near the maximum); wait for the redraw.

        Returns the rendered output (text, images, slider value) before and after.
        """
        handle = self.slider_handle()
        handle.scroll_into_view_if_needed(timeout=10_000)
        before = self.slider_output()
        if not keys:
            keys = ["ArrowRight"] * 4
            with contextlib.suppress(TypeError, ValueError):
                if float(before["value"]) + 4 > float(before["max"]):
                    keys = ["ArrowLeft"] * 4
        handle.focus()
        for key in keys:
            self.page.keyboard.press(key)
            time.sleep(0.15)

        def redrawn():
            now = self.slider_output()
            s = self.state()
            changed = (now and now["value"] != before["value"]
                       and now["text"] != before["text"]
                       and _digest(now["images"]) != _digest(before["images"])
                       and now["images"]
                       and s.get("kernel") == "idle")
            return now if changed else (False, _summary(now))
        self._poll("redraw after moving the slider", SLIDER_UPDATE_S, redrawn, interval=0.3)
        # let the last queued update settle: the output must stay the same for a moment
        prev = None
        for _ in range(20):
            self.wait_kernel_idle()
            now = self.slider_output()
            if prev is not None and now["text"] == prev["text"] and now["images"] == prev["images"]:
                break
            prev = now
            time.sleep(0.5)
        return before, now

    def screenshot_slider(self, path: Path) -> Path:
        """Screenshot the output area of the slider's cell (slider, text and plot)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        cell = self.page.locator(".jp-Cell").filter(has=self.page.locator(SLIDER_HANDLE))
        target = cell.last.locator(".jp-Cell-outputArea")
        try:
            target.scroll_into_view_if_needed(timeout=5000)
            target.screenshot(path=str(path), timeout=15_000)
        except Exception:
            self.slider_handle().scroll_into_view_if_needed(timeout=5000)
            self.page.screenshot(path=str(path))
        return path


def _summary(out: dict | None) -> dict | None:
    if not out:
        return out
    return {**out, "text": out["text"][-200:], "images": _digest(out["images"])}


@contextlib.contextmanager
def open_notebook(browser, server: LabServer, rel_path: str) -> Iterator[NotebookPage]:
    """Open rel_path in a new page; close the page and shut the kernels down afterwards.

    ``browser`` is a Playwright Browser (the page gets a context of its own) or a
    BrowserContext (pages share its HTTP cache, so JupyterLab loads faster the second time).
    """
    own_context = hasattr(browser, "new_context")
    context = new_context(browser) if own_context else browser
    page = None
    try:
        page = context.new_page()
        nb = NotebookPage(page=page, path=rel_path)
        nb.open(server.notebook_url(rel_path))
        yield nb
    finally:
        with contextlib.suppress(Exception):
            (context if own_context else page).close()
        server.shutdown_kernels()


def new_context(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    context.set_default_timeout(30_000)
    return context


def lesson_slug(path: str | Path) -> str:
    return Path(path).stem


def check_lesson(browser, server: LabServer, notebook: Path, shots: Path,
                 keys: list[str] | None = None, log=print) -> dict:
    """The whole learner journey for one notebook; raises AssertionError on a problem.

    Writes <shots>/<lesson>-slider-before.png and -after.png (and <lesson>-failure.png
    when something fails); returns a report. ``keys`` are the keys pressed on the focused
    slider handle (see NotebookPage.move_slider).
    """
    t0 = time.monotonic()
    timings: dict[str, float] = {}
    rel = server.add_notebook(notebook)
    slug = lesson_slug(notebook)
    with open_notebook(browser, server, rel) as nb:
        timings["open"] = time.monotonic() - t0
        try:
            report = _journey(nb, notebook, rel, shots, slug, keys, timings, t0)
        except Exception as exc:
            failure = Path(shots) / f"{slug}-failure.png"
            with contextlib.suppress(Exception):
                failure.parent.mkdir(parents=True, exist_ok=True)
                nb.page.screenshot(path=str(failure), full_page=True)
            raise AssertionError(
                f"{exc}\n(page: {failure}; JupyterLab log: {server.log_path})") from exc
    log(f"{notebook}: slider {report['value'][0]} -> {report['value'][1]}, "
        f"timings {report['timings']}")
    return report


def _journey(nb: NotebookPage, notebook: Path, rel: str, shots: Path, slug: str,
             keys: list[str] | None, timings: dict, t0: float) -> dict:
    nb.wait_kernel_idle()
    timings["kernel idle"] = time.monotonic() - t0
    state = nb.run_all()
    timings["run all"] = time.monotonic() - t0
    assert state["open"] == [rel], f"documents open besides {rel}: {state['open']}"
    assert state["domCells"] == state["nCells"], (  # windowingMode "none" did not apply?
        f"only {state['domCells']} of {state['nCells']} cells are in the page")
    problems = nb.wait_widgets()
    model_errors = [e for c in state["cells"] for e in c["errors"]]
    not_run = [c["index"] for c in state["cells"] if c["count"] is None]
    assert not model_errors and not problems["errors"], (
        f"{notebook}: errors in the page:\n  " + "\n  ".join(model_errors + problems["errors"]))
    assert not not_run, f"{notebook}: cells never ran: {not_run}"
    assert problems["loading"] == 0, (
        f"{notebook}: {problems['loading']} widget(s) stuck at 'Loading widget...'")
    assert state["widgetOutputs"] > 0, f"{notebook}: no cell displays a widget"
    assert problems["widgetViews"] >= state["widgetOutputs"] \
        and problems["renderedViews"] == problems["widgetViews"], (
        f"{notebook}: {state['widgetOutputs']} widget outputs, {problems['widgetViews']} widget "
        f"views in the page, {problems['renderedViews']} rendered (is the ipywidgets "
        f"JupyterLab extension installed?)")
    assert nb.page.locator(SLIDER_HANDLE).count() > 0, (
        f"{notebook}: no slider with class {SLIDER_CLASS!r} (slider.add_class"
        f"({SLIDER_CLASS!r})) and a role=slider handle in the page")
    first = nb.slider_output()
    assert first["outputs"] > 0 and first["text"], (
        f"{notebook}: the slider's Output widget shows no text: {_summary(first)}")
    assert first["images"], f"{notebook}: the slider's Output widget shows no plot"
    before_png = nb.screenshot_slider(shots / f"{slug}-slider-before.png")
    before, after = nb.move_slider(keys)
    timings["slider"] = time.monotonic() - t0
    after_png = nb.screenshot_slider(shots / f"{slug}-slider-after.png")
    late = nb.problems()
    assert not late["errors"], (
        f"{notebook}: errors after moving the slider:\n  " + "\n  ".join(late["errors"]))
    assert not nb.dialogs, f"{notebook}: unexpected dialogs: {nb.dialogs}"
    return {
        "notebook": str(notebook),
        "value": (before["value"], after["value"]),
        "text": (before["text"], after["text"]),
        "images": (_digest(before["images"]), _digest(after["images"])),
        "screenshots": (before_png, after_png),
        "warnings": len(problems["warnings"]),
        "timings": {k: round(v, 1) for k, v in timings.items()},
    }


def main(argv: list[str]) -> int:
    """Refresh docs/screenshots/<lesson>-slider-{before,after}.png for the given lessons."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=SCREENSHOT_DIR)
    parser.add_argument("--keys", nargs="+", default=None, metavar="KEY",
                        help="keys pressed on the slider handle, e.g. --keys End or "
                             "--keys PageUp PageUp (default: 4 x ArrowRight)")
    args = parser.parse_args(argv)
    reason = chromium_missing_reason()
    if reason:
        print(reason)
        return 2
    with lab_server() as server, chromium_browser() as browser:
        context = new_context(browser)
        for notebook in args.notebooks:
            report = check_lesson(context, server, notebook.resolve(), args.out, args.keys)
            print("wrote", *report["screenshots"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
