"""Two graders on one machine never share a kernel uid, not even while the first one's watchdog sweeps its uids."""

from __future__ import annotations

from pathlib import Path

from graphcourse.core.paths import ROOT
from graphcourse.grading.engine import start_watchdog
from graphcourse.grading.sandbox import UidPool


def test_a_runs_uids_stay_taken_until_its_watchdog_has_swept_them(tmp_path: Path) -> None:
    locks = tmp_path / "locks"
    # four uids held in the machine's pool for the whole test: the pools below (with a lock folder of their own) pick
    # from them alone, so the watchdog's sweep never kills the kernel of a grader running beside this test
    reserved = UidPool(4)
    try:
        _race(locks, tmp_path, reserved.uids)
    finally:
        reserved.release()


def _race(locks: Path, tmp_path: Path, uids: list[int]) -> None:
    first = UidPool(2, folder=locks, candidates=uids)
    watchdog = start_watchdog(tmp_path / "scratch", first, ROOT)
    try:
        first.release()  # the grader's own copies of the locks go first, as at the end of a run
        second = UidPool(2, folder=locks, candidates=uids)
        try:
            assert not set(second.uids) & set(first.uids), "a uid went to another grader before the sweep"
        finally:
            second.release()
    finally:
        watchdog.stdin.close()  # the grader ended: the watchdog sweeps, then exits and lets the locks go
        watchdog.wait(timeout=60)
    third = UidPool(2, folder=locks, candidates=uids)
    try:
        assert third.uids == first.uids, "after the sweep the uids are free again"
    finally:
        third.release()


def test_an_unconfined_run_starts_its_watchdog_without_uids(tmp_path: Path) -> None:
    watchdog = start_watchdog(tmp_path / "scratch", None, ROOT)
    watchdog.stdin.close()
    assert watchdog.wait(timeout=60) == 0
