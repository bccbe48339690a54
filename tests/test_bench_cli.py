"""The benchmarks' shared command line (graphcourse.gpulib.bench_cli): options, sections, the no-CUDA refusal, and
JSON written atomically without losing a file it cannot read."""

from __future__ import annotations

import json
import os

import pytest
import torch

from graphcourse.gpulib import bench_cli


def _run(tmp_path, argv, monkeypatch, cuda=True, **options):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    seen = {}

    def measure(args, argv):
        seen["args"], seen["argv"] = args, argv
        return ["one line", "two lines"]

    code = bench_cli.run("graphcourse.gpulib.example", "Measures an example.\n\nMore.", argv, measure,
                         recorded="Lesson 99 shows data/example.json.", out=tmp_path / "x.json", **options)
    return code, seen


def test_sections_are_taken_comma_or_space_separated_in_the_order_given(tmp_path, monkeypatch, capsys):
    code, seen = _run(tmp_path, ["--sections", "b,a", "c", "--quick"], monkeypatch, quick="fewer",
                      sections=("a", "b", "c"), default_sections=("a",))
    assert code == 0 and seen["args"].sections == ["b", "a", "c"] and seen["args"].quick
    assert seen["argv"] == ["--sections", "b,a", "c", "--quick"]
    assert capsys.readouterr().out == "one line\ntwo lines\n"


def test_the_default_sections_and_out(tmp_path, monkeypatch):
    code, seen = _run(tmp_path, [], monkeypatch, sections=("a", "b", "c"), default_sections=("a", "c"))
    assert code == 0 and seen["args"].sections == ["a", "c"] and seen["args"].out == tmp_path / "x.json"
    assert not hasattr(seen["args"], "quick"), "no --quick where the benchmark has none"


def test_an_unknown_section_is_an_error_that_names_the_choices(tmp_path, monkeypatch, capsys):
    with pytest.raises(SystemExit) as exc:
        _run(tmp_path, ["--sections", "a,zz"], monkeypatch, sections=("a", "b"))
    assert exc.value.code == 2
    assert "unknown section(s) zz: choose from a, b" in capsys.readouterr().err


def test_without_cuda_nothing_is_measured_and_one_line_says_where_the_figures_are(tmp_path, monkeypatch, capsys):
    code, seen = _run(tmp_path, [], monkeypatch, cuda=False)
    assert code == bench_cli.NO_CUDA_EXIT and not seen
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no CUDA GPU here" in err and "Lesson 99 shows data/example.json." in err


def test_write_json_replaces_the_file_whole_and_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "deep" / "r.json"
    bench_cli.write_json(target, {"a": 1})
    bench_cli.write_json(target, {"b": [1, 2]})
    assert json.loads(target.read_text()) == {"b": [1, 2]}
    assert [p.name for p in target.parent.iterdir()] == ["r.json"]
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask, "as readable as a file written with open()"


def test_update_json_keeps_other_sections_and_starts_a_new_file_as_asked(tmp_path):
    target = tmp_path / "r.json"
    assert bench_cli.update_json(target, {"s": 1}, new_file={"provenance": {"p": 1}}) == {"provenance": {"p": 1},
                                                                                         "s": 1}
    assert bench_cli.update_json(target, {"t": 2}, new_file={"ignored": True}) == {"provenance": {"p": 1}, "s": 1,
                                                                                   "t": 2}


@pytest.mark.parametrize("text", ["{not json", "[1, 2]"])
def test_update_json_refuses_a_file_it_cannot_read_and_leaves_it_as_it_was(tmp_path, text):
    target = tmp_path / "r.json"
    target.write_text(text)
    with pytest.raises(SystemExit, match="not overwriting it"):
        bench_cli.update_json(target, {"s": 1})
    assert target.read_text() == text
