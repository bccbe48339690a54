"""Lesson 10's pure parts on a CPU: DOT parsing, child snippets, the training loop, the section reader, the benchmark's file handling, the gloo plumbing."""

from __future__ import annotations

import ast
import json

import pytest
import torch

from graphcourse.errors import ReferenceDataError
from graphcourse.gpulib import bench_beyond, beyond, multigpu
from graphcourse.lessons import beyond as lesson
from graphcourse.lessons.reference import BEYOND_COMMAND, beyond_label, beyond_section

DOT = """digraph dot {
subgraph cluster_1 {
label="graph_1" graph[style="dashed"];
"graph_1_node_0"[style="solid" shape="rectangle" label=<
<TABLE BORDER="0"><TR><TD>KERNEL</TD><TD>void gemm_kernel</TD></TR></TABLE>>];
"graph_1_node_1"[style="solid" shape="rectangle" label=<
<TR><TD>KERNEL</TD></TR>>];
"graph_1_node_2"[style="solid" label=<<TR><TD>KERNEL</TD></TR>>];
"graph_1_node_3"[style="solid" label="MEMSET"];
"graph_1_node_0" -> "graph_1_node_1" [style="solid"];
"graph_1_node_0" -> "graph_1_node_2";
"graph_1_node_1" -> "graph_1_node_3";
"graph_1_node_2" -> "graph_1_node_3";
}
}
"""


def test_parse_dot_counts_a_diamond_over_multi_line_labels():
    shape = beyond.parse_dot(DOT)
    assert (shape.nodes, shape.edges, shape.kernels) == (4, 4, 3)
    assert shape.longest_path == 3 and shape.widest_level == 2
    assert shape.kinds == {"kernel": 3, "memset": 1}
    assert shape.as_dict()["edges"] == 4


def test_parse_dot_a_chain_has_width_one_and_rejects_non_dot_and_cycles():
    chain = 'digraph d {\n"a"[label="KERNEL"];\n"b"[label="KERNEL"];\n"a" -> "b";\n}'
    shape = beyond.parse_dot(chain)
    assert (shape.nodes, shape.edges, shape.longest_path, shape.widest_level) == (2, 1, 2, 1)
    with pytest.raises(ValueError, match="DOT"):
        beyond.parse_dot("not a graph")
    with pytest.raises(ValueError, match="cycle"):
        beyond.parse_dot('digraph d {\n"a" -> "b";\n"b" -> "a";\n}')


@pytest.mark.parametrize("code", [
    beyond.unjoined_fork_snippet(),
    beyond.NONCAPTURABLE_SNIPPET,
    beyond.unforked_join_snippet(),
    beyond.generator_snippet(True),
    beyond.generator_snippet(False),
    *[beyond.capture_mode_snippet(m, w) for m in beyond.CAPTURE_MODES for w in ("other thread", "same thread")],
    *multigpu.TRAP_SNIPPETS.values(),
])
def test_every_child_snippet_is_valid_python_that_prints_a_result(code):
    ast.parse(code)
    assert "cuda" in code
    if "RESULT" not in code:
        pytest.fail("a child snippet must print its RESULT line")


def test_the_unjoined_snippet_forks_and_never_joins():
    code = beyond.unjoined_fork_snippet()
    live = [line.split("#")[0] for line in code.splitlines()]
    assert any("side.wait_stream(torch.cuda.current_stream())" in line for line in live)
    assert not any("current_stream().wait_stream(side)" in line for line in live)


def test_the_unforked_join_snippet_joins_a_stream_it_never_forked():
    code = beyond.unforked_join_snippet()
    live = [line.split("#")[0] for line in code.splitlines()]
    assert not any("side.wait_stream(torch.cuda.current_stream())" in line for line in live)
    assert any("current_stream().wait_stream(side)" in line for line in live)
    assert any("torch.cuda.stream(side)" in line for line in live)


def test_generator_snippet_registers_only_when_asked():
    assert "REGISTER = True" in beyond.generator_snippet(True)
    assert "REGISTER = False" in beyond.generator_snippet(False)


def test_capture_mode_snippet_refuses_unknown_modes_and_places():
    with pytest.raises(ValueError, match="capture_error_mode"):
        beyond.capture_mode_snippet("strict", "other thread")
    with pytest.raises(ValueError, match="where"):
        beyond.capture_mode_snippet("global", "elsewhere")


