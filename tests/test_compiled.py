"""graphcourse.gpulib.compiled and graphcourse.gpulib.bench_decode_paths without a GPU."""

from __future__ import annotations

import json

import pytest
import torch

from graphcourse.gpulib import bench_decode_paths as bench
from graphcourse.gpulib.compiled import (DEMOS, DemoError, compiled_loop_step, eager_loop_step,
                                         parse_demo_output, timed_first_call)
from graphcourse.gpulib.graphs import GPTConfig, TinyGPT, as_device_position

SMALL = GPTConfig(vocab_size=64, d_model=32, n_layers=1, n_heads=2, max_len=16)


def test_the_demo_output_is_parsed_and_paths_are_shortened() -> None:
    payload = {"kept_output": "RuntimeError: Error: accessing tensor output of CUDAGraphs", "logged":
               ["skipping cudagraphs due to mutated inputs (2 instances)", "at /home/someone/work/model.py:12"]}
    out = parse_demo_output("noise\nDEMO-RESULT " + json.dumps(payload) + "\n")
    assert out["kept_output"] == payload["kept_output"]
    assert out["logged"][1] == "at model.py:12", "no path of the machine that ran it"
    with pytest.raises(DemoError, match="no DEMO-RESULT"):
        parse_demo_output("Traceback ...\nRuntimeError: boom\n")


def test_the_demo_script_is_valid_python_that_needs_cuda_only_when_run() -> None:
    compile(DEMOS, "<demos>", "exec")
    assert "cudagraph_mark_step_begin" in DEMOS and "overwritten" not in DEMOS, \
        "the overwritten-output text must come from torch, not from the script"


def test_an_unknown_compile_mode_is_refused() -> None:
    model = TinyGPT(SMALL)
    with pytest.raises(ValueError, match="reduce-overhead"):
        compiled_loop_step(model, model.new_cache(1), torch.zeros(1, dtype=torch.long),
                           as_device_position(0, "cpu"), mode="fast")


def test_the_compiled_step_gives_the_eager_steps_tokens_on_a_cpu() -> None:
    model = TinyGPT(SMALL, seed=3)
    runs = []
    for make in (eager_loop_step, lambda m, c, t, p: compiled_loop_step(m, c, t, p, mode="default", static=False)):
        cache = model.new_cache(2)
        tokens = torch.tensor([5, 9])
        pos = as_device_position(0, "cpu")
        step = make(model, cache, tokens, pos)
        first, seconds = timed_first_call(step)
        runs.append([first.tolist()] + [step().tolist() for _ in range(6)])
        assert seconds >= 0 and int(pos) == 7, "each call advanced the position on the device tensor"
    assert runs[0] == runs[1]


def test_the_benchmark_refuses_without_cuda(capsys: pytest.CaptureFixture) -> None:
    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is here")
    assert bench.main(["--out", "/nonexistent/never-written.json"]) == bench.NO_CUDA_EXIT
    assert "no CUDA GPU here" in capsys.readouterr().err


def test_the_benchmark_refuses_unknown_sections() -> None:
    with pytest.raises(SystemExit):
        bench.main(["--sections", "paths,speed"])


def _row(path: str, values: list[float]) -> dict:
    return {"path": path, "us_per_token": bench._stats(values), "issue_us_per_token": bench._stats(values),
            "tokens_equal_to_eager": 1.0}


def test_the_target_is_a_ratio_with_its_range_from_the_spreads() -> None:
    data = {"provenance": {"gpu_name": "GPU", "cuda": "13.0", "torch": "2.11", "date_utc": "2026-11-30"},
            "batches": [{"batch": 1, "tokens": 8, "repeats": 3, "rows": [
                _row("eager", [900, 1000, 1100]), _row("reduce_overhead", [160, 162, 170]),
                _row("graph_k1", [178, 180, 181]), _row("compiled_graph_k16", [140, 144, 150])]}]}
    target = bench.targets(data)["batch_1"]
    assert target["best_path"] == "compiled_graph_k16"
    assert target["ratio_to_reduce_overhead"] == pytest.approx(144 / 162)
    assert target["ratio_range"] == pytest.approx([140 / 170, 150 / 160])
    assert target["met"] is True
    assert any("compiled_graph_k16" in line for line in bench.summary_lines(data))


def test_stats_are_median_and_spread() -> None:
    assert bench._stats([3.0, 1.0, 2.0, 10.0]) == {"median": 2.5, "spread": 9.0, "min": 1.0, "max": 10.0}


def test_each_compiled_step_gets_its_own_code_object() -> None:
    from graphcourse.gpulib.compiled import own_code_object

    def make(k: int):
        def step(x: int) -> int:
            return x + k
        return own_code_object(step)

    a, b = make(1), make(2)
    assert a.__code__ is not b.__code__ and a.__code__.co_name != b.__code__.co_name
    assert (a(1), b(1)) == (2, 3), "the functions still work"


