"""Shared pytest set-up: the test tiers, marked by the fixtures a test uses; one line at the end of a run that skipped
the browser tests (no Chromium here).

Tiers: ``make test-fast`` runs ``-m "not slow and not browser"`` (every unit and property test: no kernels run by
the grader, no JupyterLab, browser, class server or built site), ``make test`` runs everything. A test is ``slow``
because of what it uses, never by a mark written on it: the fixtures in :data:`SLOW_FIXTURES` grade a class with the
confined grader, build the site or the browser build, or start JupyterLab; a test that starts such a process itself
asks for the :func:`course_process` fixture, which says so.
"""

from __future__ import annotations

import os

import pytest

from browser_support import pytest_terminal_summary  # noqa: F401  (a pytest hook)

SLOW_FIXTURES = {
    "course_process": "starts the grader, a pytest over notebooks, JupyterLab or a build in a process of its own",
    "graded": "grades a class with the confined grader",
    "graded_books": "grades a class with the confined grader",
    "graded_class": "grades the adversarial class with the confined grader",
    "graded_cleared": "grades the adversarial class with the confined grader",
    "regraded": "grades a class three times",
    "built": "builds the site or the browser course",
    "server": "serves the browser course",
    "page": "drives a browser",
    "node": "installs the browser build's runtime",
    "lab": "starts JupyterLab",
    "course_lab": "starts JupyterLab",
    "browser": "drives a browser",
}


@pytest.fixture(scope="session", autouse=True)
def _one_model_run_per_test_run(tmp_path_factory) -> None:
    """Every grader the tests start keeps its model answers' run in one folder of this test run (not ~/.cache), shared
    by the pytest workers: the suite runs the course's model answers once, not once per graded class."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    os.environ.setdefault("GRAPHCOURSE_MODEL_CACHE", str(shared / "model-runs"))


@pytest.fixture
def course_process() -> None:
    """Asked for by a test that starts a heavy process itself (see SLOW_FIXTURES): it puts the test in the slow tier."""
    return None


def pytest_collection_modifyitems(config, items) -> None:
    slow: dict[str, int] = {}
    for item in items:
        if set(getattr(item, "fixturenames", ())) & SLOW_FIXTURES.keys():
            item.add_marker(pytest.mark.slow)
            slow[_module(item)] = slow.get(_module(item), 0) + 1
    # In parallel (make test: pytest-xdist, --dist loadfile) each module runs whole on one worker, so its session and
    # module fixtures (a graded class, a built site, a JupyterLab) are made once. The modules with the most slow tests
    # go first, so that no long module starts last while the other worker idles; the order is the same in every
    # worker, as xdist requires.
    first = {name: rank for rank, name in enumerate(sorted(slow, key=lambda n: (-slow[n], n)))}
    items.sort(key=lambda item: first.get(_module(item), len(first)))


def _module(item) -> str:
    """The test module of an item; a notebook's path for nbval's cells (make test runs them in the same session)."""
    module = getattr(item, "module", None)
    return module.__name__ if module is not None else str(item.path)