def test_result_line_reads_the_last_result():
    out = 'noise\nRESULT {"a": 1}\nmore\nRESULT {"a": 2}\n'
    assert beyond.result_line(out) == {"a": 2}
    assert beyond.result_line("nothing") is None


def test_eager_training_is_reproducible_and_learns_on_cpu():
    config = beyond.TrainConfig(steps=12)
    first = beyond.train_eager(config)
    assert first == beyond.train_eager(config)                      # same weights, data and dropout seed
    assert len(first) == 12 and first[-1] < first[0]
    other = beyond.train_eager(config, rng_seed=5)
    assert other != first                                           # a different dropout seed, other masks


def test_capturable_adamw_needs_a_gpu_tensor_on_this_torch():
    with pytest.raises(AssertionError, match="capturable"):
        beyond.train_eager(beyond.TrainConfig(steps=1), capturable=True)


def test_gpu_parts_refuse_clearly_without_cuda():
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    from graphcourse.errors import NoCudaError

    for fn in (beyond.fork_join, beyond.dropout_replays, beyond.replay_matches_eager_sequence):
        with pytest.raises(NoCudaError):
            fn()
    with pytest.raises(NoCudaError):
        beyond.WholeStepGraph(beyond.TrainConfig())
    with pytest.raises(RuntimeError, match="needs 2 GPUs"):
        multigpu.run_allreduce("nccl")


def test_run_allreduce_refuses_unknown_backends_and_trap_names():
    with pytest.raises(ValueError, match="gloo"):
        multigpu.run_allreduce("mpi")
    with pytest.raises(KeyError, match="fix_stream"):
        multigpu.trap_snippet("nope")


def test_two_process_plumbing_with_gloo_sums_on_both_ranks():
    out = multigpu.run_allreduce("gloo", world=2, sizes=(64,), repeats=1, ops_per_graph=2, replays=2)
    assert [r["rank"] for r in out["ranks"]] == [0, 1]
    for r in out["ranks"]:
        assert "error" not in r, r
        assert r["eager_sum_ok"] and r["eager_sum"] == 3.0
        assert r["rows"][0]["elements"] == 64 and r["rows"][0]["eager_us"] > 0
        assert "graph_us" not in r["rows"][0]                     # gloo runs on the host: nothing to capture
    assert out["nccl_nvls_enable"] == "0"


# --------------------------------------------------------------------------- recorded sections


def _prov(gpus=1):
    return {"gpu_names": ["NVIDIA H200"] * gpus, "gpu_count": gpus, "torch": "2.11.0+cu130", "nccl": "2.27.3",
            "date_utc": "2026-11-30T12:00:00Z", "command": "python -m graphcourse.gpulib.bench_beyond"}


def test_missing_section_is_a_clear_error_naming_the_command():
    with pytest.raises(ReferenceDataError, match="not recorded yet") as info:
        beyond_section("two_gpu", {"provenance": {}})
    assert BEYOND_COMMAND in str(info.value) and "two GPUs" in str(info.value)
    with pytest.raises(ReferenceDataError, match="provenance"):
        beyond_section("beyond", {"beyond": {"streams": {}}})
    with pytest.raises(ReferenceDataError, match="'beyond' and 'two_gpu'"):
        beyond_section("chain", {})
    assert beyond_section("beyond", {"beyond": {"provenance": _prov()}})["provenance"]["gpu_count"] == 1


def test_labels_name_the_gpus_and_nccl_only_for_two():
    assert beyond_label({"provenance": _prov(1)}).startswith("recorded on NVIDIA H200, 2026-11-30, torch 2.11")
    two = beyond_label({"provenance": _prov(2)})
    assert "2 x NVIDIA H200" in two and "NCCL 2.27.3" in two


def test_lesson_lines_say_not_recorded_yet_without_sections():
    section, label = lesson.recorded("beyond", {"provenance": {}})
    assert section is None and label.startswith("not recorded yet")
    for fn in (lesson.stream_lines, lesson.generator_lines, lesson.capture_mode_lines, lesson.training_lines,
               lesson.allreduce_lines, lesson.trap_lines):
        assert "not recorded yet" in fn(None)
    assert lesson.plot_losses(None) is None and lesson.plot_allreduce(None) is None


