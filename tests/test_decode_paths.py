"""graphcourse.lessons.decode_paths' plot on a CPU: both panels on one linear axis from 0, medians on the bars, the palette."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
from matplotlib.colors import to_hex  # noqa: E402

from graphcourse.lessons.decode_paths import plot_paths  # noqa: E402
from graphcourse.lessons.palette import color, hatch  # noqa: E402


def _row(path: str, t: float, cpu: float) -> dict:
    return {"path": path, "us_per_token": {"median": t, "min": t - 1, "max": t + 2, "spread": 3},
            "issue_us_per_token": {"median": cpu, "min": cpu - 0.5, "max": cpu + 0.5, "spread": 1}}


DATA = {"provenance": {"gpu_name": "a test GPU", "date_utc": "2026-01-01", "torch": "x", "cuda": "y"},
        "batches": [{"batch": 1, "rows": [_row("graph_k1", 186.1, 21.5), _row("graph_k16", 164.0, 3.0)]},
                    {"batch": 8, "rows": [_row("graph_k1", 350.7, 30.0), _row("graph_k16", 341.3, 10.4)]}]}


def _markdown(lesson: str) -> str:
    """Every markdown cell of notebooks/LESSON.ipynb, joined: the lesson's prose that the tests below read."""
    import nbformat

    nb = nbformat.read(ROOT / "notebooks" / f"{lesson}.ipynb", as_version=4)
    return " ".join(c.source for c in nb.cells if c.cell_type == "markdown")


def test_panels_share_one_linear_axis_from_zero_and_label_each_bar_with_its_median() -> None:
    fig = plot_paths(DATA)
    try:
        left, right = fig.axes[:2]
        assert left.get_xscale() == right.get_xscale() == "linear"
        assert left.get_xlim() == right.get_xlim() and left.get_xlim()[0] == 0
        assert left.get_xlim()[1] > 352.7, "the longest whisker fits"
        texts = {t.get_text() for ax in (left, right) for t in ax.texts}
        assert {"186.1", "164.0", "21.5", "3.0", "350.7", "341.3", "30.0", "10.4"} <= texts
        assert len(left.get_xticks()) >= 4, "readable ticks, not two decades"
        fills = {(to_hex(p.get_facecolor()), p.get_hatch() or "") for p in left.patches}
        assert fills == {(color("kernel").lower(), hatch("kernel")), (color("launch").lower(), hatch("launch"))}
        assert hatch("launch"), "the two bars differ by hatch as well as colour"
    finally:
        plt.close(fig)


def test_shorten_cuts_at_a_word_boundary() -> None:
    from graphcourse.lessons.decode_paths import shorten

    text = "AcceleratorError: CUDA error: an illegal memory access was encountered"
    assert shorten(text, 200) == text
    cut = shorten(text, 40)
    assert len(cut) <= 40 and cut.endswith("…") and text.startswith(cut[:-1]) and text[len(cut) - 1] == " "


def test_bar_effect_lines_come_from_the_data_and_say_what_is_missing() -> None:
    from graphcourse.lessons.decode_paths import bar_effect_lines

    compiled = {"batch": 1, "rows": [_row("graph_k1", 186.1, 21.5), _row("compiled_graph_k1", 163.9, 20.2),
                                     _row("reduce_overhead", 180.1, 179.2)]}
    missing = {**DATA, "batches_error": "RuntimeError: boom\ntrace", "compiled_graphs": [compiled]}
    missing.pop("batches")
    text = bar_effect_lines(missing)
    assert "batch 1: eager and default mode not recorded (RuntimeError: boom)" in text
    assert "compiled kernels, graphs on both sides" in text and "x0.88" in text and "who manages the graph" in text
    assert "batch 8: eager and default mode not recorded" in text and "not recorded either" in text
    full = {**DATA, "batches": [{"batch": 1, "rows": [_row("eager", 600.0, 590.0), _row("graph_k1", 186.1, 21.5),
                                                      _row("compiled_default", 400.0, 380.0)]}]}
    text = bar_effect_lines(full)
    assert "batch 1, compiled kernels without graphs (default mode / eager): time per token x0.67" in text
    assert "batch 1, graphs without compiling (one graph per step / eager): time per token x0.31" in text
    assert "not recorded" not in text.split("batch 8")[0]


