"""Recorded GPU results load from the repository's data/ folder whatever the working directory, with clear errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from graphcourse.lessons import reference
from graphcourse.errors import GraphCourseError, ReferenceDataError, ReferenceDataMissingError

ROOT = Path(__file__).resolve().parent.parent
PROVENANCE = {"gpu_name": "NVIDIA H200", "date_utc": "2026-11-30T12:34:56Z", "torch": "2.11.0+cu130"}


def write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "ref.json"
    path.write_text(json.dumps(data))
    return path


def test_default_path_is_the_repo_data_folder_not_the_cwd(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert reference.default_reference_path() == ROOT / "data" / "gpu_reference.json"


def test_label_names_gpu_date_and_torch(tmp_path: Path) -> None:
    data = reference.load_reference(write(tmp_path, {"provenance": PROVENANCE, "chain": {"rows": []}}))
    assert reference.recorded_label(data) == "recorded on NVIDIA H200, 2026-11-30, torch 2.11.0+cu130"


def test_missing_file_says_how_to_get_it(tmp_path: Path) -> None:
    with pytest.raises(ReferenceDataMissingError) as info:
        reference.load_reference(tmp_path / "absent.json")
    assert "python -m graphcourse.gpulib.bench" in str(info.value)
    assert isinstance(info.value, GraphCourseError) and isinstance(info.value, FileNotFoundError)


def test_file_without_provenance_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ReferenceDataError, match="provenance"):
        reference.load_reference(write(tmp_path, {"chain": {}}))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ReferenceDataError, match="not valid JSON"):
        reference.load_reference(bad)


def test_missing_section_lists_what_is_there(tmp_path: Path) -> None:
    data = reference.load_reference(write(tmp_path, {"provenance": PROVENANCE, "chain": {"rows": [1]}}))
    assert reference.section("chain", data) == {"rows": [1]}
    with pytest.raises(ReferenceDataError, match="no section 'decode' \\(they have: chain\\)"):
        reference.section("decode", data)


def test_committed_reference_came_from_a_gpu_run() -> None:
    data = reference.load_reference()
    assert reference.recorded_label(data).startswith("recorded on ")
    assert "NVIDIA" in data["provenance"]["gpu_name"]
    # the course's own benchmark recorded it
    assert re.match(r"python -m graphcourse\.gpulib\.bench( |$)", data["provenance"]["command"])
    for name in ("chain", "decode", "bucketed", "item_sync", "targets"):
        assert reference.section(name, data)
    assert [r["batch"] for r in data["decode"]["rows"]] == [1, 2, 4, 8, 16, 32, 64]
    assert all(r["replay_matches_eager"] for r in data["decode"]["rows"])


def test_lesson_02_reads_the_two_launch_prices_as_about_twice() -> None:
    """Lesson 02 says a kernel in a model costs 'about twice' a bare launch: the recorded figures must say so too."""
    import nbformat

    costs = reference.load_reference()["costs"]
    ratio, lo, hi = reference.launch_price_ratio(costs)
    assert 1.5 <= ratio < 2.5, f"the medians' ratio is {ratio:.2f}: reword lesson 02's 'about twice'"
    assert lo > 1.0, "the two prices' ranges overlap: 'costs more' would not be an effect"
    nb = nbformat.read(ROOT / "notebooks" / "02_launch_tax.ipynb", as_version=4)
    text = " ".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "costs about twice a bare launch" in text
    assert "two to three times" not in text
    printed = reference.launch_price_lines(costs)
    assert f"{ratio:.2f}x a bare launch" in printed and f"{lo:.2f}x..{hi:.2f}x" in printed