def test_lesson_lines_show_a_part_the_benchmark_could_not_record():
    section = {"provenance": _prov(), "streams": {"error": "RuntimeError: boom"},
               "unjoined": {"returncode": 1, "errors": ["torch.AcceleratorError: CUDA error: unjoined work"]}}
    text = lesson.stream_lines(section)
    assert "could not record it: RuntimeError: boom" in text
    assert "fork without join: exit 1, torch.AcceleratorError: CUDA error: unjoined work" in text  # still shown
    summary = lesson.stream_summary(section)
    assert "RuntimeError: boom" in summary and "nodes" not in summary and "widest" not in summary


def test_stream_summary_says_no_difference_when_the_ratio_range_includes_one():
    b = _fake_beyond()
    assert "two streams are faster" in lesson.stream_summary(b)
    b["streams"].update(one_over_two=1.05, one_over_two_min=0.95, one_over_two_max=1.2)
    assert "no difference within the spread" in lesson.stream_summary(b)


def test_long_messages_are_wrapped_whole_never_cut():
    msg = "AcceleratorError: CUDA error: operation failed due to a previous error during capture"
    b = _fake_beyond()
    b["capture_modes"]["global"]["other thread"]["capture"] = msg + " " + msg
    text = lesson.capture_mode_lines(b)
    assert " ".join(text.split()).count(msg) == 2
    assert all(len(line) <= 100 for line in text.splitlines())


def test_capture_mode_summary_compares_every_cell_with_the_prediction():
    ok = {"unsafe_call": "ok", "capture": "ok, replay gives 3.0"}
    no = {"unsafe_call": "AcceleratorError: x", "capture": "AcceleratorError: y"}
    modes = {"global": {"other thread": no, "same thread": no},
             "thread_local": {"other thread": ok, "same thread": no},
             "relaxed": {"other thread": ok, "same thread": ok}}
    section = {"provenance": _prov(), "capture_modes": modes}
    assert "All 6 recorded cells match" in lesson.capture_mode_summary(section)
    modes["relaxed"]["same thread"] = no
    text = " ".join(lesson.capture_mode_summary(section).split())
    assert "5 of 6" in text and "relaxed/same thread: predicted allowed, recorded refused" in text


def test_training_summary_judges_the_same_arithmetic_and_explains_the_drift():
    b = _fake_beyond()
    t = b["training"]
    assert "re-run" in lesson.training_summary(b)                  # an old recording: no verdict
    t["max_rel_diff"] = {"graph_vs_eager_capturable": 2e-7, "partial_vs_eager": 0.0,
                         "graph_vs_eager_default": 1e-2, "eager_capturable_vs_eager_default": 1e-2,
                         "graph_bf16_vs_eager_bf16": 1e-3}
    t["rel_diff_per_step"] = {"graph_vs_eager_capturable": [0.0, 1e-7, 2e-7],
                              "graph_vs_eager_default": [0.0, 6e-8, 1e-2],
                              "eager_capturable_vs_eager_default": [0.0, 6e-8, 1e-2]}
    text = " ".join(lesson.training_summary(b).split())
    assert "meets the criterion" in text and "does not" not in text and "Python floats" in text
    t["rel_diff_per_step"]["graph_vs_eager_capturable"][1] = 1e-4
    assert "does not meet" in " ".join(lesson.training_summary(b).split())
    assert "same AdamW (capturable=True)" in lesson.training_lines(b)


def test_allreduce_summary_reads_the_ratio_ranges():
    rows = [{"bytes": 1024, "speedup": 3.0, "speedup_min": 2.0, "speedup_max": 4.0},
            {"bytes": 4 << 20, "speedup": 1.1, "speedup_min": 0.9, "speedup_max": 1.6}]
    two = {"provenance": _prov(2), "allreduce": {"ranks": [{"rank": 0, "rows": rows}]}}
    text = " ".join(lesson.allreduce_summary(two).split())
    assert "faster, every repeat, at 1 KiB" in text and "No difference within the spread" in text
    assert "4096 KiB" in text


