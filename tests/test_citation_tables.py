"""The citation tables capture_sizes.py and engines.py read from TOML files beside them (capture_sizes_sources.toml,
engine_facts.toml): a wheel carries them, every [files] entry is cited, and a broken entry is named with its file."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from graphcourse.gpulib import capture_sizes as C
from graphcourse.lessons import engines as E

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "graphcourse"


def test_the_wheel_carries_every_toml_file_of_the_package():
    """setuptools installs what [tool.setuptools.package-data] globs from the package's folder, and nothing else."""
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["graphcourse"]
    carried = {path for pattern in patterns for path in PACKAGE.glob(pattern)}
    assert {C._SOURCES_FILE, E._DATA} <= set(PACKAGE.rglob("*.toml")) <= carried


def test_every_cited_file_is_used_and_every_fact_names_one():
    data = tomllib.loads(E._DATA.read_text())
    used = [entry["source"] for entry in data["facts"]]
    assert set(used) == set(data["files"]), "a [files] entry no fact cites"
    assert len(data["facts"]) == len(E.FACTS) and len(data["reports"]) == len(E.REPORTS)


def test_a_fact_missing_a_field_names_the_file_and_the_fact(tmp_path):
    broken = tmp_path / "engine_facts.toml"
    broken.write_text(E._DATA.read_text().replace('where = "class CUDAGraphMode"\n', "", 1))
    with pytest.raises(ValueError, match=r"engine_facts\.toml: \[\[facts\]\] 'mode_pairs': missing fields \['where'\]"):
        E._read_facts(broken)
    broken.write_text(E._DATA.read_text().replace('source = "trees"', 'source = "tree"', 1))
    with pytest.raises(ValueError, match=r"'trees_one_pool': source 'tree' is none of the \[files\]"):
        E._read_facts(broken)


def test_a_source_missing_a_key_names_the_file_and_the_rule(tmp_path):
    broken = tmp_path / "capture_sizes_sources.toml"
    broken.write_text(C._SOURCES_FILE.read_text().replace('function = "VllmConfig._set_cudagraph_sizes"\n', "", 1))
    with pytest.raises(ValueError, match=r"capture_sizes_sources\.toml: \[vllm_sizes\] has the keys"):
        C._read_sources(broken)


def test_the_browser_wheel_and_the_autograder_bundle_carry_them_too():
    """The lite build's graphcourse wheel carries each table beside its module; Gradescope's bundle takes .toml."""
    from graphcourse.authoring import lite
    from graphcourse.grading import gradescope_bundle

    data = lite.course_data(["graphcourse.gpulib", "graphcourse.lessons"])
    assert data["graphcourse/gpulib/capture_sizes_sources.toml"] == C._SOURCES_FILE
    assert data["graphcourse/lessons/engine_facts.toml"] == E._DATA
    assert not [k for k in lite.course_data(["graphcourse.core"]) if k.endswith(".toml")], "only beside its module"
    assert ".toml" in gradescope_bundle.FOLDERS["graphcourse"]
