"""Shared pytest set-up: the test tiers, marked by the fixtures a test uses; one line at the end of a run that skipped
the browser tests (no Chromium here).

Tiers: ``make test-fast`` runs ``-m "not slow and not browser"`` (every unit and property test: no kernels run by
the grader, no JupyterLab, browser, class server or built site), ``make test`` runs everything. A test is ``slow``
because of what it uses, never by a mark written on it: the fixtures in :data:`SLOW_FIXTURES` grade a class with the
confined grader, build the site or the browser build, or start JupyterLab; a test that starts such a process itself
asks for the :func:`course_process` fixture, which says so.
"""

from __future__ import annotations

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


@pytest.fixture
def course_process() -> None:
    """Asked for by a test that starts a heavy process itself (see SLOW_FIXTURES): it puts the test in the slow tier."""
    return None


def pytest_collection_modifyitems(config, items) -> None:
    slow_modules = set()
    for item in items:
        if set(getattr(item, "fixturenames", ())) & SLOW_FIXTURES.keys():
            item.add_marker(pytest.mark.slow)
            slow_modules.add(item.module.__name__)
    # In parallel (make test: pytest-xdist, --dist loadgroup), a module with slow tests runs whole on one worker, so
    # its session and module fixtures (a graded class, a built site, a JupyterLab) are made once; every other test
    # goes to whichever worker is free.
    for item in items:
        if item.module.__name__ in slow_modules:
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