def _fake_beyond():
    row = {"replay_us": 10.0, "replay_us_min": 9.0, "replay_us_max": 11.0, "matches_eager": True,
           "shape": {"nodes": 16, "edges": 15, "kernels": 16, "longest_path": 8, "widest_level": 2}}
    t = {"config": {"depth": 4, "width": 256, "batch": 32, "dropout": 0.1, "steps": 3}, "kernels_per_eager_step": 60,
         "max_rel_diff": {"graph": 1e-6}, "autocast_cache_refusal": "make_graphed_callables does not support",
         "losses": {"eager": [1.0, 0.9, 0.8], "graph": [1.0, 0.9, 0.8]}}
    for k in ("eager_step_us", "graph_step_us", "partial_step_us", "eager_bf16_step_us", "graph_bf16_step_us",
              "graph_speedup", "partial_speedup", "graph_bf16_speedup"):
        t.update({k: 2.0, f"{k}_min": 1.5, f"{k}_max": 2.5})
    return {
        "provenance": _prov(),
        "streams": {"work": "w", "two_streams": row, "one_stream": dict(row, shape={"error": "no dump"}),
                    "one_over_two": 1.5, "one_over_two_min": 1.4, "one_over_two_max": 1.6},
        "unjoined": {"returncode": 1, "errors": ["torch.AcceleratorError: CUDA error: unjoined"]},
        "rng": {"has_register_generator_state": True,
                "dropout": {"p": 0.5, "n": 100, "replays": 2, "dropped_fraction": [0.5, 0.49],
                            "eager_dropped_fraction": [0.5, 0.51], "values": [0.0, 2.0], "replays_differ": True},
                "sequence": {"replay_equals_eager": [True], "eager_offsets": [0, 4], "replay_offsets": [0, 4]},
                "generators": {"registered": {"returncode": 0, "errors": [],
                                              "result": {"replays_differ": True, "offset_after": 12}},
                               "unregistered": {"returncode": 1, "errors": ["RuntimeError: Attempt"],
                                                "result": None}}},
        "capture_modes": {"global": {"other thread": {"unsafe_call": "AcceleratorError: x", "capture": "ok"}}},
        "training": t,
    }


def test_lesson_lines_render_a_recorded_section():
    b = _fake_beyond()
    text = lesson.stream_lines(b)
    assert "16 nodes, 15 edges" in text and "shape not read: no dump" in text and "1.50 (1.40–1.60)x" in text
    assert "unjoined" in text
    gen = lesson.generator_lines(b)
    assert "replays differ: True, offset after 3 replays 12" in gen and "error: RuntimeError: Attempt" in gen
    assert "AcceleratorError" in lesson.capture_mode_lines(b)
    assert "2.0 (1.5–2.5) µs/step" in lesson.training_lines(b)
    fig = lesson.plot_losses(b, live={"eager": [1.0, 0.95]})
    assert len(fig.axes[0].lines) == 3


def test_allreduce_and_trap_lines_and_plot():
    row = {"bytes": 1024, "eager_us": 30.0, "eager_us_min": 29.0, "eager_us_max": 31.0, "graph_us": 10.0,
           "graph_us_min": 9.0, "graph_us_max": 11.0, "speedup": 3.0, "speedup_min": 2.8, "speedup_max": 3.2}
    two = {"provenance": _prov(2),
           "allreduce": {"ranks": [{"rank": 0, "eager_sum_ok": True, "graph_sum_ok": True, "graph_sums": [3.0],
                                    "expected_sum": 3.0, "rows": [row]}, {"rank": 1, "error": "boom"}]},
           "trap": {"trap": {"returncode": 1, "errors": ["torch.AcceleratorError: not permitted"], "result": None},
                    "fix_stream": {"returncode": 0, "errors": [], "result": {"replay_value": 2.0}}}}
    text = lesson.allreduce_lines(two)
    assert "rank 1: error boom" in text and "eager 30.0 (29.0–31.0) µs" in text
    trap = lesson.trap_lines(two)
    assert "failed: torch.AcceleratorError: not permitted" in trap and "replay gives 2.0" in trap
    assert lesson.plot_allreduce(two) is not None


def test_toy_fork_join_overlaps_and_an_unjoined_fork_raises():
    from toygraph import CaptureError

    sg, out = lesson.toy_fork_join()
    sg.replay()
    assert out.tolist() == [10.0, 18.0, 26.0]
    assert sg.last_replay_us < sg.serial_us
    assert lesson.draw_stream_graph(sg, "toy") is not None
    with pytest.raises(CaptureError, match="cudaErrorStreamCaptureUnjoined"):
        lesson.toy_fork_join(join=False)