def test_cond_capture_line_follows_the_features() -> None:
    from graphcourse.lessons.decode_paths import cond_capture_line

    old = {"torch": "2.11.0+cu130", "cudagraph_conditional_nodes": [], "CUDAGraph.begin_capture_to_if_node": False}
    assert "torch.cond is NOT captured" in cond_capture_line(old, "recorded GPU")
    new = {"torch": "2.13.0", "cudagraph_conditional_nodes": ["if_else_node"],
           "CUDAGraph.begin_capture_to_if_node": True}
    assert "can be captured into IF nodes" in cond_capture_line(new, "here")
    assert cond_capture_line(None, "here") == "here: features not recorded"


def test_lesson_07_reads_the_compiled_graphs_ratios_as_the_recorded_run_says() -> None:
    """Lesson 07's paragraph after the compiled-graphs table: each verdict it states, checked against the data."""
    from graphcourse.lessons import decode_paths as dp

    data = dp.load()
    text = _markdown("07_graphs_by_the_compiler")
    assert "At batch 1 the second ratio's range still lies above 1" in text
    assert "At batch 8 its range straddles 1: no difference beyond the spread" in text
    assert "CPU time per token stayed well under the token's time" in text
    assert dp.ratio_line(data, 1, "reduce_overhead", "compiled_graph_k1", part="compiled_graphs").endswith("slower")
    assert dp.ratio_line(data, 8, "reduce_overhead", "compiled_graph_k1", part="compiled_graphs").endswith(
        "no difference beyond the run-to-run spread")
    for batch in (1, 8):
        row = {r["path"]: r for r in dp.path_rows(data, batch, "compiled_graphs")}["reduce_overhead"]
        assert row["issue_us_per_token"]["max"] < 0.75 * row["us_per_token"]["min"], (batch, row)
    low = dp.ratio_line(data, 1, "reduce_overhead", "compiled_graph_k1", part="compiled_graphs")
    assert 1.0 < float(low.split("= ")[1].split(" ")[0]) < 1.02, "'by about one percent'"


def test_lesson_08_reads_the_cpu_column_as_the_recorded_run_says() -> None:
    """Lesson 08's reading of the CPU column (K steps per graph), each claim checked against the recorded data."""
    from graphcourse.lessons import decode_paths as dp

    data = dp.load()
    text = _markdown("08_control_flow_on_the_device")

    def cpu(batch: int, path: str, part: str = "batches") -> dict:
        return {r["path"]: r for r in dp.path_rows(data, batch, part)}[path]["issue_us_per_token"]

    assert "it falls several-fold at batch 1" in text
    one, sixteen = cpu(1, "graph_k1"), cpu(1, "graph_k16")
    assert one["median"] >= 3 * sixteen["median"] and one["min"] > sixteen["max"], (one, sixteen)
    assert "At batch 8 the first table's fall is smaller than the spread of its one-graph-per-step figure" in text
    one, sixteen = cpu(8, "graph_k1"), cpu(8, "graph_k16")
    assert one["median"] - sixteen["median"] < one["spread"], (one, sixteen)
    assert "shows the fall at batch 8 too, for the compiled kernels captured by hand" in text
    one, sixteen = cpu(8, "compiled_graph_k1", "compiled_graphs"), cpu(8, "compiled_graph_k16", "compiled_graphs")
    assert one["median"] >= 2 * sixteen["median"] and one["min"] > sixteen["max"], (one, sixteen)


def test_lesson_07_says_fusion_changed_the_kernels_not_their_number_as_recorded() -> None:
    """Lesson 07 (issue 21, item 4): 'about as many per step as eager, one fewer', checked against the recorded
    kernel counts of both batch sizes."""
    from graphcourse.lessons import decode_paths as dp

    text = _markdown("07_graphs_by_the_compiler")
    assert "about as many per step as eager, one fewer" in text and "fewer, larger" not in text
    for b in dp.load()["batches"]:
        k = b["kernels"]
        assert k["eager"]["kernels_per_step"] - k["compiled_default"]["kernels_per_step"] == 1, (b["batch"], k)