def test_the_stand_in_raises_torchs_words_for_a_stale_output_and_clones_survive() -> None:
    from graphcourse.gpulib.compiled import OutputsValidUntilNextCall, StaleOutputError

    step = OutputsValidUntilNextCall(lambda v: [(t * 31 + 7) % 97 for t in v])
    first = step([5])
    kept = first.clone()
    second = step(kept)
    with pytest.raises(StaleOutputError, match="overwritten by a subsequent run"):
        first.tolist()
    assert kept.tolist() == [(5 * 31 + 7) % 97] and second.tolist() == [((5 * 31 + 7) % 97 * 31 + 7) % 97]
    assert step.calls == 2


def test_the_stand_in_takes_back_the_previous_output_before_it_reads_its_input() -> None:
    """As CUDAGraph Trees do after a warm-up or recording call: an output fed back in raw fails at the next call."""
    from graphcourse.gpulib.compiled import OutputsValidUntilNextCall, StaleOutputError

    step = OutputsValidUntilNextCall(lambda v: [t + 1 for t in v])
    first = step([1])
    with pytest.raises(StaleOutputError, match="overwritten by a subsequent run"):
        step(first)
    assert step(step([1]).clone()).tolist() == [3], "a clone fed back is the safe way"


def test_a_failing_benchmark_stage_names_itself_in_the_error() -> None:
    with pytest.raises(RuntimeError, match=r"during timing path 'eager' at batch 8: ValueError: boom") as info:
        with bench._stage("timing path 'eager' at batch 8"):
            raise ValueError("boom")
    assert isinstance(info.value.__cause__, ValueError)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the failure it records is the child's no-CUDA exit: with CUDA "
                    "the section really measures (a GPU run of bench_decode_paths)")