# --------------------------------------------------------------------------- the benchmark's file handling


def test_update_json_replaces_only_its_sections_and_keeps_the_rest(tmp_path):
    path = tmp_path / "ref.json"
    path.write_text(json.dumps({"provenance": {"gpu_name": "x"}, "chain": [1], "two_gpu": {"old": True}}))
    bench_beyond.update_json(path, {"beyond": {"provenance": _prov()}})
    data = json.loads(path.read_text())
    assert data["chain"] == [1] and data["two_gpu"] == {"old": True} and data["beyond"]["provenance"]
    assert not list(tmp_path.glob(".*.tmp"))                          # the temporary file was renamed over it


def test_update_json_refuses_a_broken_file_without_touching_it(tmp_path):
    path = tmp_path / "ref.json"
    path.write_text("{broken")
    with pytest.raises(SystemExit, match="not valid JSON"):
        bench_beyond.update_json(path, {"beyond": {}})
    assert path.read_text() == "{broken"


def test_summaries_give_median_min_max():
    assert bench_beyond.summarise("t", [3.0, 1.0, 2.0]) == {"t": 2.0, "t_min": 1.0, "t_max": 3.0}
    assert bench_beyond.ratio_summary("r", [4.0, 6.0], [2.0, 2.0]) == {"r": 2.5, "r_min": 2.0, "r_max": 3.0}
    with pytest.raises(ValueError, match="no measurements"):
        bench_beyond.summarise("t", [])


def test_benchmark_refuses_without_cuda(tmp_path, capsys):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert bench_beyond.main(["--out", str(tmp_path / "x.json")]) == bench_beyond.NO_CUDA_EXIT
    assert "no CUDA GPU" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()


def test_ranks_that_do_not_finish_are_killed_and_reported():
    out = multigpu.run_allreduce("gloo", world=2, sizes=(64,), repeats=1, ops_per_graph=50, replays=5000,
                                 timeout_s=2)
    assert out["timed_out"]
    assert [r["error"] for r in out["ranks"]] == [f"no result from rank {r}: timed out after 2 s" for r in (0, 1)]


def test_benchmark_main_writes_its_section_and_skips_two_gpus_on_one(tmp_path, monkeypatch, capsys):
    out = tmp_path / "ref.json"
    out.write_text(json.dumps({"provenance": {}, "chain": [1]}))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(bench_beyond, "run_beyond", lambda argv, quick: _fake_beyond())
    monkeypatch.setattr(bench_beyond, "run_two_gpu", lambda argv, quick: pytest.fail("needs two GPUs"))
    assert bench_beyond.main(["--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["chain"] == [1] and data["beyond"]["streams"]["work"] == "w" and "two_gpu" not in data
    printed = capsys.readouterr().out
    assert "section two_gpu skipped: it needs two GPUs and this machine has 1" in printed
    assert "training: eager 2, graph 2, partial 2 µs/step" in printed


def test_the_join_without_fork_line_shows_the_cause_then_what_later_calls_returned():
    # The recorded run's first error is the one the lesson names (cudaErrorStreamCaptureIsolation's message, pinned
    # against cuda-bindings by tests/test_beyond_cuda.py); the line shows it, then the invalidated capture's error.
    section = beyond_section("beyond")
    errors = section["unforked_join"]["errors"]
    text = " ".join(lesson.stream_lines(section).split())
    assert errors[0].endswith("dependency created on uncaptured work in another stream"), errors
    assert errors[-1].endswith("operation failed due to a previous error during capture"), errors
    assert f"join without fork: exit 1, {errors[0]} then: {errors[-1]}" in text
    import nbformat
    from graphcourse.core.paths import ROOT
    nb = nbformat.read(ROOT / "notebooks" / "10_beyond_one_stream.ipynb", as_version=4)
    prose = " ".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "*dependency created on uncaptured work in another stream* (CUDA's message for " \
           "`cudaErrorStreamCaptureIsolation`)" in prose
    shown = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "join without fork: exit 1, torch.AcceleratorError: CUDA error: dependency created" in shown