def test_lesson_07_reads_its_stored_demo_output_on_another_function_call() -> None:
    """Lesson 07 (issue 21, item 3): the bullet on a call to another compiled function says what the stored run of
    the demo printed (the kept output read the other function's value, 11, with no error)."""
    import nbformat

    nb = nbformat.read(ROOT / "notebooks" / "07_graphs_by_the_compiler.ipynb", as_version=4)
    text = _markdown("07_graphs_by_the_compiler")
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "it read *the other function's* result, again with no error" in text
    line = next(ln for ln in printed.splitlines() if "kept across ANOTHER function's call" in ln)
    if "not in this recorded run" not in line:
        assert "no error: the kept output reads 11 (3 expected)" in line, line


def test_one_time_cost_lines_label_each_compile_with_its_process_and_order() -> None:
    """Each compile time carries the process that ran it and its place among that process's compiles, read from
    the recorded data's structure: the 'batches' part ran first in the benchmark's process, 'compiled_graphs' after
    it in a child; no line claims a cache state it did not measure."""
    from graphcourse.lessons import decode_paths as dp

    data = dp.load()
    assert list(data["section_s"])[:2] == ["batches", "compiled_graphs"], "process 1 ran before process 2"
    order = dp.compile_order(data)
    assert order[("batches", 1, "compiled_default")] == (1, 1)
    assert order[("batches", 8, "compiled_default")] == (1, 3), "batch 8 compiled after batch 1's two compiles"
    assert order[("compiled_graphs", 1, "reduce_overhead")] == (2, 1)
    assert order[("compiled_graphs", 1, "compiled_graph_k1")] == (2, 2)
    text = dp.one_time_cost_lines(data)
    assert "cold" not in text and "warm:" not in text
    b1, b8 = text.splitlines()[:2]
    assert "default mode compiled in 7.6 s [process 1, its 1st compile]" in b1
    assert "in 2.8 s [process 1, its 2nd compile]" in b1
    assert "captured by hand in 3.8 s [process 2, its 2nd compile]" in b1
    assert "default mode compiled in 3.1 s [process 1, its 3rd compile]" in b8
    assert "captured by hand in 2.9 s [process 2, its 5th compile]" in b8
    for line in (b1, b8):  # every compile figure on the line has its label
        assert line.count("[process ") == line.count(" compiled ")


def test_lesson_07_says_compiling_changed_the_kernels_as_recorded() -> None:
    """Lesson 07's headline: compiling changes the kernels (GPU time down at batch 1, up at batch 8) and the host
    code that launches them (default mode's CPU bar moved at batch 8); graphs remove the launches."""
    from graphcourse.lessons import decode_paths as dp

    data = dp.load()
    text = _markdown("07_graphs_by_the_compiler")
    assert "fusion saves GPU time" not in text.lower() and "graphs save CPU time" not in text
    assert "compiling changes the kernels (and the host code that launches them); graphs remove the launches" in text
    k = {b["batch"]: b["kernels"] for b in data["batches"]}
    assert k[1]["compiled_default"]["kernel_us_per_step"] < k[1]["eager"]["kernel_us_per_step"], "shorter at batch 1"
    assert k[8]["compiled_default"]["kernel_us_per_step"] > k[8]["eager"]["kernel_us_per_step"], "longer at batch 8"
    assert "its GPU time shorter at batch 1 and longer at batch 8" in text
    rows = {r["path"]: r for r in dp.path_rows(data, 8)}
    a, b = rows["compiled_default"]["issue_us_per_token"], rows["eager"]["issue_us_per_token"]
    assert a["max"] < b["min"], "default mode's batch-8 CPU bar is shorter beyond the spread"
    assert "at batch 8 default mode's CPU bar fell as well" in text


def test_lesson_07_table_says_one_pool_per_device_and_thread() -> None:
    """CUDAGraph Trees keep their tree manager (and pool) per device in thread-local storage (`get_container`)."""
    import inspect

    from torch._inductor import cudagraph_trees

    assert "local" in inspect.getsource(cudagraph_trees.get_container)
    text = _markdown("07_graphs_by_the_compiler")
    assert "one pool per device and thread" in text and "one pool per device)" not in text


