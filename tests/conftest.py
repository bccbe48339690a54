"""Shared pytest set-up: one line at the end of a run that skipped the browser tests (no Chromium here)."""

from browser_support import pytest_terminal_summary  # noqa: F401  (a pytest hook)