def test_a_section_run_in_a_child_records_its_failure_and_each_section_is_written_as_it_ends(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Without CUDA the traces child exits 2 with nothing measured: the parent records why and goes on."""
    monkeypatch.setattr(bench, "provenance", lambda argv, quick: {"gpu_name": "none (a CPU test)"})
    written: list[dict] = []
    data = bench.run_all(["--sections", "traces"], quick=True, sections=["traces"], after_section=written.append)
    assert "traces" not in data
    assert "exited 2 without results" in data["traces_error"]
    assert "no CUDA GPU" in data["traces_error"], "the child's own one-line reason is kept"
    assert len(written) == 1 and written[0]["traces_error"] == data["traces_error"]
    assert json.loads(json.dumps(written[0]))["section_s"]["traces"] >= 0


def test_the_reduce_overhead_pool_is_read_from_its_real_attribute_or_the_reason_is_recorded() -> None:
    class Manager:
        cuda_graphs_thread_pool = (0, 7)

    class NoPool:
        pass

    import torch._inductor.cudagraph_trees as trees

    seen = []
    for manager, want in ((Manager(), {"reserved_bytes": 1}), (NoPool(), None)):
        original = trees.get_manager
        trees.get_manager = lambda *a, manager=manager, **k: manager
        try:
            got = bench._trees_pool_bytes(lambda pool: seen.append(pool) or {"reserved_bytes": 1})
        finally:
            trees.get_manager = original
        if want is None:
            assert "no cuda_graphs_thread_pool" in got["pool_bytes_error"]
        else:
            assert got == want
    assert seen == [(0, 7)]


def _path_row(path: str, median: float, spread: float, **extra) -> dict:
    half = spread / 2
    stats = {"median": median, "spread": spread, "min": median - half, "max": median + half}
    return {"path": path, "us_per_token": stats, "issue_us_per_token": stats, **extra}


def test_ratio_lines_keep_three_decimals_so_a_range_just_below_one_does_not_look_like_it_touches_it() -> None:
    from graphcourse.lessons.decode_paths import ratio_line

    data = {"compiled_graphs": [{"batch": 8, "rows": [_path_row("a", 341.3, 3.2), _path_row("b", 346.3, 1.0)]}]}
    line = ratio_line(data, 8, "a", "b", part="compiled_graphs")
    assert "= 0.986 (range 0.980-0.992): faster" in line
    data["compiled_graphs"][0]["rows"][0] = _path_row("a", 346.0, 8.0)
    assert "no difference beyond the run-to-run spread" in ratio_line(data, 8, "a", "b", part="compiled_graphs")


def test_one_time_costs_say_what_each_reduce_overhead_call_did_and_that_each_figure_is_one_sample() -> None:
    from graphcourse.lessons.decode_paths import one_time_cost_lines

    ro = _path_row("reduce_overhead", 180.0, 8.0, compile_s=1.3, warmup_and_record_s=0.007)
    text = one_time_cost_lines({"compiled_graphs": [{"batch": 1, "rows": [ro]}]})
    assert "compiled and warmed up (first call) in 1.3 s" in text
    assert "recorded and replayed once (next two calls) in 7 ms" in text
    assert "its memory not measured in the recorded run" in text and "ONE sample" in text
    ro["reserved_bytes"] = 3 * 2**20
    assert "CUDAGraph Trees' pool 3 MiB" in one_time_cost_lines({"batches": [{"batch": 1, "rows": [ro]}]})
    assert "ONE sample" not in one_time_cost_lines({}), "nothing recorded: no figures to qualify"


def test_what_is_not_recorded_is_listed_with_the_reason_the_benchmark_wrote() -> None:
    from graphcourse.lessons.decode_paths import load, unrecorded_lines

    data = {"batches_error": "AcceleratorError: CUDA error: an illegal memory access was encountered\nmore",
            "compiled_graphs": [{"batch": 1, "rows": [_path_row("reduce_overhead", 1.0, 0.0)]}],
            "traces_error": "RuntimeError: during timing path 'eager' at batch 1: boom",
            "if_node": {"supported": False, "reason": "torch 2.11: no begin_capture_to_if_node"}}
    text = unrecorded_lines(data)
    assert text.splitlines()[0].startswith("recorded: compiled kernels captured")
    assert "kernel counts" in text and "illegal memory access was encountered)" in text and "more" not in text
    assert "during timing path 'eager'" in text and "no begin_capture_to_if_node" in text
    assert "reduce-overhead's graph memory: not measured in the recorded run" in text
    assert "max-autotune-no-cudagraphs" in text
    full = {**data, "batches": [{"batch": 1, "rows": [_path_row("reduce_overhead", 1.0, 0.0, reserved_bytes=1)],
                                 "kernels": {"eager": {}}}], "traces": {"eager": {}},
            "if_node": {"supported": True}}
    text = unrecorded_lines(full)
    assert "illegal" not in text and "graph memory" not in text and "traces" in text.splitlines()[0]
    assert len(text.splitlines()) == 2, "only the by-design line is left"
    assert unrecorded_lines(load()).startswith("recorded: "), "the stored file reads"


class _FxNode:
    """Enough of a torch.fx.Node for torch's skip check: a name and no users."""

    name = "add"
    users: dict = {}


@pytest.mark.parametrize("partition", [True, False])
def test_with_graph_partitioning_a_cpu_op_no_longer_makes_reduce_overhead_skip_graphs(partition: bool) -> None:
    """Lesson 07's explanation of the recorded 'CPU tensor input, skips=0', checked in the installed torch."""
    import torch._inductor.config as inductor_config
    from torch._inductor.cudagraph_utils import check_multiple_devices_or_any_cpu_nodes

    from graphcourse.gpulib.compiled import graph_partition_flag

    assert graph_partition_flag() is inductor_config.graph_partition
    nodes = {torch.device("cpu"): _FxNode(), torch.device("cuda", 0): _FxNode()}
    # mode="reduce-overhead" is triton.cudagraphs=True (torch._inductor.list_mode_options)
    assert torch._inductor.list_mode_options("reduce-overhead") == {"triton.cudagraphs": True}
    with inductor_config.patch({"graph_partition": partition, "triton.cudagraphs": True}):
        reason = check_multiple_devices_or_any_cpu_nodes(dict(nodes))
    if partition:
        assert reason is None, "the CPU op is split off and the CUDA partitions are graphed"
    else:
        assert "cpu device (add)" in reason


def test_inductor_makes_torch_cond_and_while_loop_host_side_code_so_no_conditional_node() -> None:
    """Lesson 08: under reduce-overhead (Inductor), torch.cond becomes `if pred.item():`, a sync."""
    import inspect

    from torch._inductor.codegen.wrapper import PythonWrapperCodegen

    cond_source = inspect.getsource(PythonWrapperCodegen.codegen_conditional)
    assert '.item()"' in cond_source and 'writeline(f"if {predicate}:")' in cond_source
    assert "host side while_loop" in inspect.getsource(PythonWrapperCodegen.codegen_while_loop)


def test_only_warm_up_and_recording_mark_kept_outputs_as_overwritten() -> None:
    """Lesson 07's rule, in the installed torch's CUDAGraph Trees: the storage-access error is armed when a
    warm-up or a recording ends, never when a replay (execution) ends."""
    import inspect

    from torch._inductor.cudagraph_trees import CUDAGraphTreeManager as manager

    def arms(method) -> bool:
        return "dealloc_current_path_weakrefs()" in inspect.getsource(method)

    assert "_set_storage_access_error_msg" in inspect.getsource(manager.dealloc_current_path_weakrefs)
    assert arms(manager.try_end_curr_recording) and arms(manager.try_end_curr_warmup)
    assert not arms(manager.try_end_curr_execution)


@pytest.mark.parametrize("path", ["notebooks/07_graphs_by_the_compiler.ipynb",
                                  "notebooks/08_control_flow_on_the_device.ipynb"])
def test_the_compile_notebooks_keep_the_course_rules_for_code_cells(path: str) -> None:
    """No code line over 100 characters, no `# NBVAL_` comments (tags instead), no error outputs unless tagged."""
    from pathlib import Path

    import nbformat

    nb = nbformat.read(Path(__file__).resolve().parent.parent / path, as_version=4)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        for line in cell.source.splitlines():
            assert len(line) <= 100, f"{path} cell {i}: {len(line)} characters: {line[:60]}..."
            assert "NBVAL" not in line, f"{path} cell {i}: use a cell tag, not a comment"
        if "raises-exception" not in cell.metadata.get("tags", []):
            assert not [o for o in cell.get("outputs", []) if o.get("output_type") == "error"], f"{path} cell {i}"