def _ratio(line: str) -> tuple[float, float, float]:
    ratio = float(line.split("= ")[1].split(" ")[0])
    lo, hi = (float(x) for x in line.split("(range ")[1].split(")")[0].split("-"))
    return ratio, lo, hi


def test_lesson_08_reads_k_steps_time_per_token_as_recorded() -> None:
    """Lesson 08: 16 steps per graph against one changed the time per token by at most about 5 %; and the question
    whether K steps per graph bring the step below reduce-overhead's time, answered per batch as the data says."""
    from graphcourse.lessons import decode_paths as dp

    data = dp.load()
    text = _markdown("08_control_flow_on_the_device")
    assert "couple of percent" not in text and "the course's target" not in text
    assert "changed it by at most about 5 %" in text and "by at most about 5 %" in text.split("## Check yourself")[1]
    changes = [_ratio(dp.ratio_line(data, b, "graph_k16", "graph_k1")) for b in (1, 8)] + \
        [_ratio(dp.ratio_line(data, b, "compiled_graph_k16", "compiled_graph_k1", part="compiled_graphs"))
         for b in (1, 8)]
    assert all(0.95 <= lo and hi <= 1.0 for _, lo, hi in changes), changes
    assert min(lo for _, lo, _ in changes) < 0.96, "'about 5 %', not 'a couple of percent'"
    # batch 1: only the compiled kernels, 16 steps per graph, beat reduce-overhead, by a few percent
    r, lo, hi = _ratio(dp.ratio_line(data, 1, "compiled_graph_k16", "reduce_overhead", part="compiled_graphs"))
    assert hi < 1 and r > 0.95, r
    assert _ratio(dp.ratio_line(data, 1, "graph_k16", "reduce_overhead"))[1] > 1, "eager kernels: slower at batch 1"
    assert "At batch 1 only the compiled kernels, 16 steps per graph, beat it, by about 3 %" in text
    # batch 8: the eager kernels beat it with one graph per step already; 16 steps per graph add a few percent
    k1 = _ratio(dp.ratio_line(data, 8, "graph_k1", "reduce_overhead"))
    k16 = _ratio(dp.ratio_line(data, 8, "graph_k16", "reduce_overhead"))
    assert k1[2] < 0.7 and k16[2] < 0.7 and k16[0] < k1[0], (k1, k16)
    assert "At batch 8 the eager kernels beat it by about a third with one graph per step already" in text


def test_the_recorded_demos_hold_every_case_lesson_07_reads_with_their_own_provenance(monkeypatch):
    # Lesson 07 reads the kept-across-another-function case and the torch.cond skip from the recorded demos on a
    # machine without a GPU; they were recorded again on their own, so the label must give that run's date.
    from graphcourse.lessons import decode_paths as dp

    data = json.loads((ROOT / "data" / "decode_paths.json").read_text())
    demos = data["demos"]
    for key in ("kept_output", "cloned_output", "other_function", "two_calls_unmarked", "two_calls_marked",
                "skip_mutation", "skip_cpu_tensor", "skip_cond", "decode_plain", "decode_static"):
        assert key in demos, key
    assert "after a call to another compiled function" in demos["other_function"]
    assert demos["skip_cond"]["logged"] == ["skipping cudagraphs due to control flow operator: torch.cond."]
    monkeypatch.setattr("graphcourse.lessons.teaching.cuda_here", lambda: False)
    got, where = dp.demos_live_or_recorded(data)
    assert got is demos
    p = data["demos_provenance"]
    assert where == (f"no CUDA GPU here: recorded on {p['gpu_name']}, {p['date_utc'][:10]}, torch {p['torch']} "
                     f"(CUDA {p['cuda']}), in a child process there")
    assert "/root" not in p["command"] and "/tmp" not in p["command"]
    _, other = dp.demos_live_or_recorded(data, "conditional_demo")
    assert dp.recorded_label(data) in other  # the conditional demo keeps the file's own provenance
